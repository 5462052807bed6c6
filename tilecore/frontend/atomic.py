"""Atomics in tile code: ct.atomic_add/max/min/and/or/xor/xchg/cas on element
indices (as gather/scatter address them) and TiledView.atomic_store_* on a
tile of a tiled view, lowered to the IR ops atomic_rmw and atomic_cas.

Typing follows cuTile: the dtypes each operation takes are listed in
`DTYPES`; a tile update of another dtype is converted when the promotion
table would promote it to the array's dtype (add, max, min, xchg, cas), but
must match exactly for the bitwise operations; loosely typed constants take
the array's dtype when they fit it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import TileType
from ..language import dtypes as D
from ..language.dtypes import DType
from ..language.enums import MemoryOrder, MemoryScope
from .args import array_arg, const_bool
from .builder import broadcast_shapes, describe
from .memory import _index, _indices, shape_of
from .ordering import ATOMIC_ORDERS, memory_ordering
from .values import Const, FrontVal, TiledView

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["atomic_rmw", "atomic_cas", "view_atomic_store", "view_store_signature", "DTYPES",
           "VIEW_METHODS", "BITWISE", "check_dtype", "operand", "ordering", "emit_atomic"]

_INTS = (D.int32, D.int64, D.uint32, D.uint64)
DTYPES: dict[str, tuple[DType, ...]] = {
    "add": _INTS + (D.float16, D.bfloat16, D.float32, D.float64),
    "max": _INTS, "min": _INTS, "and": _INTS, "or": _INTS, "xor": _INTS,
    "xchg": _INTS + (D.float32, D.float64),
    "cas": _INTS + (D.float32, D.float64),
}
BITWISE = ("and", "or", "xor")
# TiledView method -> atomic_rmw fn (cuTile: reductions only, no xchg/cas).
VIEW_METHODS = {f"atomic_store_{fn}": fn for fn in ("add", "max", "min", "and", "or", "xor")}


# what the array is to the caller -> (what the message calls it, how it names the array)
_KINDS = {"array": ('argument "array"', ""), "view": ("tiled view", "a view of "),
          "raw": ("raw memory", "the raw memory of ")}


def check_dtype(arr: Value, key: str, name: str, loc: Loc, kind: str = "array") -> None:
    """TileTypeError unless atomic `key` takes arr's dtype."""
    allowed = DTYPES[key]
    if arr.type.dtype not in allowed:
        names = ", ".join(d.name for d in allowed)
        what, of = _KINDS[kind]
        raise TileTypeError(f"Invalid {what} of {name}(): expected {of}an array of {names}, got "
                            f"{of}{describe(arr)}", loc)


def operand(lw: "Lowerer", v: FrontVal, dtype: DType, shape: tuple, exact: bool, fn: str,
            name: str, loc: Loc, against: str = "indices") -> Value:
    """`v` as a tile of `dtype` and `shape` (an update, expected or desired
    value; `against`: what gives `shape`, for messages). Numbers must fit
    `dtype`; tiles must broadcast to `shape` and convert to `dtype`
    implicitly (by the promotion table), or match it when `exact`."""
    if isinstance(v, Const) and v.is_number and v.dtype is None:
        try:
            ok = D.promote_with_constant(dtype, v.value) is dtype
        except OverflowError as e:
            raise TileValueError(f'Invalid argument "{name}" of {fn}(): {e}', loc) from None
        if not ok:
            raise TileTypeError(f'Invalid argument "{name}" of {fn}(): {describe(v)} cannot '
                                f"become the array's {dtype.name}", loc)
        return lw.b.to_typed(v, dtype, shape, loc)
    if isinstance(v, Const) and v.is_number:
        src = v.dtype
    elif isinstance(v, Value) and isinstance(v.type, TileType):
        src = v.type.dtype
        if broadcast_shapes(v.type.shape, shape, loc, f"{name} and {against}") != shape:
            raise TileValueError(f'Invalid argument "{name}" of {fn}(): its shape '
                                 f"{v.type.shape} does not broadcast to {shape_of(against)} "
                                 f"{shape}", loc)
    else:
        raise TileTypeError(f'Invalid argument "{name}" of {fn}(): expected a tile or a number, '
                            f"got {describe(v)}", loc)
    if src is not dtype:
        if exact:
            raise TileTypeError(f'Invalid argument "{name}" of {fn}(): its dtype {src.name} '
                                f"differs from the array's {dtype.name}; bitwise atomics take "
                                f"the same dtype (convert it with astype())", loc)
        try:
            promoted = D.promote_types(src, dtype)
        except TypeError:
            promoted = None
        if promoted is not dtype:
            raise TileTypeError(f'Invalid argument "{name}" of {fn}(): {src.name} does not '
                                f"convert implicitly to the array's {dtype.name}; convert it "
                                f"with astype()", loc)
    return lw.b.to_typed(v, dtype, shape, loc)


