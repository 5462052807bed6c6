"""The code-generation context: output lines, value names, tile types and the
small C++ idioms every rule uses (per-element loops, index unravelling)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ...ir.core import Block, Function, Op, Value
from ...ir.types import TileType
from ...language.dtypes import DType
from .cnames import ctype, header_for
from .layout import COMPACT_BUDGET, Layout, row_strides, unrolled_size

__all__ = ["ArrayArg", "Ctx", "unravel"]

# In a compact kernel, the most statements a per-thread loop may have unrolled
# (its trip count times its body); longer loops stay rolled.
UNROLL_LIMIT = 32


@dataclass(frozen=True)
class ArrayArg:
    """C++ names of an array parameter and the launch-checked facts about it."""

    ptr: str
    dims: tuple[str, ...]
    strides: tuple[str, ...]
    dtype: DType
    aligned16: bool
    unit_stride: bool
    whole_vectors: bool = False
    ldg: bool = False    # vector loads through __ldg (ld.global.nc): read-only, and
                         # prefetched, which costs NVVM its own read-only inference

    def stride(self, axis: int) -> str:
        if axis == len(self.dims) - 1 and self.unit_stride:
            return "1"
        return self.strides[axis]


@dataclass
class Frame:
    """What a terminator inside a region does: the variables that `yield`
    assigns, and the innermost loop's carried/result variables."""

    yield_to: list[str]
    loop_carried: Optional[list[str]] = None
    loop_results: Optional[list[str]] = None


