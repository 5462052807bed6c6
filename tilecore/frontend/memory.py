"""Tile-space load/store, tiled views, gather/scatter and num_tiles in tile code."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import TileType
from ..language import dtypes as D
from ..language.enums import PaddingMode
from .args import array_arg, const_bool, const_int, const_shape, normalize_axis, order_arg
from .builder import broadcast_shapes, describe
from .ordering import LOAD_ORDERS, STORE_ORDERS, memory_ordering, ordering_attrs
from .values import Const, FrontVal, TiledView, TupleVal

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["load", "prefetch", "store", "gather", "scatter", "num_tiles", "tiled_view",
           "view_load", "view_prefetch", "view_store", "view_num_tiles", "integer_tiles", "emit_gather", "emit_scatter",
           "shape_of"]


def _index(lw: "Lowerer", v: FrontVal, ndim: int, fn: str, loc: Loc) -> list[Value]:
    items = v.items if isinstance(v, TupleVal) else (v,)
    if len(items) != ndim:
        raise TileValueError(f'Invalid argument "index" of {fn}(): expected a tuple of {ndim} '
                             f"index value(s), got {len(items)}", loc)
    out = []
    for item in items:
        ok = (isinstance(item, Const) and isinstance(item.value, int)
              and not isinstance(item.value, bool)) or (
            isinstance(item, Value) and isinstance(item.type, TileType) and item.type.shape == ()
            and item.type.dtype.is_integer)
        if not ok:
            raise TileTypeError(f'Invalid argument "index" of {fn}(): expected integer scalars, '
                                f"got {describe(item)}", loc)
        out.append(lw.b.to_typed(item, _index_dtype(item, fn, loc), (), loc))
    return out


def _index_dtype(item: FrontVal, fn: str, loc: Loc):
    """int32 for tile indices that int32 holds exactly, else int64: a 64-bit or
    uint32 index is never narrowed (uint64 values past int64 are negative
    there, so outside the array as before)."""
    if isinstance(item, Const):
        if -2**31 <= item.value < 2**31:
            return D.int32
        if -2**63 <= item.value < 2**63:
            return D.int64
        raise TileValueError(f'Invalid argument "index" of {fn}(): {item.value} does not fit '
                             f"a 64-bit index", loc)
    return D.int64 if _needs_wide(item.type.dtype) else D.int32


def _needs_wide(dtype) -> bool:
    """Whether int32 cannot hold every value of integer `dtype`."""
    return dtype.bits > 32 or (dtype.bits == 32 and not dtype.signed)


def _hints(a: dict, fn: str, loc: Loc) -> dict:
    latency = a.get("latency", Const(None))
    if not (isinstance(latency, Const) and latency.value is None):
        value = const_int(latency, fn, "latency", loc)
        if not 1 <= value <= 10:
            raise TileValueError(f'Invalid argument "latency" of {fn}(): expected an int in '
                                 f"[1, 10], got {value}", loc)
        latency = Const(value)
    allow_tma = a.get("allow_tma", Const(None))
    if not (isinstance(allow_tma, Const) and allow_tma.value is None):
        const_bool(allow_tma, fn, "allow_tma", loc)
    return {"latency": latency.value, "allow_tma": allow_tma.value}


def _padding(v: FrontVal, dtype, fn: str, loc: Loc) -> PaddingMode:
    if not (isinstance(v, Const) and isinstance(v.value, PaddingMode)):
        raise TileTypeError(f'Invalid argument "padding_mode" of {fn}(): expected a '
                            f"tilecore.PaddingMode, got {describe(v)}", loc)
    mode = v.value
    if not dtype.is_float and mode not in (PaddingMode.ZERO, PaddingMode.UNDETERMINED):
        raise TileValueError(f'Invalid argument "padding_mode" of {fn}(): {mode} needs a '
                             f"floating-point array, got an array of {dtype.name}", loc)
    return mode


def _emit_load(lw, arr: Value, index, shape, order, steps, padding, check_bounds, hints, loc):
    attrs = {"shape": shape, "order": order, "steps": steps, "padding": padding,
             "check_bounds": check_bounds, **hints}
    return lw.b.emit1("load", (arr, *index), TileType(arr.type.dtype, shape), attrs, loc)


def load(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "load", "array", loc)
    nd = arr.type.ndim
    shape = const_shape(a["shape"], "load", "shape", loc, ndim=nd)
    order = order_arg(a["order"], nd, "load", loc)
    index = _index(lw, a["index"], nd, "load", loc)
    padding = _padding(a["padding_mode"], arr.type.dtype, "load", loc)
    check = const_bool(a["check_bounds"], "load", "check_bounds", loc)
    ordering = ordering_attrs(*memory_ordering(a["memory_order"], a["memory_scope"],
                                               LOAD_ORDERS, "load", loc))
    return _emit_load(lw, arr, index, shape, order, shape, padding, check,
                      {**_hints(a, "load", loc), **ordering}, loc)


def _emit_prefetch(lw, arr: Value, index, shape, order, steps, loc) -> FrontVal:
    attrs = {"shape": shape, "order": order, "steps": steps}
    lw.b.emit("prefetch", (arr, *index), (), attrs, (), loc)
    return Const(None)


def prefetch(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    """The L2 prefetch of the tile load(array, index, shape, order=order) reads:
    its arguments are checked as load's, in the same order."""
    arr = array_arg(a["array"], "prefetch", "array", loc)
    nd = arr.type.ndim
    shape = const_shape(a["shape"], "prefetch", "shape", loc, ndim=nd)
    order = order_arg(a["order"], nd, "prefetch", loc)
    index = _index(lw, a["index"], nd, "prefetch", loc)
    return _emit_prefetch(lw, arr, index, shape, order, shape, loc)


