"""Scans and folds for generated programs: `ct.cumsum` and `ct.cumprod`, and
`ct.scan` / `ct.reduce` (also `sequential=True`) with a combining function
written into the program (a lambda, a nested `def`, a module-level
`@ct.function` or plain function, or a tile function by name: `ct.maximum`,
`max`, ...), over one tile or a pair of tiles. Scans are also exclusive
(`exclusive=True`: each element the fold of the ones before it, the first the
identity argument), seeded with the identity or with a constant that is none
(7 for add): it is put first and never combined.

The functions (reference.FUNCS) are exact integer operators (add and mul
wrapping, max, min, and, or, xor), associative but not commutative ones (take
the left or the right operand, first/last non-zero, the composition of affine
maps on a pair of tiles, (value, index) arg-max/arg-min with ties to the
smaller index, a segmented sum over (flag, value) pairs), and for floats add,
max, min (and, in sequential folds only, the non-associative sub). Which
association a scan or fold uses is the implementation's, so a float add is
compared within the bound of any association (tolerance.scan_tol, with a shadow
of the magnitudes as the sum reductions have); max/min up to the sign of zero;
everything else, and every sequential fold, bit for bit.

Shapes: scans and folds along any axis (negative spellings too) of the tiles at
hand (several segments), whole-tile folds to one element of tiles of 2 to 8192
elements whose one long axis is any of 1 to 3 axes (the backend's
tc::tile_allfold path), and whole-tile folds of a tile loaded in each iteration
of a loop, combined into a loop-carried accumulator. Scans and folds also land
in if/loop bodies like any other op.

Each scan/fold (most of them) stores its operands and results next to a
per-block flag, in one statement, for the NumPy model of reference.py (the
oracle without a GPU); with a GPU they are compared with the interpreter's too.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from .consts import literal
from .generate import Gen, carrier_ok, tile_loop_bound
from .model import Check, OutputSpec, Param, Stmt, Var
from .reference import FUNCS, Func
from .tolerance import EXACT, ZSIGN, Tol, join, scan_tol
from .typerules import ARITH, broadcast, fits

__all__ = ["OPS"]

_INT = {"add": 3, "mul": 1, "max": 2, "min": 2, "and": 1, "or": 1, "xor": 1.5, "left": 1,
        "right": 1, "first_nonzero": 1, "last_nonzero": 1}
_BOOL = {"and": 1, "or": 1, "xor": 1, "left": 0.5, "right": 0.5}
_FLOAT = {"add": 4, "max": 2, "min": 2, "left": 0.5, "right": 0.5, "first_nonzero": 0.3}
_PAIRS = {"affine": 3, "argmax": 1.5, "argmin": 1, "segsum": 1}
# whole-tile sizes: the backend's boundaries (part of a warp, a warp, a block, several
# rounds of warps, 64 warp totals) weigh double
_SIZES = {2: 2, 4: 1, 8: 1, 16: 1, 32: 2, 64: 1, 128: 1, 256: 2, 512: 1, 1024: 2, 2048: 1,
          4096: 1, 8192: 2}
PROBE = 0.9   # the share of scans/folds the NumPy model checks


# --- the combining function ------------------------------------------------------------------
def _pick_func(g: Gen, x: Var, sequential: bool, pairs: bool = True) -> Optional[Func]:
    """A combining function for tiles of x's dtype (pairs: with a second tile)."""
    dt = x.dtype
    if sequential and not dt.is_bool and (dt.is_integer or readable_add(x)) and g.chance(0.3):
        return FUNCS["sub"]   # not associative: a left fold has one answer
    table = dict(_BOOL if dt.is_bool else _FLOAT if dt.is_float else _INT)
    if pairs and not dt.is_bool and g.chance(0.35):
        table = {k: w for k, w in _PAIRS.items() if dt.is_integer or k.startswith("arg")}
    if dt.is_float and not readable_add(x):
        table.pop("add", None)
        table.pop("sub", None)
    if not table:
        return None
    names, ws = zip(*table.items())
    return FUNCS[g.rng.choices(names, ws)[0]]


