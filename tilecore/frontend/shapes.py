"""Factories, conversions, shape manipulation and reductions in tile code."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import TileType
from ..language import dtypes as D
from .args import (const_axes, const_bool, const_dtype, const_int, const_shape, normalize_axis,
                   tile_arg)
from .builder import describe, is_pow2, loose_dtype
from .folding import convert_const
from .values import Const, FrontVal, TupleVal

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["arange", "full", "astype", "bitcast", "reshape", "permute", "transpose", "broadcast_to",
           "expand_dims", "reduce", "argreduce", "reshape_value"]


def arange(lw: "Lowerer", a: dict, loc: Loc) -> FrontVal:
    n = const_int(a["size"], "arange", "size", loc)
    if not is_pow2(n):
        raise TileValueError(f'Invalid argument "size" of arange(): tile dimensions must be '
                             f"powers of two, got {n}", loc)
    dtype = const_dtype(a["dtype"], "arange", "dtype", loc)
    if dtype.is_integer:
        return lw.b.emit1("iota", (), TileType(dtype, (n,)), {"shape": (n,), "dtype": dtype}, loc)
    iota = lw.b.emit1("iota", (), TileType(D.int32, (n,)), {"shape": (n,), "dtype": D.int32}, loc)
    return lw.b.cast(iota, dtype, loc)


def full(lw: "Lowerer", shape_v, fill, dtype_v, loc: Loc, fn: str) -> FrontVal:
    shape = () if isinstance(shape_v, TupleVal) and not shape_v.items else \
        const_shape(shape_v, fn, "shape", loc)
    if isinstance(dtype_v, Const) and dtype_v.value is None:
        if isinstance(fill, Value):
            dtype = fill.type.dtype
        elif isinstance(fill, Const) and fill.is_number:
            dtype = fill.dtype or loose_dtype(fill.value, loc)
        else:
            dtype = const_dtype(dtype_v, fn, "dtype", loc)
    else:
        dtype = const_dtype(dtype_v, fn, "dtype", loc)
    if isinstance(fill, Value) and fill.type.shape != ():
        raise TileTypeError(f'Invalid argument "fill_value" of {fn}(): expected a scalar, got '
                            f"{describe(fill)}", loc)
    v = lw.b.to_typed(tile_arg(lw, fill, fn, "fill_value", loc) if isinstance(fill, Value)
                      else fill, dtype, (), loc)
    return lw.b.broadcast(v, shape, loc)


def astype(lw: "Lowerer", x: FrontVal, dtype_v, loc: Loc) -> FrontVal:
    dtype = const_dtype(dtype_v, "astype", "dtype", loc)
    if isinstance(x, Const) and x.is_number:
        return Const(convert_const(x.value, dtype, loc), dtype)
    return lw.b.cast(tile_arg(lw, x, "astype", "x", loc), dtype, loc)


_NO_BITCAST = ("bool_", "tfloat32", "float4_e2m1fn")


def bitcast(lw: "Lowerer", x: FrontVal, dtype_v, loc: Loc) -> FrontVal:
    dtype = const_dtype(dtype_v, "bitcast", "dtype", loc)
    v = tile_arg(lw, x, "bitcast", "x", loc)
    for what, d in (("x", v.type.dtype), ("dtype", dtype)):
        if d.name in _NO_BITCAST:
            raise TileTypeError(f'Invalid argument "{what}" of bitcast(): expected a dtype of '
                                f"whole bytes other than bool and tfloat32, got {d.name}", loc)
    if dtype.itemsize != v.type.dtype.itemsize:
        raise TileTypeError(f'Invalid argument "dtype" of bitcast(): expected a dtype of '
                            f"{v.type.dtype.itemsize * 8} bits (as x's {v.type.dtype.name}), "
                            f"got {dtype.name} of {dtype.itemsize * 8} bits", loc)
    if dtype is v.type.dtype:
        return v
    return lw.b.emit1("bitcast", (v,), TileType(dtype, v.type.shape), {"dtype": dtype}, loc)


def reshape_value(lw: "Lowerer", v: Value, shape: tuple[int, ...], loc: Loc) -> Value:
    if v.type.shape == shape:
        return v
    return lw.b.emit1("reshape", (v,), TileType(v.type.dtype, shape), {"shape": shape}, loc)


def reshape(lw: "Lowerer", x: FrontVal, shape_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, "reshape", "x", loc)
    shape = () if isinstance(shape_v, TupleVal) and not shape_v.items else \
        const_shape(shape_v, "reshape", "shape", loc, allow_minus_one=True)
    if shape.count(-1) > 1:
        raise TileValueError(f'Invalid argument "shape" of reshape(): at most one -1, got {shape}',
                             loc)
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape = tuple(v.type.size // known if s == -1 else s for s in shape)
    size = 1
    for s in shape:
        size *= s
    if size != v.type.size or not all(is_pow2(s) for s in shape):
        raise TileValueError(f"Cannot reshape a tile of shape {v.type.shape} ({v.type.size} "
                             f"elements) to {shape}", loc)
    return reshape_value(lw, v, shape, loc)


def permute(lw: "Lowerer", x: FrontVal, axes_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, "permute", "x", loc)
    axes = const_axes(axes_v, "permute", "axes", loc)
    if axes is None or sorted(a % max(v.type.ndim, 1) for a in axes) != list(range(v.type.ndim)):
        raise TileValueError(f'Invalid argument "axes" of permute(): expected a permutation of '
                             f"{tuple(range(v.type.ndim))}, got {axes}", loc)
    axes = tuple(a % v.type.ndim for a in axes)
    if axes == tuple(range(v.type.ndim)):
        return v
    shape = tuple(v.type.shape[a] for a in axes)
    return lw.b.emit1("permute", (v,), TileType(v.type.dtype, shape), {"axes": axes}, loc)


def transpose(lw: "Lowerer", x: FrontVal, axis0, axis1, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, "transpose", "x", loc)
    nd = v.type.ndim
    if isinstance(axis0, Const) and axis0.value is None and isinstance(axis1, Const) \
            and axis1.value is None:
        if nd < 2:
            return v
        a0, a1 = nd - 2, nd - 1
    else:
        a0 = normalize_axis(const_int(axis0, "transpose", "axis0", loc), nd, "transpose", loc,
                            "axis0")
        a1 = normalize_axis(const_int(axis1, "transpose", "axis1", loc), nd, "transpose", loc,
                            "axis1")
    axes = list(range(nd))
    axes[a0], axes[a1] = axes[a1], axes[a0]
    return permute(lw, v, TupleVal(tuple(Const(a) for a in axes)), loc)


def broadcast_to(lw: "Lowerer", x: FrontVal, shape_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, "broadcast_to", "x", loc)
    shape = const_shape(shape_v, "broadcast_to", "shape", loc)
    return lw.b.broadcast(v, shape, loc)


def expand_dims(lw: "Lowerer", x: FrontVal, axis_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, "expand_dims", "x", loc)
    axis = normalize_axis(const_int(axis_v, "expand_dims", "axis", loc), v.type.ndim + 1,
                          "expand_dims", loc)
    shape = v.type.shape[:axis] + (1,) + v.type.shape[axis:]
    return reshape_value(lw, v, shape, loc)


def _reduce_axes(v: Value, axis_v, fn: str, loc: Loc) -> tuple[int, ...]:
    axes = const_axes(axis_v, fn, "axis", loc)
    nd = v.type.ndim
    if axes is None:
        return tuple(range(nd))
    norm = tuple(sorted({normalize_axis(a, nd, fn, loc) for a in axes}))
    if len(norm) != len(axes):
        raise TileValueError(f'Invalid argument "axis" of {fn}(): repeated axis in {axes}', loc)
    return norm


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def reduce(lw: "Lowerer", fn: str, x: FrontVal, axis_v, keepdims_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, fn, "x", loc)
    keepdims = const_bool(keepdims_v, fn, "keepdims", loc)
    axes = _reduce_axes(v, axis_v, fn, loc)
    if v.type.dtype.is_bool and fn in ("sum", "prod"):
        v = lw.b.cast(v, D.int32, loc)
    if not axes:
        return v
    shape = _reduced_shape(v.type.shape, axes, keepdims)
    return lw.b.emit1("reduce", (v,), TileType(v.type.dtype, shape),
                      {"fn": fn, "axes": axes, "keepdims": keepdims}, loc)


def argreduce(lw: "Lowerer", fn: str, x: FrontVal, axis_v, keepdims_v, loc: Loc) -> FrontVal:
    v = tile_arg(lw, x, fn, "x", loc)
    keepdims = const_bool(keepdims_v, fn, "keepdims", loc)
    if isinstance(axis_v, Const) and axis_v.value is None:
        axis = None
        shape = (1,) * v.type.ndim if keepdims else ()
    else:
        axis = normalize_axis(const_int(axis_v, fn, "axis", loc), v.type.ndim, fn, loc)
        shape = _reduced_shape(v.type.shape, (axis,), keepdims)
    if v.type.ndim == 0:
        return lw.b.constant(0, D.int32, loc)
    return lw.b.emit1("argreduce", (v,), TileType(D.int32, shape),
                      {"fn": fn, "axis": axis, "keepdims": keepdims}, loc)