def ordering(a: dict, fn: str, loc: Loc) -> dict:
    """The memory_order and memory_scope attrs of atomic `fn`."""
    order, scope = memory_ordering(a["memory_order"], a["memory_scope"], ATOMIC_ORDERS, fn, loc)
    return {"memory_order": order, "memory_scope": scope}


def _attrs(a: dict, fn: str, loc: Loc) -> dict:
    return {**ordering(a, fn, loc), "check_bounds": const_bool(a["check_bounds"], fn,
                                                               "check_bounds", loc)}


def emit_atomic(lw: "Lowerer", arr: Value, values: list, idx: list, shape: tuple,
                mask: Optional[Value], attrs: dict, loc: Loc) -> Value:
    """atomic_rmw (attrs with "fn"; values = [update]) or atomic_cas (values =
    [expected, desired]) of `arr` at `idx`, tiles of `shape`."""
    name = "atomic_rmw" if "fn" in attrs else "atomic_cas"
    operands = [arr, *values, *idx] + ([mask] if mask is not None else [])
    if mask is not None:
        attrs = {**attrs, "has_mask": True}
    return lw.b.emit1(name, operands, TileType(arr.type.dtype, shape), attrs, loc)


def atomic_rmw(fn: str):
    """The handler of ct.atomic_<fn>(array, indices, update, ...)."""
    name = f"atomic_{fn}"

    def handler(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
        arr = array_arg(a["array"], name, "array", loc)
        check_dtype(arr, fn, name, loc)
        idx, shape = _indices(lw, arr, a["indices"], name, loc)
        attrs = {"fn": fn, **_attrs(a, name, loc)}
        update = operand(lw, a["update"], arr.type.dtype, shape, fn in BITWISE, name, "update",
                         loc)
        return emit_atomic(lw, arr, [update], idx, shape, None, attrs, loc)
    handler.__name__ = name
    return handler


def atomic_cas(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    arr = array_arg(a["array"], "atomic_cas", "array", loc)
    check_dtype(arr, "cas", "atomic_cas", loc)
    idx, shape = _indices(lw, arr, a["indices"], "atomic_cas", loc)
    attrs = _attrs(a, "atomic_cas", loc)
    dtype = arr.type.dtype
    expected = operand(lw, a["expected"], dtype, shape, False, "atomic_cas", "expected", loc)
    desired = operand(lw, a["desired"], dtype, shape, False, "atomic_cas", "desired", loc)
    return emit_atomic(lw, arr, [expected, desired], idx, shape, None, attrs, loc)


# --- tiled views -----------------------------------------------------------------------------------
def view_store_signature(index, update, /):
    """Signature of TiledView.atomic_store_<fn>."""

# |tile index| above which index * step could overflow int64: clamped there, far outside
# every array (the product stays within 2**62), as load/store clamp 64-bit tile indices.
_FAR = 2**62


def _element_indices(lw: "Lowerer", tv: TiledView, index: list[Value], loc: Loc) -> list[Value]:
    """int64 element coordinates of every element of the tile at `index`, one
    tile per axis broadcast to the tile shape: index[k] * steps[k] + t_k."""
    b = lw.b
    shape = tv.tile_shape
    out = []
    for k, (i, step, n) in enumerate(zip(index, tv.steps, shape)):
        i = b.cast(i, D.int64, loc)
        if index[k].type.dtype.bits == 64:
            limit = _FAR // step
            i = b.binary("maximum", b.binary("minimum", i, Const(limit), loc), Const(-limit), loc)
        origin = b.binary("mul", i, Const(step), loc)
        iota = b.emit1("iota", (), TileType(D.int64, (n,)), {"shape": (n,), "dtype": D.int64},
                       loc)
        axis_shape = tuple(n if j == k else 1 for j in range(len(shape)))
        iota = b.emit1("reshape", (iota,), TileType(D.int64, axis_shape), {"shape": axis_shape},
                       loc)
        out.append(b.broadcast(b.binary("add", origin, iota, loc), shape, loc))
    return out


def view_atomic_store(lw: "Lowerer", tv: TiledView, method: str, a: dict, loc: Loc) -> FrontVal:
    """TiledView.atomic_store_<fn>(index, update): atomic_<fn> on each element of
    the tile at tile-space `index` (RELAXED, DEVICE scope, no result);
    out-of-bounds elements are ignored."""
    fn = VIEW_METHODS[method]
    name = f"TiledView.{method}"
    arr = tv.array
    check_dtype(arr, fn, name, loc, kind="view")
    index = _index(lw, a["index"], arr.type.ndim, name, loc)
    idx = _element_indices(lw, tv, index, loc)
    update = operand(lw, a["update"], arr.type.dtype, tv.tile_shape, fn in BITWISE, name,
                     "update", loc)
    attrs = {"fn": fn, "memory_order": MemoryOrder.RELAXED, "memory_scope": MemoryScope.DEVICE,
             "check_bounds": True}
    emit_atomic(lw, arr, [update], idx, tv.tile_shape, None, attrs, loc)
    return Const(None)