def readable_add(v: Var) -> bool:
    """Whether a float may be summed: not a product (NVRTC could contract it
    with the combining add into an FMA, tolerance.py) and not carrier-only."""
    return carrier_ok(v) and not v.product


_ARGS = {1: ("ea", "la"), 2: ("ea", "eb", "la", "lb")}


def _callee(g: Gen, f: Func, named: bool = False) -> str:
    """Source of the function argument: a tile function by name, a lambda, or
    the name of a nested def or module-level function defined here. `named`: a
    name that kernel code can also call (a lambda is assigned to one)."""
    params = _ARGS[f.arity]
    names = dict(zip(("e0", "l0") if f.arity == 1 else ("e0", "e1", "l0", "l1"), params))
    exprs = g.rng.choice((f.exprs,) + f.variants)
    r = g.rng.random()
    if f.refs and r < 0.2:
        g.feature("scan_func", "by_name")
        return g.rng.choice(f.refs)
    if r < 0.55:
        let = f"({f.let.format(**names)})" if f.let else ""
        body = [e.format(k=let, **names) for e in exprs]
        src = f"lambda {', '.join(params)}: " + (body[0] if len(body) == 1
                                                   else "(" + ", ".join(body) + ")")
        g.feature("scan_func", "lambda")
        if not named:
            return src
        name = g.name("cf")
        g.emit(f"{name} = {src}")
        return name
    name = g.name("cf")
    lines = [f"k = {f.let.format(**names)}"] if f.let else []
    lines.append("return " + ", ".join(e.format(k="k", **names) for e in exprs))
    if r < 0.8:
        g.emit(f"def {name}({', '.join(params)}):", [Stmt(line) for line in lines])
        g.feature("scan_func", "nested_def")
    else:
        deco = g.chance(0.7)
        g.helpers.append(("@ct.function\n" if deco else "") + f"def {name}({', '.join(params)}):\n"
                         + "\n".join("    " + line for line in lines))
        g.feature("scan_func", "ct_function" if deco else "module_def")
    return name


def _identity(f: Func, dtypes: list[DType], g: Gen) -> tuple:
    """The identity argument's values, one per tile: the function's identity where
    it has one (0 for the functions that have none: tilecore never combines it
    with an item)."""
    def one(name: str, dt: DType):
        if dt.is_bool:
            return {"and": True}.get(name, False)
        if name == "mul":
            return 1
        if name in ("max", "argmax"):
            return -math.inf if dt.is_float else dt.min
        if name in ("min", "argmin"):
            return math.inf if dt.is_float else dt.max
        if name == "and":
            return -1 if dt.signed else dt.max
        if name == "affine":
            return 1
        if dt.is_float:
            return -0.0 if name == "add" and g.chance(0.5) else 0.0
        return 0
    vals = [one(f.name, dtypes[0])]
    if f.arity == 2:
        vals.append(False if dtypes[1].is_bool else 0)
    return tuple(vals)


# an exclusive scan's first element: constants that are mostly no identity (finite and
# exact in every float dtype but 0.1, which each rounds once, as the front end does)
_INT_SEEDS = (7, 1, -1, 3, -100, 100, 127, 255, 1000)
_FLOAT_SEEDS = (7, -3, 0.5, -1.5, 100.0, -7.25, 0.1, -0.0)


def _seed(dt: DType, g: Gen):
    """A constant of `dt` for the identity argument of an exclusive scan, which
    only puts it first and never combines it (ops.scan): any value will do, and
    one that is no identity of the function shows that it is never combined."""
    if dt.is_bool:
        return g.rng.choice((True, False, 0, 1))
    if dt.is_float:
        return g.rng.choice(_FLOAT_SEEDS)
    return g.rng.choice([c for c in _INT_SEEDS if fits(c, dt)] + [dt.min, dt.max])


def _const_src(vals: tuple) -> str:
    """Source of the identity argument: one constant, or a tuple of them."""
    srcs = [literal(v) for v in vals]
    return srcs[0] if len(srcs) == 1 else "(" + ", ".join(srcs) + ")"


