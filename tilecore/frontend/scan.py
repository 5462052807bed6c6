"""cumsum(), cumprod(), scan() and reduce() in tile code.

Each becomes one `scan` or `fold` IR op whose region is the combining
function: `func` called on the region's 0-d block arguments (the earlier
values, then the later ones) and inlined there, whatever it is (a tile
function, a lambda, an `operator` function, `max`). cumsum and cumprod get a
region of one `binary` op. As in cuTile, the function must compute on scalars
with no loop, no run-time branch, no memory access, no nested scan or
reduction, and may use no run-time value from outside except constants (which
are copied into the region): the region is then a pure element-wise
function that both backends evaluate on whole tiles or in warp shuffles.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..errors import Loc, TileSyntaxError, TileTypeError, TileValueError
from ..ir.core import Block, Op, Value
from ..ir.types import TileType
from ..language import dtypes as D
from ..language import ops as L
from ..language.dtypes import DType
from ..language.enums import RoundingMode
from .args import const_bool, const_int, normalize_axis, tile_arg
from .builder import broadcast_shapes, describe
from .folding import convert_const
from .local_functions import as_local_function
from .values import BoundMethod, Const, FrontVal, TupleVal

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["HANDLERS"]

# Ops a combining function may contain (besides its final yield).
_ALLOWED = frozenset({"constant", "astype", "bitcast", "unary", "binary", "compare", "where", "reshape",
                      "broadcast", "bid", "num_blocks"})
_NESTED = frozenset({"reduce", "argreduce", "scan", "fold"})
_MEMORY = frozenset({"load", "prefetch", "store", "gather", "scatter", "grid_wait",
                     "grid_launch_dependents"})
_USER_NAMES = {"iota": "arange()", "permute": "permute()", "array_dim": "Array.shape",
               "array_stride": "Array.strides"}


# --- the combining function --------------------------------------------------------------
def _check_op(op: Op, kind: str) -> None:
    """The errors cuTile gives for what a scan or reduction body may not hold."""
    if op.name in ("for", "while"):
        raise TileSyntaxError(f"Loops inside {kind} body are not supported", op.loc)
    if op.name == "if":
        raise TileSyntaxError(f"Branching inside {kind} body is not supported. Consider "
                              f"ct.where() as a workaround.", op.loc)
    if op.name in _NESTED:
        raise TileSyntaxError("Nested scan/reduction is not supported", op.loc)
    if op.name in _MEMORY or op.name.startswith("atomic"):
        raise TileSyntaxError(f"Operations with memory effects are not supported inside "
                              f"{kind} body", op.loc)


def _outer_constants(lw: "Lowerer") -> dict[int, Op]:
    """The `constant` ops of the blocks being built (value id -> op)."""
    return {op.result.id: op for block in lw.b.blocks for op in block.ops
            if op.name == "constant"}


def _close(lw: "Lowerer", region: Block, kind: str, loc: Loc) -> None:
    """Check the ops of a combining function's region, and copy the outside
    constants it uses into it, so that it uses nothing from outside."""
    inside = {a.id for a in region.args}
    copies: dict[int, Value] = {}
    outer: Optional[dict[int, Op]] = None
    new_ops: list[Op] = []
    for op in region.ops:
        _check_op(op, kind)
        operands = []
        for v in op.operands:
            if v.id not in inside and v.id not in copies:
                outer = _outer_constants(lw) if outer is None else outer
                const = outer.get(v.id)
                if const is None:
                    name = f"'{v.hint}'" if v.hint else "from outside the function"
                    raise TileSyntaxError(f"{kind} body captures runtime value {name}",
                                          op.loc or loc)
                copy = Op("constant", (), (lw.b.new_value(v.type, v.hint),), dict(const.attrs),
                          (), const.loc)
                new_ops.append(copy)
                copies[v.id] = copy.result
            operands.append(copies.get(v.id, v))
        op.operands = tuple(operands)
        if op.name not in _ALLOWED and op.name != "yield":
            what = _USER_NAMES.get(op.name, f"{op.name}()")
            raise TileSyntaxError(f"{what} is not supported inside {kind} body", op.loc)
        for r in op.results:
            if r.type.size != 1:
                raise TileTypeError(f"The {kind} function must compute on scalars, but it "
                                    f"makes a tile of shape {r.type.shape}", op.loc or loc)
            inside.add(r.id)
        new_ops.append(op)
    region.ops[:] = new_ops


def _result(lw: "Lowerer", r: FrontVal, dtype: DType, label: str, where: str,
            loc: Loc) -> Value:
    """A value the combining function returned, as a 0-d tile of `dtype` (the
    implicit conversions cuTile allows: to a dtype the value promotes to)."""
    if isinstance(r, Const) and r.is_number and r.dtype is None:
        _check_constant(r.value, dtype, f"{label} function returned {r.value!r}{where}", loc)
        return lw.b.constant(convert_const(r.value, dtype, loc), dtype, loc)
    if isinstance(r, Const) and r.is_number:
        r = lw.b.materialize(r, loc)
    if not (isinstance(r, Value) and isinstance(r.type, TileType)):
        raise TileTypeError(f"{label} function returned {describe(r)}{where}, expected a "
                            f"0-d tile", loc)
    if r.type.shape != ():
        raise TileTypeError(f"{label} function returned a tile of non-scalar shape "
                            f"{r.type.shape}{where}", loc)
    if r.type.dtype is not dtype:
        try:
            ok = D.promote_types(r.type.dtype, dtype) is dtype
        except TypeError:
            ok = False
        if not ok:
            raise TileTypeError(f"{label} function returned a tile of unexpected dtype{where}: "
                                f"expected {dtype.name}, got {r.type.dtype.name}", loc)
        r = lw.b.cast(r, dtype, loc)
    return r


def _check_constant(value, dtype: DType, what: str, loc: Loc) -> None:
    """cuTile's rule for a loosely typed constant taking `dtype` implicitly: no
    float into an integer or bool, only 0/1 into bool, integers in range."""
    cat = D.constant_category(value)
    if dtype.is_bool:
        if cat == D.FLOAT or value not in (0, 1):
            raise TileTypeError(f"{what}: cannot implicitly cast it to bool_", loc)
    elif cat > dtype.category:
        raise TileTypeError(f"{what}: cannot implicitly cast it to {dtype.name}", loc)
    elif dtype.is_integer and not dtype.min <= int(value) <= dtype.max:
        raise TileValueError(f"{what}: it is out of the range of {dtype.name}", loc)


Body = Callable[[list, list], list]


def _region(lw: "Lowerer", dtypes: list[DType], body: Body, kind: str, loc: Loc) -> Block:
    """The region of a scan/fold: 0-d arguments (earlier values, later values),
    `body`'s results (0-d values of `dtypes`) yielded."""
    n = len(dtypes)
    region = Block(args=[lw.b.new_value(TileType(dt, ())) for dt in dtypes * 2])
    with lw.b.block(region), lw.b.calling(None):
        results = body(region.args[:n], region.args[n:])
        lw.b.emit("yield", results, (), loc=loc)
    _close(lw, region, kind, loc)
    return region


