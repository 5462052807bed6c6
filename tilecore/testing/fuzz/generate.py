"""The program generator: a seeded random walk that writes a well-typed
`@ct.kernel` and its inputs.

A program is: block ids, tile-space loads of input arrays (partial tiles,
orders, padding modes, tiled views), scalar and Constant parameters, a random
sequence of ops (exprs.py), memory ops and control flow (if/else, for loops
with constant and run-time bounds, while loops with break and continue), then
stores of the values computed. Every block writes its own tiles of each output
(no two blocks, and no two statements, write one element; atomics.py's
commutative atomics aside, whose final contents are the same in any order), so
results do not depend on block order. Each value carries its tolerance class
(tolerance.py); each output array records the class of what is stored in it.
"""
from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import PaddingMode
from . import data
from .catalog import KNOWN_ISSUES
from .model import Check, OutputSpec, Param, Program, Stmt, Var
from .tolerance import CARRIER_ONLY, EXACT, Tol
from .typerules import ARITH, STORAGE_ONLY

__all__ = ["GenConfig", "generate", "Gen"]

_PADDINGS = ("ZERO", "NEG_ZERO", "NAN", "POS_INF", "NEG_INF", "UNDETERMINED")
_DTYPE_WEIGHTS = [
    (D.float32, 6), (D.float16, 2), (D.bfloat16, 2), (D.float64, 1.5), (D.int32, 3),
    (D.int64, 1.5), (D.int8, 1), (D.int16, 1), (D.uint8, 1), (D.uint16, 1), (D.uint32, 1),
    (D.uint64, 1), (D.bool_, 1.5),
]
_STORAGE_WEIGHTS = [(D.float8_e4m3fn, 1), (D.float8_e5m2, 1), (D.float8_e8m0fnu, 0.5),
                    (D.float4_e2m1fn, 0.5)]


@dataclass
class GenConfig:
    """Size and feature switches of generated programs.

    max_ops: most ops in the main sequence (control flow adds nested ones);
    max_elems: the usual tile size bound (some programs get 4x or 16x);
    outside_tiles: arrays may be shorter than the grid covers, so some blocks
    load and store tiles wholly outside them (padding read, stores dropped);
    known_issues: keys of catalog.KNOWN_ISSUES whose patterns to avoid;
    vector_width_chance: how often the kernel sets the vector_width option (the
    tile items a thread holds together, else 16 bytes of its narrowest array's),
    drawn apart from the program so that a seed's program is the same either way."""

    max_ops: int = 14
    max_elems: int = 256
    max_depth: int = 2
    outside_tiles: bool = True
    known_issues: tuple[str, ...] = tuple(KNOWN_ISSUES)
    vector_width_chance: float = 0.25