# --- operands --------------------------------------------------------------------------------
def _along(g: Gen, n: int, axis: int, rank: int, dtype: DType = D.int32) -> tuple[str, tuple]:
    """An arange of n along `axis` of a rank-`rank` tile (1 elsewhere: the
    front end broadcasts a tuple's tiles), defined as a new invisible value."""
    dims = tuple(n if i == axis else 1 for i in range(rank))
    src = f"ct.arange({n}, dtype=ct.int32)"
    if rank > 1:
        src += f".reshape({dims})"
    if dtype is not D.int32:
        src = f"({src}).astype(ct.{dtype.name})"
    if g.chance(0.3):
        src = f"{src} * {g.rng.choice((3, 5, 7))} % {g.rng.choice((4, 5, 16))}"
    name = g.name("t")
    g.define(Var(name, dtype, dims), src, visible=False)
    return name, dims


def _partner(g: Gen, x: Var, dtype: DType, axis: int, bool_from: bool = False
             ) -> tuple[str, tuple, Tol, Optional[Var]]:
    """A second operand of `dtype` broadcasting to x's shape: a visible value,
    or an arange along the axis (for flags, a comparison of one)."""
    v = g.pick(lambda v: v is not x and v.dtype is dtype and v.shape and carrier_ok(v)
               and broadcast(v.shape, x.shape) == x.shape)
    if v is not None and g.chance(0.6):
        g.use(v)
        return v.name, v.shape, v.tol, v
    if bool_from:
        src, dims = _along(g, x.shape[axis], axis, len(x.shape))
        name = g.name("t")
        g.define(Var(name, D.bool_, dims), f"{src} % {g.rng.choice((3, 5, 8))} == 0",
                 visible=False)
        return name, dims, EXACT, None
    src, dims = _along(g, x.shape[axis], axis, len(x.shape), dtype)
    return src, dims, EXACT, None


def _operands(g: Gen, f: Func, x: Var, axis: int) -> Optional[list]:
    """[(source, shape, dtype, tol)] of the tiles combined by `f`, x among them."""
    own = (x.name, x.shape, x.dtype, x.tol)
    if f.arity == 1:
        return [own]
    if f.name == "affine":
        src, shape, tol, _ = _partner(g, x, x.dtype, axis)
        pair = [own, (src, shape, x.dtype, tol)]
        return pair if g.chance(0.5) else pair[::-1]
    if f.name == "segsum":
        src, shape, tol, _ = _partner(g, x, D.bool_, axis, bool_from=True)
        return [(src, shape, D.bool_, tol), own]
    # (value, index): NaNs made 0 (a NaN is unordered: the pick would not be associative)
    if x.dtype.is_float:
        name = g.name("t")
        g.define(Var(name, x.dtype, x.shape, x.tol), f"ct.where(ct.isnan({x.name}), 0, {x.name})",
                 visible=False)
        own = (name, x.shape, x.dtype, x.tol)
    src, shape, tol, _ = _partner(g, x, D.int32, axis)
    return [own, (src, shape, D.int32, tol)]


def _operand_ok(v: Var) -> bool:
    return v.size >= 2 and carrier_ok(v) and v.dtype in ARITH


def _axis(g: Gen, shape: tuple) -> int:
    """An axis of `shape`, one of length 1 only rarely."""
    long = [i for i, s in enumerate(shape) if s > 1]
    if long and not g.chance(0.05):
        return g.rng.choice(long)
    return g.rng.randrange(len(shape))


# --- tolerances ------------------------------------------------------------------------------
def _result_tol(f: Func, dt: DType, ops: list, terms: int, sequential: bool) -> tuple[Tol, str]:
    """(tolerance of the result against the GPU, the model's comparison mode).
    An exclusive scan takes its inclusive twin's: its elements fold at most
    `terms` - 1 items, and its first is the identity constant on both sides."""
    if not dt.is_float:
        return EXACT, "exact"
    if f.name == "add" and not sequential:
        return scan_tol("sum", dt, terms), "sum"
    if f.name in ("max", "min"):
        return ZSIGN, "zsign"
    tol = EXACT
    for op in ops:
        tol = join(tol, op[3]) or tol
    return tol, "exact"