def _store_tile(lw, arr: Value, tile: FrontVal, fn: str, loc: Loc,
                shape: Optional[tuple] = None) -> Value:
    if isinstance(tile, Const) and tile.is_number:
        if shape is None:
            raise TileTypeError(f'Invalid argument "tile" of {fn}(): expected a tile, got '
                                f"{describe(tile)}", loc)
        return lw.b.to_typed(tile, arr.type.dtype, shape, loc)
    if not (isinstance(tile, Value) and isinstance(tile.type, TileType)):
        raise TileTypeError(f'Invalid argument "tile" of {fn}(): expected a tile, got '
                            f"{describe(tile)}", loc)
    if tile.type.dtype is not arr.type.dtype:
        raise TileTypeError(f'Invalid argument "tile" of {fn}(): its dtype {tile.type.dtype.name} '
                            f"differs from the array's {arr.type.dtype.name}; convert it with "
                            f"astype()", loc)
    if shape is not None:
        if tile.type.shape != shape:
            return lw.b.broadcast(tile, shape, loc)
        return tile
    if tile.type.ndim == 0:
        from .shapes import reshape_value
        return reshape_value(lw, tile, (1,) * arr.type.ndim, loc)
    if tile.type.ndim != arr.type.ndim:
        raise TileValueError(f'Invalid argument "tile" of {fn}(): expected a tile with '
                             f"{arr.type.ndim} dimension(s) like the array, got shape "
                             f"{tile.type.shape}", loc)
    return tile


def _emit_store(lw, arr, tile: Value, index, order, steps, check_bounds, hints, loc):
    attrs = {"shape": tile.type.shape, "order": order, "steps": steps,
             "check_bounds": check_bounds, **hints}
    lw.b.emit("store", (arr, tile, *index), (), attrs, (), loc)
    return Const(None)


def store(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "store", "array", loc)
    nd = arr.type.ndim
    tile = _store_tile(lw, arr, a["tile"], "store", loc)
    order = order_arg(a["order"], nd, "store", loc)
    index = _index(lw, a["index"], nd, "store", loc)
    check = const_bool(a["check_bounds"], "store", "check_bounds", loc)
    ordering = ordering_attrs(*memory_ordering(a["memory_order"], a["memory_scope"],
                                               STORE_ORDERS, "store", loc))
    return _emit_store(lw, arr, tile, index, order, tile.type.shape, check,
                       {**_hints(a, "store", loc), **ordering}, loc)


# --- tiled views ----------------------------------------------------------------------------------
def tiled_view(lw: "Lowerer", arr: Value, a: dict, loc: Loc) -> TiledView:
    nd = arr.type.ndim
    shape = const_shape(a["tile_shape"], "tiled_view", "tile_shape", loc, ndim=nd)
    padding = _padding(a["padding_mode"], arr.type.dtype, "tiled_view", loc)
    steps_v = a["traversal_steps"]
    if isinstance(steps_v, Const) and steps_v.value is None:
        steps = shape
    else:
        steps = const_shape(steps_v, "tiled_view", "traversal_steps", loc, pow2=False, ndim=nd)
    return TiledView(arr, shape, padding, steps)


def view_load(lw: "Lowerer", tv: TiledView, a: dict, loc: Loc) -> FrontVal:
    nd = tv.array.type.ndim
    index = _index(lw, a["index"], nd, "TiledView.load", loc)
    return _emit_load(lw, tv.array, index, tv.tile_shape, tuple(range(nd)), tv.steps, tv.padding,
                      True, _hints(a, "TiledView.load", loc), loc)


def view_prefetch(lw: "Lowerer", tv: TiledView, a: dict, loc: Loc) -> FrontVal:
    nd = tv.array.type.ndim
    index = _index(lw, a["index"], nd, "TiledView.prefetch", loc)
    return _emit_prefetch(lw, tv.array, index, tv.tile_shape, tuple(range(nd)), tv.steps, loc)