def _user_body(lw: "Lowerer", func: FrontVal, dtypes: list[DType], tuple_mode: bool,
               label: str, loc: Loc) -> Body:
    """The region body calling the user's `func` on (*earlier, *later)."""
    def body(lhs: list, rhs: list) -> list:
        r = lw.call(func, list(lhs) + list(rhs), {}, loc)
        if tuple_mode:
            if not isinstance(r, TupleVal):
                raise TileTypeError(f"{label} function returns {describe(r)}, but a tuple was "
                                    f"expected", loc)
            if len(r.items) != len(dtypes):
                raise TileTypeError(f"{label} function must return a tuple of {len(dtypes)} "
                                    f"values to match the number of inputs, but a tuple of "
                                    f"length {len(r.items)} was found.", loc)
            items = r.items
        else:
            items = (r,)
        return [_result(lw, item, dt, label, f" at position #{i}" if tuple_mode else "", loc)
                for i, (item, dt) in enumerate(zip(items, dtypes))]
    return body


# --- arguments ------------------------------------------------------------------------------
def _inputs(lw: "Lowerer", x: FrontVal, fn: str, loc: Loc) -> tuple[list[Value], bool]:
    """The tiles to combine (a tuple's items broadcast to one shape) and whether
    `x` was a tuple."""
    tuple_mode = isinstance(x, TupleVal)
    items = x.items if tuple_mode else (x,)
    if not items:
        raise TileTypeError(f"Need at least one input value to {fn}", loc)
    tiles = [tile_arg(lw, v, fn, "x", loc) for v in items]
    shape: tuple[int, ...] = ()
    for t in tiles:
        shape = broadcast_shapes(shape, t.type.shape, loc, f"tiles given to {fn}()")
    return [lw.b.broadcast(t, shape, loc) for t in tiles], tuple_mode


def _func(func: FrontVal, fn: str, loc: Loc) -> FrontVal:
    if as_local_function(func) is not None or isinstance(func, BoundMethod) or \
            (isinstance(func, Const) and callable(func.value)):
        return func
    raise TileTypeError(f'Invalid argument "func" of {fn}(): expected a function (a tile '
                        f"function, a lambda or an operator function), got {describe(func)}",
                        loc)


def _identities(v: FrontVal, dtypes: list[DType], tuple_mode: bool, fn: str,
                loc: Loc) -> tuple:
    """One constant per tile, converted to its dtype."""
    if tuple_mode:
        if not isinstance(v, TupleVal):
            raise TileTypeError(f'Invalid argument "identity" of {fn}(): expected a tuple of '
                                f"{len(dtypes)} constants (one per tile), got {describe(v)}",
                                loc)
        if len(v.items) != len(dtypes):
            raise TileTypeError(f"Number of identity values ({len(v.items)}) must match the "
                                f"number of input tiles ({len(dtypes)})", loc)
        items = v.items
    else:
        items = (v,)
    out = []
    for item, dt in zip(items, dtypes):
        if not (isinstance(item, Const) and item.is_number):
            raise TileTypeError(f'Invalid argument "identity" of {fn}(): expected a constant '
                                f"number, got {describe(item)}", loc)
        if item.dtype is None:
            _check_constant(item.value, dt, f'Invalid argument "identity" of {fn}(): '
                                            f"{item.value!r}", loc)
        out.append(convert_const(item.value, dt, loc))
    return tuple(out)