def _abs64(g: Gen, x: str) -> str:
    name = g.name("sh")
    g.emit(f"{name} = ct.abs({x}).astype(ct.float64)")
    return name


# --- the probes ------------------------------------------------------------------------------
def _probe(g: Gen, check: Check, ops: list, results: list[Optional[Var]]) -> None:
    """Store the operands and results of a scan/fold, and the block's flag, in one
    statement (the minimizer keeps all or none), for reference.check."""
    nb = g.nblocks
    shape = check.shape
    size = math.prod(shape)
    stores, ins, outs = [], [], []
    for src, sshape, dt, tol in ops:
        arr, _ = g.output_array(dt, (nb, size), tol, shadow=False)
        tile = src if tuple(sshape) == tuple(shape) else f"ct.broadcast_to({src}, {shape})"
        stores.append(f"ct.store({arr}, index=(bl, 0), tile=ct.reshape({tile}, (1, {size})))")
        ins.append(arr)
    for v in results:
        if v is None:          # one result of a pair kept: the model checks the other
            outs.append("")
            continue
        arr, sh = g.output_array(v.dtype, (nb, v.size), v.tol, shadow=v.shadow is not None)
        for a, val in ((arr, v.name), (sh, v.shadow)):
            if a is not None:
                stores.append(f"ct.store({a}, index=(bl, 0), tile=ct.reshape({val}, "
                              f"(1, {v.size})))")
        outs.append(arr)
    flag = g.name("o")
    g.params.append(Param(flag, "out", base=np.zeros(nb, np.bool_)))
    g.outputs[flag] = OutputSpec(EXACT)
    stores.append(f"ct.store({flag}, index=(bl,), tile=ct.full((1,), True, ct.bool_))")
    g.emit("; ".join(stores))
    check.ins, check.outs, check.flag = tuple(ins), tuple(outs), flag
    g.checks.append(check)
    g.feature("model_check", check.kind)


# --- the ops ---------------------------------------------------------------------------------
def _axis_src(g: Gen, axis: int, rank: int) -> str:
    return str(axis - rank) if g.chance(0.3) else str(axis)


def cumulative(g: Gen) -> bool:
    """ct.cumsum / ct.cumprod along any axis, forward or reversed."""
    fn = g.rng.choice(("cumsum", "cumsum", "cumprod"))
    x = g.pick(lambda v: _operand_ok(v) and (not v.dtype.is_float or readable_add(v)))
    if x is None:
        return False
    rank = len(x.shape)
    axis = _axis(g, x.shape)
    reverse = g.chance(0.4)
    dt = D.int32 if x.dtype.is_bool else x.dtype
    n = x.shape[axis]
    src = x.name
    if fn == "cumprod" and dt.is_float and g.chance(0.5):
        # factors of magnitude 1/2..2 keep more partial products in range (checked)
        name = g.name("t")
        g.define(Var(name, x.dtype, x.shape, x.tol),
                 f"ct.where((abs({x.name}) >= 0.5) & (abs({x.name}) <= 2.0), {x.name}, 1.5)",
                 visible=False)
        src = name
    a = _axis_src(g, axis, rank)
    r = g.rng.random()
    kw = ", reverse=True" if reverse else (", reverse=False" if g.chance(0.2) else "")
    if r < 0.15 and axis == 0 and not kw:
        expr = f"ct.{fn}({src})"
    elif r < 0.5:
        expr = f"ct.{fn}({src}, axis={a}{kw})"
    else:
        expr = f"ct.{fn}({src}, {a}{kw})"
    func = FUNCS["add" if fn == "cumsum" else "mul"]
    if dt.is_float:
        mode = "sum" if fn == "cumsum" else "prod"
        tol = scan_tol(mode, dt, n)
    else:
        tol, mode = EXACT, "exact"
    var = Var(g.name("t"), dt, x.shape, tol)
    if dt.is_float:
        _shadow(g, var, src, axis, prod=fn == "cumprod", scan_shape=x.shape)
    g.use(x)
    g.define(var, expr)
    if g.chance(PROBE):
        _probe(g, Check("scan", func.name, (dt.name,), x.shape, axis, mode, reverse=reverse),
               [(src, x.shape, x.dtype, x.tol)], [var])
    g.feature(fn, dt.name, "reverse" if reverse else "forward")
    return True