def view_store(lw: "Lowerer", tv: TiledView, a: dict, loc: Loc) -> FrontVal:
    nd = tv.array.type.ndim
    tile = _store_tile(lw, tv.array, a["tile"], "TiledView.store", loc, tv.tile_shape)
    index = _index(lw, a["index"], nd, "TiledView.store", loc)
    return _emit_store(lw, tv.array, tile, index, tuple(range(nd)), tv.steps, True,
                       _hints(a, "TiledView.store", loc), loc)


def _array_dim(lw, arr: Value, axis: int, loc: Loc) -> Value:
    """arr.shape[axis], in the array's index dtype."""
    return lw.b.emit1("array_dim", (arr,), TileType(arr.type.index_dtype, ()), {"axis": axis}, loc)


def _tiles_along(lw, dim: Value, tile: int, step: int, loc) -> FrontVal:
    """Tiles along one axis: starts k*step below dim (step >= tile), or enough
    overlapping tiles to cover dim (step < tile)."""
    b = lw.b

    def ceil_div(n: Value) -> FrontVal:  # (n - 1) // step + 1: no overflow near the dtype's top
        below = b.binary("floordiv", b.binary("sub", n, Const(1), loc), Const(step), loc)
        return b.binary("add", below, Const(1), loc)

    if step >= tile:
        return ceil_div(dim)
    rest = b.binary("maximum", b.binary("sub", dim, Const(tile), loc), Const(0), loc)
    return b.binary("add", ceil_div(rest), Const(1), loc)


def view_num_tiles(lw: "Lowerer", tv: TiledView, a: dict, loc: Loc) -> FrontVal:
    nd = tv.array.type.ndim
    axis = normalize_axis(const_int(a["axis"], "TiledView.num_tiles", "axis", loc), nd,
                          "TiledView.num_tiles", loc)
    dim = _array_dim(lw, tv.array, axis, loc)
    return _tiles_along(lw, dim, tv.tile_shape[axis], tv.steps[axis], loc)


def num_tiles(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "num_tiles", "array", loc)
    nd = arr.type.ndim
    axis = normalize_axis(const_int(a["axis"], "num_tiles", "axis", loc), nd, "num_tiles", loc)
    shape = const_shape(a["shape"], "num_tiles", "shape", loc, ndim=nd)
    order = order_arg(a["order"], nd, "num_tiles", loc)
    dim = _array_dim(lw, arr, order[axis], loc)
    return _tiles_along(lw, dim, shape[axis], shape[axis], loc)


# --- gather / scatter -------------------------------------------------------------------------------
def _indices(lw, arr: Value, v: FrontVal, fn: str, loc: Loc):
    items = v.items if isinstance(v, TupleVal) else (v,)
    nd = arr.type.ndim
    if len(items) != nd:
        raise TileValueError(f'Invalid argument "indices" of {fn}(): expected {nd} index tile(s), '
                             f"one per array dimension, got {len(items)}", loc)
    return integer_tiles(lw, items, fn, "indices", "integer tiles", loc)


def integer_tiles(lw, items, fn: str, name: str, expected: str, loc: Loc):
    """The integer tiles or int constants `items` (argument `name` of `fn`)
    broadcast to one shape: (tiles, shape). int32, or int64 where a dtype
    needs it (64-bit, uint32): never narrowed."""
    vals = []
    for item in items:
        if isinstance(item, Const) and isinstance(item.value, int) and not isinstance(item.value,
                                                                                    bool):
            vals.append(lw.b.materialize(item, loc))
        elif isinstance(item, Value) and isinstance(item.type, TileType) and \
                item.type.dtype.is_integer:
            vals.append(item)
        else:
            raise TileTypeError(f'Invalid argument "{name}" of {fn}(): expected {expected}, '
                                f"got {describe(item)}", loc)
    shape: tuple[int, ...] = ()
    for v_ in vals:
        shape = broadcast_shapes(shape, v_.type.shape, loc, name)
    wide = any(_needs_wide(v_.type.dtype) for v_ in vals)
    dtype = D.int64 if wide else D.int32
    return [lw.b.to_typed(v_, dtype, shape, loc) for v_ in vals], shape