class Gen:
    """State of one program being generated."""

    def __init__(self, seed: int, cfg: GenConfig):
        self.seed = seed
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.params: list[Param] = []
        self.outputs: dict[str, OutputSpec] = {}
        self.features: set[str] = set()
        self.checks: list[Check] = []     # scans/folds the NumPy model checks (reference.py)
        self.helpers: list[str] = []      # module-level functions (scans.py)
        self.atomic_arrays: dict = {}     # arrays several atomics update (atomics.py)
        self.scopes: list[list[Var]] = [[]]
        self.bodies: list[list[Stmt]] = [[]]   # statement lists being filled
        self.uses: Counter = Counter()
        self.loops: list[str] = []   # kinds of the enclosing loops
        self.depth = 0
        self._counters: dict[str, itertools.count] = {}
        self.grid: tuple[int, int, int] = (1, 1, 1)
        # most programs keep tiles small (fast compiles); some reach 4x and 16x
        self.max_elems = cfg.max_elems * self.rng.choices((1, 4, 16), (16, 3, 1))[0]

    # --- bookkeeping --------------------------------------------------------------------------
    def name(self, prefix: str) -> str:
        counter = self._counters.setdefault(prefix, itertools.count())
        return f"{prefix}{next(counter)}"

    def emit(self, code: str, body: Optional[list[Stmt]] = None,
             orelse: Optional[list[Stmt]] = None) -> Stmt:
        stmt = Stmt(code, body or [], orelse or [])
        self.bodies[-1].append(stmt)
        return stmt

    def define(self, var: Var, expr: str, visible: bool = True) -> Var:
        self.emit(f"{var.name} = {expr}")
        if visible:
            self.scopes[-1].append(var)
        return var

    def visible(self) -> list[Var]:
        return [v for scope in self.scopes for v in scope]

    def pick(self, pred: Callable[[Var], bool]) -> Optional[Var]:
        """A visible value satisfying `pred`, most often one of the latest."""
        cands = [v for v in self.visible() if pred(v)]
        if not cands:
            return None
        tiles = [v for v in cands if v.shape]
        if tiles and self.rng.random() < 0.7:
            cands = tiles   # scalars (block ids, parameters) are everywhere: favour tiles
        if self.rng.random() < 0.6:
            cands = cands[-3:]
        return self.rng.choice(cands)

    def use(self, *vars: Var) -> None:
        for v in vars:
            self.uses[v.name] += 1

    def feature(self, *parts: object) -> None:
        self.features.add(".".join(str(p) for p in parts))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # --- dtypes and shapes --------------------------------------------------------------------
    def dtype(self, storage: float = 0.0, floats_only: bool = False) -> DType:
        table = _DTYPE_WEIGHTS + ([(d, w * storage) for d, w in _STORAGE_WEIGHTS] if storage
                                  else [])
        if floats_only:
            table = [(d, w) for d, w in table if d.is_float]
        dts, ws = zip(*table)
        return self.rng.choices(dts, ws)[0]

    def shape(self, rank: Optional[int] = None, max_elems: Optional[int] = None) -> tuple:
        limit = max_elems or self.max_elems
        if rank is None:
            rank = self.rng.choices((1, 2, 3), (0.45, 0.4, 0.15))[0]
        dims = []
        room = limit
        for _ in range(rank):
            options = [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= room]
            weights = [1 if d in (1, 64) else 2 for d in options]
            d = self.rng.choices(options, weights)[0]
            dims.append(d)
            room //= d
        return tuple(dims)

    # --- parameters ---------------------------------------------------------------------------
    def _array(self, prefix: str, role: str, dtype: DType, shape: tuple,
               special: Optional[float] = None, contiguous: bool = False) -> Param:
        name = self.name(prefix)
        base_shape, view, transpose = ((shape, None, False) if contiguous
                                       else data.layout(self.np, shape))
        if special is None:
            special = float(self.rng.choice((0.0, 0.0, 0.05, 0.2)))
        base = data.values(self.np, dtype, base_shape, special)
        p = Param(name, role, base=base, view=view, transpose=transpose)
        self.params.append(p)
        if view is not None:
            self.feature("layout", "view")
        if transpose:
            self.feature("layout", "transposed")
        return p

    def input_array(self, dtype: DType, shape: tuple, contiguous: bool = False) -> str:
        """A new input parameter; `contiguous`: never a strided view or transpose."""
        return self._array("a", "in", dtype, shape, contiguous=contiguous).name

    def output_array(self, dtype: DType, shape: tuple, tol: Tol,
                     shadow: bool) -> tuple[str, Optional[str]]:
        p = self._array("o", "out", dtype, shape, special=0.0)
        sh = None
        if shadow:
            sh = self._array("z", "shadow", D.float64, shape, special=0.0, contiguous=True).name
        self.outputs[p.name] = OutputSpec(tol, sh)
        return p.name, sh

    def assert_array(self) -> str:
        """A bool output, one element per block, that every block sets True."""
        name = self.name("o")
        self.params.append(Param(name, "out", base=np.ones(self.nblocks, np.bool_)))
        self.outputs[name] = OutputSpec(EXACT, must_be_true=True)
        return name

    def scalar_param(self, dtype: Optional[DType] = None, small: bool = False) -> Var:
        """A run-time scalar parameter: a Python int/float/bool (loosely typed
        rules at launch) or a NumPy scalar of `dtype`."""
        name = self.name("s")
        if small:
            value = self.rng.randint(0, 4)
            if dtype is not None and dtype is not D.int32:
                value = dtype.numpy_dtype.type(value)
            dt = dtype or D.int32
        elif dtype is None:
            kind = self.rng.choice(("int", "float", "bool"))
            value = {"int": self.rng.randint(-5, 20), "float": self.rng.choice((0.5, -2.25, 3.0)),
                     "bool": self.chance(0.5)}[kind]
            dt = D.constant_dtype(value)
        else:
            # ml_dtypes scalars (bfloat16) are refused as kernel arguments: a NumPy
            # float16/float32/float64 or integer scalar stands in (finding F-1)
            if dtype.numpy_dtype.kind not in "biuf":
                dtype = D.float32
            value = data.scalar(self.np, dtype, 0.1)
            dt = dtype
        self.params.append(Param(name, "scalar", value=value))
        self.feature("param", "scalar", dt.name)
        var = Var(name, dt, ())
        self.scopes[0].append(var)
        return var

    def index_param(self, value: int) -> str:
        """A run-time integer parameter of a random integer dtype holding `value`
        (a tile index that is not a compile-time constant, 64-bit ones included)."""
        dt = self.rng.choice((D.int32, D.int64, D.int16, D.uint8, D.uint32, D.uint64))
        var = self.scalar_param(dt, small=True)
        self.params[-1].value = dt.numpy_dtype.type(value) if dt is not D.int32 else value
        self.feature("load", "index_param", dt.name)
        return var.name

    def const_param(self, value) -> str:
        name = self.name("K")
        self.params.append(Param(name, "const", value=value))
        self.feature("param", "constant", type(value).__name__)
        return name

    # --- grid and indices ---------------------------------------------------------------------
    @property
    def nblocks(self) -> int:
        """Blocks in the grid."""
        return self.grid[0] * self.grid[1] * self.grid[2]

    def index_sources(self) -> list[tuple[str, int]]:
        """Block-index expressions and how many distinct values each takes."""
        g0, g1, g2 = self.grid
        out = [("b0", g0), ("bl", self.nblocks)]
        if g1 > 1:
            out.append(("b1", g1))
        if g2 > 1:
            out.append(("b2", g2))
        return out

    def extent(self, blocks: int, tile: int, step: int, start: int = 0) -> int:
        """An array extent along an axis read by `blocks` tiles of `tile` elements
        starting at (start + j) * step: the last tile is partial or full, or
        (outside_tiles) some tiles lie wholly outside."""
        first = start * step
        last = first + (blocks - 1) * step
        if self.cfg.outside_tiles and self.chance(0.25):
            self.feature("tile", "outside")
            return self.rng.randint(max(first, 1), last + tile)
        e = self.rng.randint(last + 1, last + tile)
        if e < last + tile:
            self.feature("tile", "partial")
        if self.chance(0.15):
            e += self.rng.randint(1, tile)   # more data than the grid reads
        return e

    # --- memory -------------------------------------------------------------------------------
    def padding(self, dtype: DType) -> str:
        if dtype.is_float:
            mode = self.rng.choice(_PADDINGS)
        else:
            mode = self.rng.choice(("ZERO", "UNDETERMINED"))
        self.feature("load", "padding", mode)
        if mode == "UNDETERMINED" and self.chance(0.5):
            return ""
        if self.chance(0.1):
            self.feature("param", "constant_padding")
            return f", padding_mode={self.const_param(getattr(PaddingMode, mode))}"
        return f", padding_mode=ct.PaddingMode.{mode}"

    def load(self) -> Var:
        """A tile-space load (or a tiled view's load) of a new input array."""
        dtype = self.dtype(storage=0.15)
        shape = self.shape()
        rank = len(shape)
        sources = self.index_sources()
        idx, counts, steps = [], [], list(shape)
        view = self.chance(0.15)
        for k in range(rank):
            if sources and self.chance(0.7):
                expr, n = sources.pop(self.rng.randrange(len(sources)))
                if expr in ("b0", "bl"):
                    sources = [s for s in sources if s[0] not in ("b0", "bl")]
                idx.append(expr)
                counts.append((n, 0))
            else:
                c = self.rng.choice((0, 0, 1))
                idx.append(str(c) if self.chance(0.75) else self.index_param(c))
                counts.append((1, c))
            if view and self.chance(0.3):
                steps[k] = max(1, shape[k] + self.rng.choice((-shape[k] // 2, 1, 3)))
        order = tuple(range(rank))
        if not view and rank > 1 and self.chance(0.3):
            order = tuple(self.rng.sample(range(rank), rank))
        arr_shape = [0] * rank
        full = True
        for k in range(rank):
            n, start = counts[k]
            e = self.extent(n, shape[k], steps[k], start)
            full &= e >= (start + n - 1) * steps[k] + shape[k]
            arr_shape[order[k]] = e
        a = self.input_array(dtype, tuple(arr_shape))
        t = Var(self.name("t"), dtype, shape)
        index = "(" + ", ".join(idx) + ("," if rank == 1 else "") + ")"
        pad = self.padding(dtype)
        if view:
            v = self.name("v")
            steps_kw = ""
            if tuple(steps) != shape:
                steps_kw = f", traversal_steps={tuple(steps)}"
                self.feature("view", "traversal_steps")
            self.emit(f"{v} = {a}.tiled_view({shape}{pad}{steps_kw})")
            self.define(t, f"{v}.load({index})")
            self.feature("view", "load")
            return t
        kw = ""
        if order != tuple(range(rank)):
            kw = ", order=" + ('"F"' if order == tuple(reversed(range(rank))) and self.chance(0.5)
                               else str(order))
            self.feature("load", "order")
        if full and self.chance(0.2):
            kw += ", check_bounds=False"
            self.feature("load", "check_bounds_false")
        if self.chance(0.1):
            kw += ", latency=2, allow_tma=False"
        shape_src = self.shape_expr(shape)
        self.define(t, f"ct.load({a}, index={index}, shape={shape_src}{kw}{pad})")
        self.feature("load", dtype.name, f"rank{rank}")
        return t

    def shape_expr(self, shape: tuple) -> str:
        """`shape` as source, sometimes through a Constant parameter."""
        if shape and self.chance(0.15):
            k = self.rng.randrange(len(shape))
            name = self.const_param(shape[k])
            parts = [name if i == k else str(s) for i, s in enumerate(shape)]
            self.feature("param", "constant_shape")
            return "(" + ", ".join(parts) + ("," if len(shape) == 1 else "") + ")"
        return str(shape)

    def store(self, v: Var) -> None:
        """Store `v` into a new output array: each block its own tile."""
        shape = v.shape or (1,)
        rank = len(shape)
        g0, g1, g2 = self.grid
        blocks = self.nblocks
        idx = ["0"] * rank
        counts = [1] * rank
        if rank >= 2 and g1 > 1 and g2 == 1 and self.chance(0.5):
            a0, a1 = self.rng.sample(range(rank), 2)
            idx[a0], idx[a1] = "b0", "b1"
            counts[a0], counts[a1] = g0, g1
        else:
            k = self.rng.randrange(rank)
            idx[k], counts[k] = "bl", blocks
        view = v.shape != () and self.chance(0.15)
        order = tuple(range(rank))
        if not view and rank > 1 and self.chance(0.25):
            order = tuple(self.rng.sample(range(rank), rank))
        arr_shape = [0] * rank
        for k in range(rank):
            arr_shape[order[k]] = self.extent(counts[k], shape[k], shape[k])
        out, sh = self.output_array(v.dtype, tuple(arr_shape), v.tol, v.shadow is not None)
        index = "(" + ", ".join(idx) + ("," if rank == 1 else "") + ")"
        self.use(v)
        kw = ""
        if order != tuple(range(rank)):
            kw = f", order={order}"
            self.feature("store", "order")
        for arr, val in ((out, v.name), (sh, v.shadow)):
            if arr is None:
                continue
            if view:
                ov = self.name("v")
                self.emit(f"{ov} = {arr}.tiled_view({shape})")
                self.emit(f"{ov}.store({index}, {val})")
                self.feature("view", "store")
            else:
                self.emit(f"ct.store({arr}, index={index}, tile={val}{kw})")
        self.feature("store", v.dtype.name, "scalar" if v.shape == () else f"rank{rank}")
        if v.tol.kind != "exact":
            self.feature("tol", v.tol.kind)

    # --- the program --------------------------------------------------------------------------
    def prologue(self) -> None:
        g0 = self.rng.choices((1, 2, 3, 4), (1, 3, 2, 2))[0]
        g1 = self.rng.choices((1, 2, 3), (6, 2, 1))[0]
        g2 = 2 if self.chance(0.08) else 1
        self.grid = (g0, g1, g2)
        self.define(Var("b0", D.int32, ()), "ct.bid(0)")
        if g2 > 1:
            self.define(Var("b1", D.int32, ()), "ct.bid(1)")
            self.define(Var("b2", D.int32, ()), "ct.bid(2)")
            self.define(Var("bl", D.int32, ()),
                        "b0 + ct.num_blocks(0) * (b1 + ct.num_blocks(1) * b2)")
            self.feature("grid", "3d")
        elif g1 > 1:
            self.define(Var("b1", D.int32, ()), "ct.bid(1)")
            self.define(Var("bl", D.int32, ()), "b0 + ct.num_blocks(0) * b1")
            self.feature("grid", "2d")
        else:
            self.define(Var("bl", D.int32, ()), "b0")
        for _ in range(self.rng.randint(1, 3)):
            self.load()
        if self.chance(0.5):
            self.scalar_param(self.rng.choice((None, self.dtype())))

    def epilogue(self) -> None:
        sinks = [v for v in self.visible() if self.uses[v.name] == 0
                 and v.name not in ("b0", "b1", "b2", "bl") and v.dtype in ARITH + STORAGE_ONLY]
        tiles = [v for v in sinks if v.shape]
        chosen = tiles[-3:] + [v for v in sinks if not v.shape][-1:]
        if not chosen:
            chosen = [v for v in self.visible() if v.shape][-1:] or [self.load()]
        for v in chosen[:4]:
            self.store(v)


def generate(seed: int, cfg: Optional[GenConfig] = None) -> Program:
    """The program for `seed` (the same seed always gives the same program)."""
    from . import control, exprs
    g = Gen(seed, cfg or GenConfig())
    g.prologue()
    for _ in range(g.rng.randint(3, g.cfg.max_ops)):
        random_op(g, exprs, control)
    g.epilogue()
    options = _kernel_options(seed, g.cfg)
    for name, value in options.items():
        g.feature("option", name, value)
    return Program(seed, g.params, g.bodies[0], g.grid, g.outputs, g.features,
                   checks=g.checks, helpers=g.helpers, options=options)


def _kernel_options(seed: int, cfg: GenConfig) -> dict[str, int]:
    """The kernel options of seed's program, from a random stream of their own."""
    rng = random.Random(f"kernel options {seed}")
    if rng.random() < cfg.vector_width_chance:
        return {"vector_width": rng.choice((1, 2, 8, 16))}
    return {}


def random_op(g: Gen, exprs, control) -> None:
    """One random op (retrying until one applies to the values at hand)."""
    table = list(exprs.OPS.items())
    if g.depth < g.cfg.max_depth:
        table += list(control.OPS.items())
    names, weights = zip(*[(name, w) for name, (w, _) in table])
    for _ in range(8):
        name = g.rng.choices(names, weights)[0]
        fn = dict(table)[name][1]
        if fn(g):
            return


def tile_loop_bound(g: Gen, array: str, shape: tuple, tiles: int) -> str:
    """The trip count of a loop over the `tiles` tiles of `shape` along axis 1 of a
    2-D array: `ct.num_tiles`, a `ct.cdiv` of the array's extent, or an int32
    parameter holding it."""
    r = g.rng.random()
    if r < 0.4:
        return f"ct.num_tiles({array}, 1, {shape})"
    if r < 0.7:
        return f"ct.cdiv({array}.shape[1], {shape[1]})"
    name = g.scalar_param(D.int32).name
    g.params[-1].value = tiles
    return name


def carrier_ok(v: Var) -> bool:
    """True for values that any op may read (not carrier-only)."""
    return v.tol.kind not in CARRIER_ONLY