def _shadow(g: Gen, var: Var, src: str, axis: int, *, prod: bool = False,
            scan_shape: Optional[tuple] = None, keepdims: bool = False) -> None:
    """Set var.shadow: what a float sum (prod: product) of src along `axis` is
    bounded by (tolerance.py), computed by the kernel in float64; a scan's is
    broadcast back to `scan_shape`, a fold's keeps its dims as asked. The sum
    of the whole axis bounds an exclusive scan too: each element sums a prefix
    of it; the first, the identity constant, is the same bits on both sides,
    which tolerance.compare accepts before any bound."""
    t = _abs64(g, src)
    var.shadow = g.name("sh")
    mag = f"ct.maximum({t}, 1.0 / {t})" if prod else t
    kw = ", keepdims=True" if scan_shape or keepdims else ""
    expr = f"ct.{'max' if prod else 'sum'}({mag}, axis={axis}{kw})"
    g.emit(f"{var.shadow} = " + (f"ct.broadcast_to({expr}, {scan_shape})" if scan_shape
                                 else expr))


def _combine(g: Gen, kind: str, x: Var, axis: int, *, keepdims: bool = False,
             sequential: bool = False, f: Optional[Func] = None, callee: Optional[str] = None,
             unpack: bool = False) -> Optional[list[Var]]:
    """Emit ct.scan / ct.reduce of x (and a partner tile for pair functions)
    along `axis`; the result Vars (not yet visible), or None (then nothing was
    emitted). `f`, `callee`: the function and its source, if chosen already;
    `unpack`: keep every result of a pair (else sometimes only one, `[k]`)."""
    f = f or _pick_func(g, x, sequential)
    if f is None or (kind == "scan" and not f.assoc):
        return None
    ops = _operands(g, f, x, axis)
    if ops is None:
        return None
    rank = len(x.shape)
    n = x.shape[axis]
    shape = x.shape
    if kind == "scan":
        rshape = shape
    else:
        rshape = tuple((1 if i == axis else s) for i, s in enumerate(shape) if keepdims or
                       i != axis)
    dtypes = [op[2] for op in ops]
    fn_src = callee or _callee(g, f)
    ids = _identity(f, dtypes, g)
    x_src = ops[0][0] if f.arity == 1 else "(" + ", ".join(op[0] for op in ops) + ")"
    a = _axis_src(g, axis, rank)
    reverse = kind == "scan" and g.chance(0.4)
    exclusive = kind == "scan" and g.chance(0.3)
    if exclusive and g.chance(0.5):
        ids = tuple(_seed(dt, g) for dt in dtypes)
    ident = _const_src(ids)
    kws = []
    if reverse:
        kws.append("reverse=True")
    if exclusive:
        kws.append("exclusive=True")
    if keepdims:
        kws.append("keepdims=True")
    elif kind == "fold" and g.chance(0.1):
        kws.append("keepdims=False")
    if sequential:
        kws.append("sequential=True")
    tail = "".join(", " + k for k in kws)
    call = "scan" if kind == "scan" else "reduce"
    if g.chance(0.25):
        expr = f"ct.{call}({x_src}, axis={a}, func={fn_src}, identity={ident}{tail})"
    else:
        expr = f"ct.{call}({x_src}, {a}, {fn_src}, {ident}{tail})"
    tol, mode = _result_tol(f, dtypes[0], ops, n, sequential)
    results = [Var(g.name("t"), dtypes[0], rshape, tol)]
    if f.arity == 2:
        tol2 = EXACT if not dtypes[1].is_float else join(EXACT, ops[1][3]) or EXACT
        results.append(Var(g.name("t"), dtypes[1], rshape, tol2))
    if mode == "sum":
        _shadow(g, results[0], ops[0][0], axis, scan_shape=shape if kind == "scan" else None,
                keepdims=keepdims)
    g.use(x)
    if f.arity == 1:
        g.emit(f"{results[0].name} = {expr}")
    elif unpack or g.chance(0.75):
        g.emit(f"{results[0].name}, {results[1].name} = {expr}")
    else:
        k = g.rng.randrange(2)
        results = [results[k]]
        g.emit(f"{results[0].name} = {expr}[{k}]")
    if g.chance(PROBE):
        kept = results if len(results) == f.arity else \
            [results[0] if i == k else None for i in range(f.arity)]
        _probe(g, Check(kind, f.name, tuple(d.name for d in dtypes), shape, axis, mode,
                        reverse=reverse, keepdims=keepdims, sequential=sequential,
                        exclusive=exclusive, identity=ids if exclusive else ()),
               ops, kept)
    g.feature("scan" if kind == "scan" else "custom_fold", f.name, dtypes[0].name,
              "sequential" if sequential else ("reverse" if reverse else "forward"),
              *(("exclusive",) if exclusive else ()))
    return results