def _axis(a: dict, ndim: int, fn: str, loc: Loc) -> int:
    return normalize_axis(const_int(a["axis"], fn, "axis", loc), ndim, fn, loc)


def _emit(lw: "Lowerer", name: str, xs: list[Value], shape: tuple[int, ...], attrs: dict,
          region: Block, tuple_mode: bool, loc: Loc) -> FrontVal:
    op = lw.b.emit(name, xs, [TileType(x.type.dtype, shape) for x in xs], attrs, (region,), loc)
    return TupleVal(op.results) if tuple_mode else op.results[0]


# --- the handlers ---------------------------------------------------------------------------
def _scan(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    xs, tuple_mode = _inputs(lw, a["x"], "scan", loc)
    axis = _axis(a, xs[0].type.ndim, "scan", loc)
    func = _func(a["func"], "scan", loc)
    reverse = const_bool(a["reverse"], "scan", "reverse", loc)
    dtypes = [x.type.dtype for x in xs]
    ids = _identities(a["identity"], dtypes, tuple_mode, "scan", loc)
    exclusive = const_bool(a["exclusive"], "scan", "exclusive", loc)
    region = _region(lw, dtypes, _user_body(lw, func, dtypes, tuple_mode, "Scan", loc),
                     "scan", loc)
    attrs = {"axis": axis, "reverse": reverse, "identities": ids}
    if exclusive:    # the first element the identity (ops.scan); absent otherwise, as before
        attrs["exclusive"] = True
    return _emit(lw, "scan", xs, xs[0].type.shape, attrs, region, tuple_mode, loc)


def _reduce(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    xs, tuple_mode = _inputs(lw, a["x"], "reduce", loc)
    axis = _axis(a, xs[0].type.ndim, "reduce", loc)
    func = _func(a["func"], "reduce", loc)
    keepdims = const_bool(a["keepdims"], "reduce", "keepdims", loc)
    sequential = const_bool(a["sequential"], "reduce", "sequential", loc)
    dtypes = [x.type.dtype for x in xs]
    ids = _identities(a["identity"], dtypes, tuple_mode, "reduce", loc)
    region = _region(lw, dtypes, _user_body(lw, func, dtypes, tuple_mode, "Reduction", loc),
                     "reduction", loc)
    shape = xs[0].type.shape
    shape = shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:]
    attrs = {"axis": axis, "keepdims": keepdims, "identities": ids}
    if sequential:   # left to right (ops.reduce); absent otherwise, as before the extension
        attrs["sequential"] = True
    return _emit(lw, "fold", xs, shape, attrs, region, tuple_mode, loc)


def _default_rounding(a: dict, fn: str, loc: Loc) -> None:
    """cumsum/cumprod take cuTile's rounding_mode and flush_to_zero; tilecore
    implements only the defaults."""
    mode = a["rounding_mode"]
    if not (isinstance(mode, Const) and mode.value in (None, RoundingMode.RN)):
        raise TileValueError(f'Invalid argument "rounding_mode" of {fn}(): only the default '
                             f"rounding (None or RoundingMode.RN) is supported, got "
                             f"{describe(mode)}", loc)
    ftz = a["flush_to_zero"]
    if not (isinstance(ftz, Const) and ftz.value is False):
        raise TileValueError(f'Invalid argument "flush_to_zero" of {fn}(): only False is '
                             f"supported, got {describe(ftz)}", loc)


def _cumulative(fn: str, binop: str, identity: int):
    """cumsum / cumprod: a scan whose region is one `binary` op in x's dtype
    (bool counts as int32; integers wrap)."""
    def handler(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
        x = tile_arg(lw, a["x"], fn, "x", loc)
        _default_rounding(a, fn, loc)
        if not x.type.dtype.arithmetic:
            raise TileTypeError(f'Invalid argument "x" of {fn}(): non-arithmetic dtype '
                                f"{x.type.dtype.name} is unsupported (convert it with "
                                f"astype())", loc)
        if x.type.dtype.is_bool:
            x = lw.b.cast(x, D.int32, loc)
        axis = _axis(a, x.type.ndim, fn, loc)
        reverse = const_bool(a["reverse"], fn, "reverse", loc)
        dt = x.type.dtype
        region = _region(lw, [dt], lambda lhs, rhs: [lw.b.binary(binop, lhs[0], rhs[0], loc)],
                         "scan", loc)
        attrs = {"axis": axis, "reverse": reverse, "identities": (convert_const(identity, dt),)}
        return _emit(lw, "scan", [x], x.type.shape, attrs, region, False, loc)
    return handler


# stub -> handler, registered by calls.py
HANDLERS = {L.cumsum: _cumulative("cumsum", "add", 0), L.cumprod: _cumulative("cumprod", "mul", 1),
            L.scan: _scan, L.reduce: _reduce}