@dataclass
class Ctx:
    fn: Function
    threads: int
    vk: int
    line_directives: bool
    arch: str = "sm_90"  # the architecture the source is for (CodegenOptions.arch)
    arrays: dict[int, ArrayArg] = field(default_factory=dict)  # value id -> array
    # value id -> the C++ declarations of the array's kernel parameters
    array_params: dict[int, list[str]] = field(default_factory=dict)
    constants: dict[int, Any] = field(default_factory=dict)    # value id -> its constant value
    packed: set[int] = field(default_factory=set)  # 16-bit float tiles held as tc::Packed16
    _users: Optional[dict[int, list[Op]]] = None
    _definers: Optional[dict[int, Op]] = None
    names: dict[int, str] = field(default_factory=dict)        # value id -> C++ name
    lines: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)  # outlined segments' C++ (outline.py)
    headers: set[str] = field(default_factory=set)
    smem_bytes: int = 0
    slots: int = 0  # block reductions emitted so far (each has its own partials)
    checks: list = field(default_factory=list)  # run-time checks (rules_control.DeviceCheck)
    barriers: Optional[frozenset] = None  # memory ops after a block barrier (ir/block_order.py)
    private: Optional[dict] = None  # id(atomic op) -> its private window (privatize.py)
    frames: list[Frame] = field(default_factory=list)
    emit_block: Callable[["Ctx", Block], None] = None  # set by codegen
    depth: int = 1
    _compact: Optional[bool] = None

    # -- output -------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text if text else "")

    def open(self, text: str) -> None:
        self.line(f"{text} {{" if text else "{")
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self.line(text)

    def loc(self, op: Op) -> None:
        """Mark where an op's code starts (a #line directive when enabled)."""
        if op.loc is None:
            return
        if self.line_directives:
            self.lines.append(f'#line {op.loc.line} "{op.loc.filename}"')
        else:
            name = op.loc.filename.replace("\\", "/").rsplit("/", 1)[-1]
            self.line(f"// {name}:{op.loc.line}: {op.name}")

    @property
    def compact(self) -> bool:
        """Whether the kernel is too large to unroll every per-thread loop
        (layout.unrolled_size over COMPACT_BUDGET). A compact kernel fuses each
        run of element-wise ops (and a reduction of its result) into one loop
        over the thread's elements (fusion.py), keeps loops longer than
        UNROLL_LIMIT statements rolled, so that its code grows with its ops,
        not with ops times elements per thread, and emits its blocks in
        outlined functions of bounded size (outline.py); fragments that a
        rolled loop indexes or a call passes live in local memory. Other
        kernels are emitted fully unrolled, fragments in registers."""
        if self._compact is None:
            self._compact = unrolled_size(self.fn, self.threads, self.vk) > COMPACT_BUDGET
        return self._compact

    def unroll(self, trip: int, body: int = 1) -> str:
        """The pragma before a per-thread loop of `trip` iterations of `body`
        statements: full unrolling, except in a compact kernel when the
        unrolled loop would exceed UNROLL_LIMIT statements."""
        if self.compact and trip * body > UNROLL_LIMIT:
            return "#pragma unroll 1"
        return "#pragma unroll"

    # -- values -------------------------------------------------------------
    def uses(self, dt: DType) -> str:
        h = header_for(dt)
        if h:
            self.headers.add(h)
        return ctype(dt)

    def layout(self, t: TileType) -> Layout:
        return Layout(t.size, self.threads, self.vk)

    def frag(self, t: TileType) -> str:
        return f"tc::Frag<{self.uses(t.dtype)}, {self.layout(t).per_thread}>"

    def users(self, v: Value) -> list[Op]:
        """The ops (terminators included) that take `v` as an operand."""
        if self._users is None:
            self._users = {}
            for op in self.fn.walk():
                for operand in op.operands:
                    self._users.setdefault(operand.id, []).append(op)
        return self._users.get(v.id, [])

    def definer(self, v: Value) -> Optional[Op]:
        """The op whose result `v` is (None for parameters and block arguments)."""
        if self._definers is None:
            self._definers = {r.id: op for op in self.fn.walk() for r in op.results}
        return self._definers.get(v.id)

    def name(self, v: Value) -> str:
        return self.names.setdefault(v.id, f"v{v.id}")

    def declare(self, v: Value, init: str = "") -> str:
        """Declare the C++ variable of a tile value (optionally initialized)."""
        n = self.name(v)
        self.line(f"{self.frag(v.type)} {n}{' = ' + init if init else ''};")
        return n

    def scalar(self, v: Value) -> str:
        """C++ expression of a scalar (0-d, replicated) tile's value."""
        return f"{self.name(v)}.v[0]"

    def helper(self, text: str) -> None:
        """Define a device function (C++ `text`) ahead of every other function
        of the kernel, once."""
        if text not in self.functions:
            self.functions.insert(0, text)

    def need_smem(self, nbytes: int) -> None:
        self.smem_bytes = max(self.smem_bytes, (nbytes + 15) // 16 * 16)

    def new_slot(self) -> int:
        """A number naming one block-reduction call site."""
        self.slots += 1
        return self.slots - 1

    def in_loop(self) -> bool:
        """Whether the code being emitted may run more than once (in a loop body)."""
        return any(f.loop_carried is not None for f in self.frames)

    # -- idioms -------------------------------------------------------------
    def for_each(self, layout: Layout, body: list[str], *, need_e: bool = True) -> None:
        """Emit a loop over this thread's elements k (with e = the
        element's linear index) running `body` (rolled if too long: see unroll)."""
        self.line(self.unroll(layout.per_thread, len(body)))
        self.open(f"for (int k = 0; k < {layout.per_thread}; ++k)")
        if need_e:
            self.line(f"const int e = {layout.elem('k')};")
        for b in body:
            self.line(b)
        self.close()

    def stage(self, src: Value) -> str:
        """Write a tile to shared memory in row-major order and sync; returns
        the typed smem pointer. The caller reads it, then calls unstage()."""
        t = src.type
        ct = self.uses(t.dtype)
        self.need_smem(t.size * t.dtype.itemsize)
        lay = self.layout(t)
        ptr = f"sm{src.id}"
        self.line(f"{ct}* {ptr} = reinterpret_cast<{ct}*>(tc_smem);")
        guard = lay.valid("e")
        store = f"{ptr}[e] = {self.name(src)}.v[k];"
        self.for_each(lay, [f"if ({guard}) {store}" if guard else store])
        self.line("__syncthreads();")
        return ptr

    def unstage(self) -> None:
        self.line("__syncthreads();")


def unravel(e: str, shape: tuple[int, ...]) -> list[str]:
    """C++ expressions of the multi-index of row-major element `e` (0 <= e < the
    tile's size) in `shape`. The outermost axis longer than 1 needs no remainder:
    a (1, N) row tile's column is `e` itself."""
    out = []
    outer = True  # every axis so far has length 1
    for s, rs in zip(shape, row_strides(shape)):
        if s == 1:
            out.append("0")
            continue
        q = e if rs == 1 else f"({e} / {rs})"
        out.append(q if outer else f"({q} % {s})")
        outer = False
    return out