def _unit_axis(g: Gen, x: Var) -> tuple[Var, int]:
    """x with a new axis of length 1 (an invisible value), and that axis: its
    scan is x, or the identity everywhere when exclusive (_axis seldom picks
    an axis of length 1)."""
    axis = g.rng.randint(0, len(x.shape))
    y = Var(g.name("t"), x.dtype, x.shape[:axis] + (1,) + x.shape[axis:], x.tol, x.product)
    g.use(x)
    g.define(y, f"ct.expand_dims({x.name}, {axis})", visible=False)
    return y, axis


def scan(g: Gen) -> bool:
    """ct.scan with a combining function along any axis, forward or reversed,
    inclusive or exclusive."""
    x = g.pick(_operand_ok)
    if x is None:
        return False
    if len(x.shape) < 3 and g.chance(0.1):
        x, axis = _unit_axis(g, x)
    else:
        axis = _axis(g, x.shape)
    out = _combine(g, "scan", x, axis)
    if out is None:
        return False
    g.scopes[-1].extend(out)
    return True


def fold(g: Gen) -> bool:
    """ct.reduce with a combining function along one axis (several segments
    when the tile has other axes), keepdims or not, sometimes sequential."""
    x = g.pick(_operand_ok)
    if x is None:
        return False
    axis = _axis(g, x.shape)
    out = _combine(g, "fold", x, axis, keepdims=g.chance(0.35), sequential=g.chance(0.25))
    if out is None:
        return False
    g.scopes[-1].extend(out)
    return True


def _size(g: Gen) -> int:
    sizes, ws = zip(*_SIZES.items())
    return g.rng.choices(sizes, ws)[0]


def _fold_dtype(g: Gen) -> DType:
    return g.rng.choices((D.int32, D.int64, D.int8, D.uint16, D.uint32, D.float32, D.float16,
                          D.bfloat16, D.float64, D.bool_),
                         (5, 1.5, 1, 1, 1, 4, 1.5, 1, 1, 0.5))[0]


def _long_tile(g: Gen, size: int) -> Var:
    """A fresh 1-d tile of `size` elements (a new input, one tile a block);
    invisible to other ops (its size can be beyond the usual bound)."""
    dtype = _fold_dtype(g)
    extent = g.extent(g.nblocks, size, size)
    arr = g.input_array(dtype, (extent,))
    t = Var(g.name("t"), dtype, (size,))
    g.define(t, f"ct.load({arr}, index=(bl,), shape=({size},){g.padding(dtype)})", visible=False)
    return t