def _mask(lw, v: FrontVal, shape, fn: str, loc: Loc,
          against: str = "indices") -> Optional[Value]:
    """The mask argument as a bool tile of `shape` (None: every element on)."""
    if isinstance(v, Const) and (v.value is None or v.value is True):
        return None
    if isinstance(v, Const) and v.value is False:
        return lw.b.to_typed(Const(False), D.bool_, shape, loc)
    if not (isinstance(v, Value) and isinstance(v.type, TileType) and v.type.dtype.is_bool):
        raise TileTypeError(f'Invalid argument "mask" of {fn}(): expected a bool tile, got '
                            f"{describe(v)}", loc)
    if broadcast_shapes(v.type.shape, shape, loc, f"mask and {against}") != tuple(shape):
        raise TileValueError(f'Invalid argument "mask" of {fn}(): its shape {v.type.shape} does '
                             f"not broadcast to {shape_of(against)} {tuple(shape)}", loc)
    return lw.b.broadcast(v, shape, loc)


def shape_of(against: str) -> str:
    """'the indices' shape', 'the offset's shape': what an operand broadcasts to."""
    return f"the {against}' shape" if against.endswith("s") else f"the {against}'s shape"


def _in_bounds(lw, arr: Value, idx: list[Value], loc) -> FrontVal:
    ok: FrontVal = Const(True)
    for axis, i in enumerate(idx):
        dim = _array_dim(lw, arr, axis, loc)
        inside = lw.b.binary("bitand", lw.b.compare("ge", i, Const(0), loc),
                             lw.b.compare("lt", i, dim, loc), loc)
        ok = inside if isinstance(ok, Const) else lw.b.binary("bitand", ok, inside, loc)
    return ok


def gather(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "gather", "array", loc)
    idx, shape = _indices(lw, arr, a["indices"], "gather", loc)
    check = const_bool(a["check_bounds"], "gather", "check_bounds", loc)
    _hints(a, "gather", loc)
    mask = _mask(lw, a["mask"], shape, "gather", loc)
    pad = a["padding_value"]
    dtype = arr.type.dtype
    tile_pad = isinstance(pad, Value) and pad.type.shape != ()
    if not (isinstance(pad, Const) and pad.is_number) and not isinstance(pad, Value):
        raise TileTypeError(f'Invalid argument "padding_value" of gather(): expected a number or '
                            f"a tile, got {describe(pad)}", loc)
    if tile_pad:
        broadcast_shapes(pad.type.shape, shape, loc, "padding_value and indices")
        pads = (lw.b.to_typed(Const(0), dtype, (), loc), lw.b.to_typed(pad, dtype, shape, loc))
        return emit_gather(lw, arr, idx, shape, mask, pads, {"check_bounds": check}, loc,
                           _in_bounds(lw, arr, idx, loc))
    return emit_gather(lw, arr, idx, shape, mask, (lw.b.to_typed(pad, dtype, (), loc), None),
                       {"check_bounds": check}, loc)


def emit_gather(lw, arr: Value, idx: list, shape: tuple, mask: Optional[Value], pads: tuple,
                attrs: dict, loc: Loc, inside: FrontVal = Const(True)) -> Value:
    """The gather op of `arr` at `idx` (tiles of `shape`). pads = (scalar
    padding operand, tile of `shape` or None): a padding tile replaces the
    elements that read padding, those masked off or not `inside` (a bool tile:
    in bounds)."""
    scalar_pad, tile_pad = pads
    operands = [arr, scalar_pad, *idx] + ([mask] if mask is not None else [])
    out = lw.b.emit1("gather", operands, TileType(arr.type.dtype, shape),
                     {"has_mask": mask is not None, **attrs}, loc)
    keep = inside
    if mask is not None:
        keep = mask if isinstance(keep, Const) else lw.b.binary("bitand", keep, mask, loc)
    if tile_pad is None or isinstance(keep, Const):
        return out
    return lw.b.where(keep, out, tile_pad, loc)


def emit_scatter(lw, arr: Value, vals: Value, idx: list, mask: Optional[Value], attrs: dict,
                 loc: Loc) -> FrontVal:
    operands = [arr, vals, *idx] + ([mask] if mask is not None else [])
    lw.b.emit("scatter", operands, (), {"has_mask": mask is not None, **attrs}, (), loc)
    return Const(None)


def scatter(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "scatter", "array", loc)
    idx, shape = _indices(lw, arr, a["indices"], "scatter", loc)
    check = const_bool(a["check_bounds"], "scatter", "check_bounds", loc)
    _hints(a, "scatter", loc)
    mask = _mask(lw, a["mask"], shape, "scatter", loc)
    value = a["value"]
    if isinstance(value, Value) and isinstance(value.type, TileType):
        if value.type.dtype is not arr.type.dtype:
            raise TileTypeError(f'Invalid argument "value" of scatter(): its dtype '
                                f"{value.type.dtype.name} differs from the array's "
                                f"{arr.type.dtype.name}; convert it with astype()", loc)
        broadcast_shapes(value.type.shape, shape, loc, "value and indices")
    vals = lw.b.to_typed(value, arr.type.dtype, shape, loc)
    return emit_scatter(lw, arr, vals, idx, mask, {"check_bounds": check}, loc)
