"""The fuzzer's program model: typed variables, statements, kernel parameters,
and a Program that renders to the source of a `@ct.kernel` module.

Statements are kept as a tree of source lines (compound statements hold their
bodies) so that the minimizer can drop any of them and render again.
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...language.dtypes import DType
from .tolerance import EXACT, Tol

__all__ = ["Var", "Stmt", "Param", "OutputSpec", "Check", "Program"]

INDENT = "    "


@dataclass
class Var:
    """A tile or scalar (shape ()) value of the program being generated.

    `product`: a float32/float64 multiplication result (or its negation or a
    division by a constant): NVRTC may fuse it with a following add or sub into
    one FMA, so the generator never feeds it to add/sub (see tolerance.py).
    `shadow`: name of a float64 companion value carried along the same layout
    ops and stored next to this one; it bounds the error of a reduction."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    tol: Tol = EXACT
    product: bool = False
    shadow: Optional[str] = None

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


_IDS = itertools.count()


@dataclass
class Stmt:
    """One statement: `code` is a full line, or the header of a compound
    statement (`if c:`, `for i in range(n):`, `while True:`) whose bodies are
    `body` and `orelse` (rendered as `else:` when non-empty)."""

    code: str
    body: list["Stmt"] = field(default_factory=list)
    orelse: list["Stmt"] = field(default_factory=list)
    sid: int = field(default_factory=lambda: next(_IDS))

    @property
    def compound(self) -> bool:
        return self.code.endswith(":")

    def render(self, depth: int, drop: frozenset = frozenset()) -> list[str]:
        pad = INDENT * depth
        if not self.compound:
            return [pad + self.code]
        lines = [pad + self.code]
        lines += _render_block(self.body, depth + 1, drop)
        if self.orelse:
            lines.append(pad + "else:")
            lines += _render_block(self.orelse, depth + 1, drop)
        return lines

    def walk(self):
        yield self
        for s in self.body + self.orelse:
            yield from s.walk()

    def names(self, drop: frozenset = frozenset()) -> tuple[set[str], set[str]]:
        """(names assigned, names read) anywhere in this statement, without the
        statements in `drop`."""
        tree = ast.parse("\n".join(self.render(0, drop)))
        stores, loads = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (stores if isinstance(node.ctx, ast.Store) else loads).add(node.id)
        return stores, loads


def _render_block(stmts: list[Stmt], depth: int, drop: frozenset) -> list[str]:
    lines: list[str] = []
    for s in stmts:
        if s.sid not in drop:
            lines += s.render(depth, drop)
    return lines or [INDENT * depth + "pass"]


@dataclass
class Param:
    """A kernel parameter. Arrays are `base[view]` (view: a tuple of slices or
    None), so strided and offset views survive a save to .npz; `role` is
    'in', 'out', 'shadow' (a companion output, not compared), 'scalar' or
    'const' (a Constant-annotated parameter)."""

    name: str
    role: str
    value: Any = None
    base: Optional[np.ndarray] = None
    view: Optional[tuple] = None
    transpose: bool = False

    @property
    def is_array(self) -> bool:
        return self.base is not None

    def array(self, base: Optional[np.ndarray] = None) -> np.ndarray:
        """The argument as a view of `base` (default: this parameter's own base)."""
        b = self.base if base is None else base
        a = b if self.view is None else b[self.view]
        return a.T if self.transpose else a


@dataclass
class OutputSpec:
    """How an output array is compared: its tolerance and the shadow array
    (the per-element error scale of a reduction) when the tolerance needs one.
    `must_be_true`: a bool array of checks the kernel itself makes (folding.py),
    all True when the interpreter is right."""

    tol: Tol
    shadow: Optional[str] = None
    must_be_true: bool = False


@dataclass
class Check:
    """A scan or fold whose result the NumPy model (reference.py) recomputes
    from its operands: the kernel stores the operands (`ins`, broadcast to
    `shape`) and results (`outs`) flattened into row `bl` of 2-d output arrays
    and sets element `bl` of the bool array `flag` in the same statement.
    kind: 'scan' or 'fold'; func: a key of reference.FUNCS; dtypes: the
    results' dtypes (operands are converted to them: bool cumsum counts in
    int32); axis: normalized; mode: how results compare (reference.py);
    exclusive: an exclusive scan, whose first element (the last one reversed)
    is `identity`, the identity argument's constants (one per result, as
    written: the model converts them to `dtypes`)."""

    kind: str
    func: str
    dtypes: tuple[str, ...]
    shape: tuple[int, ...]
    axis: int
    mode: str = "exact"
    reverse: bool = False
    keepdims: bool = False
    sequential: bool = False
    exclusive: bool = False
    identity: tuple = ()
    ins: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    flag: str = ""


@dataclass
class Program:
    seed: int
    params: list[Param]
    body: list[Stmt]
    grid: tuple[int, ...]
    outputs: dict[str, OutputSpec]
    features: set[str] = field(default_factory=set)
    name: str = "fuzz_kernel"
    text: Optional[str] = None   # the module as saved by a reproducer (replaces `body`)
    checks: list[Check] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)   # module-level functions, as source
    options: dict = field(default_factory=dict)        # kernel options (the decorator's)

    def source(self, drop: frozenset = frozenset()) -> str:
        """The kernel module: imports, then the kernel without statements in `drop`."""
        if self.text is not None:
            return self.text
        sig = []
        for p in self.params:
            sig.append(f"{p.name}: ct.Constant" if p.role == "const" else p.name)
        lines = ["import numpy as np", "import tilecore as ct", "", ""]
        for helper in self.helpers:
            lines += helper.splitlines() + ["", ""]
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        lines += [f"@ct.kernel({opts})" if opts else "@ct.kernel",
                  f"def {self.name}({', '.join(sig)}):"]
        lines += _render_block(self.body, 1, drop)
        return "\n".join(lines) + "\n"

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def statements(self):
        """Every statement, depth first."""
        for s in self.body:
            yield from s.walk()