def allfold(g: Gen) -> bool:
    """A fold of a whole tile to one element: a 1-d tile of 2 to 8192 elements
    (or a value at hand, flattened), its long axis any axis of a rank 1-3
    shape whose other axes are 1."""
    x = None
    if g.chance(0.35):
        v = g.pick(lambda v: _operand_ok(v) and v.size >= 2)
        if v is not None:
            x = Var(g.name("t"), v.dtype, (v.size,), v.tol, v.product)
            g.use(v)
            g.define(x, f"ct.reshape({v.name}, ({v.size},))" if v.shape != (v.size,)
                     else v.name, visible=False)
    if x is None:
        x = _long_tile(g, _size(g))
    size = x.size
    rank = g.rng.choices((1, 2, 3), (3, 2, 1))[0]
    axis = g.rng.randrange(rank)
    if rank > 1:
        dims = tuple(size if i == axis else 1 for i in range(rank))
        y = Var(g.name("t"), x.dtype, dims, x.tol, x.product)
        g.define(y, f"{x.name}.reshape({dims})" if g.chance(0.5) else f"ct.reshape({x.name}, "
                 f"{dims})", visible=False)
        x = y
    out = _combine(g, "fold", x, axis, keepdims=g.chance(0.4),
                   sequential=g.chance(0.12 if size <= 1024 else 0.05))
    if out is None:
        return False
    g.scopes[-1].extend(out)
    g.feature("allfold", size, f"rank{rank}")
    return True


def fold_loop(g: Gen) -> bool:
    """for k in range(n): fold the k-th tile of a block's row whole, and combine
    the result into a loop-carried accumulator with the same function."""
    size = _size(g)
    dtype = g.rng.choice((D.int32, D.int32, D.int64, D.uint32, D.int16, D.float32, D.float16))
    x = Var(g.name("t"), dtype, (size,))
    if dtype is D.int32 and g.chance(0.35):
        f = FUNCS["affine"]
    else:
        f = _pick_func(g, x, False, pairs=False)
    if f is None or f.name == "add" and dtype.is_float:
        return False   # (a float sum's accumulator would need a bound across iterations)
    tiles = g.rng.randint(1, 3)
    rows = g.extent(g.nblocks, 1, 1)
    cols = max(1, tiles * size - g.rng.randint(0, size - 1))
    arr = g.input_array(dtype, (rows, cols))
    dtypes = [dtype] * f.arity
    accs = [Var(g.name("acc"), dt, (1,), ZSIGN if f.name in ("max", "min") and dt.is_float
                else EXACT) for dt in dtypes]
    for acc, v in zip(accs, _identity(f, dtypes, g)):
        g.emit(f"{acc.name} = ct.full((1,), {literal(v)}, ct.{acc.dtype.name})")
    callee = _callee(g, f, named=True)
    k = g.name("k")
    bound = tile_loop_bound(g, arr, (1, size), tiles)
    block: list[Stmt] = []
    g.bodies.append(block)
    g.scopes.append([])
    g.depth += 1
    try:
        pad = g.rng.choice(("ZERO", "NEG_ZERO")) if dtype.is_float else "ZERO"
        g.define(x, f"ct.load({arr}, index=(bl, {k}), shape=(1, {size}), "
                    f"padding_mode=ct.PaddingMode.{pad}).reshape(({size},))", visible=False)
        out = _combine(g, "fold", x, 0, keepdims=True, f=f, callee=callee, unpack=True)
        names = ", ".join(a.name for a in accs)
        if callee.startswith("ct.") or callee in ("max", "min"):
            g.emit(f"{names} = {callee}({accs[0].name}, {out[0].name})")
        else:
            args = ", ".join([a.name for a in accs] + [o.name for o in out])
            g.emit(f"{names} = {callee}({args})")
    finally:
        g.depth -= 1
        g.scopes.pop()
        g.bodies.pop()
    g.emit(f"for {k} in range({bound}):", block)
    g.scopes[-1].extend(accs)
    g.feature("fold_loop", f.name, dtype.name, size)
    return True


# weights: each about half the built-in reductions' (exprs.reduce: 7), whole-tile folds
# (allfold, fold_loop) together as many as the others
OPS = {"cumulative": (3, cumulative), "scan": (3, scan), "custom_fold": (3, fold),
       "allfold": (3, allfold), "fold_loop": (1, fold_loop)}
