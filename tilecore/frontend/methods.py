"""Attributes, methods and subscripts of tiles, arrays, tiled views and
compile-time objects in tile code."""
from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from ..errors import Loc, TileSyntaxError, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import ArrayType, TileType
from ..language import dtypes as D
from ..language import ops as L
from ..language.enums import PaddingMode
from .args import const_int
from .builder import describe, loose_dtype
from .calls import bind, call_object
from .values import BoundMethod, Const, FrontVal, RawMemory, TiledView, TupleVal
from . import memory as M
from . import atomic as A
from . import raw_memory as R
from . import shapes as S

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["get_attribute", "call_method", "subscript"]

_TILE_METHODS = {"astype": L.astype, "reshape": L.reshape, "permute": L.permute,
                 "transpose": L.transpose, "sum": L.sum, "prod": L.prod, "max": L.max,
                 "min": L.min, "argmax": L.argmax, "argmin": L.argmin,
                 "broadcast_to": L.broadcast_to, "expand_dims": L.expand_dims}


def _sig(fn) -> inspect.Signature:
    return inspect.signature(fn)


def _tiled_view_sig(tile_shape, padding_mode=PaddingMode.UNDETERMINED, traversal_steps=None):
    """Signature of Array.tiled_view."""


def _view_load_sig(index, *, latency=None, allow_tma=None):
    """Signature of TiledView.load."""


def _view_prefetch_sig(index):
    """Signature of TiledView.prefetch."""


def _view_store_sig(index, tile, *, latency=None, allow_tma=None):
    """Signature of TiledView.store."""


def _view_num_tiles_sig(axis):
    """Signature of TiledView.num_tiles."""


# TiledView methods (besides the atomic stores): name -> (signature, handler)
_VIEW_METHODS = {"load": (_view_load_sig, M.view_load),
                 "prefetch": (_view_prefetch_sig, M.view_prefetch),
                 "store": (_view_store_sig, M.view_store),
                 "num_tiles": (_view_num_tiles_sig, M.view_num_tiles)}


def get_attribute(lw: "Lowerer", obj: FrontVal, attr: str, loc: Loc) -> FrontVal:
    if isinstance(obj, Value) and isinstance(obj.type, TileType):
        t = obj.type
        if attr == "shape":
            return TupleVal(tuple(Const(s) for s in t.shape))
        if attr == "dtype":
            return Const(t.dtype)
        if attr == "ndim":
            return Const(t.ndim)
        if attr == "size":
            return Const(t.size)
        if attr == "T":
            return S.transpose(lw, obj, Const(None), Const(None), loc)
        if attr in _TILE_METHODS or attr == "item":
            return BoundMethod(obj, attr)
    elif isinstance(obj, Value) and isinstance(obj.type, ArrayType):
        t = obj.type
        if attr in ("shape", "strides"):
            op = "array_dim" if attr == "shape" else "array_stride"
            return TupleVal(tuple(lw.b.emit1(op, (obj,), TileType(t.index_dtype, ()), {"axis": i},
                                             loc)
                                  for i in range(t.ndim)))
        if attr == "dtype":
            return Const(t.dtype)
        if attr == "ndim":
            return Const(t.ndim)
        if attr in ("tiled_view", "get_raw_memory"):
            return BoundMethod(obj, attr)
    elif isinstance(obj, TiledView):
        if attr == "tile_shape":
            return TupleVal(tuple(Const(s) for s in obj.tile_shape))
        if attr == "dtype":
            return Const(obj.array.type.dtype)
        if attr in _VIEW_METHODS or attr in A.VIEW_METHODS:
            return BoundMethod(obj, attr)
    elif isinstance(obj, RawMemory):
        if attr == "dtype":
            return Const(obj.array.type.dtype)
        if attr in R.METHODS:
            return BoundMethod(obj, attr)
    elif isinstance(obj, Const) and not obj.is_number:
        try:
            value = getattr(obj.value, attr)
        except AttributeError:
            raise TileTypeError(f"{describe(obj)} has no attribute '{attr}'", loc) from None
        from .lower import wrap_global
        return wrap_global(value)
    elif isinstance(obj, Const) and attr in ("dtype", "shape", "ndim"):
        if attr == "dtype":
            return Const(obj.dtype or loose_dtype(obj.value, loc))
        return TupleVal(()) if attr == "shape" else Const(0)
    raise TileTypeError(f"{describe(obj)} has no attribute '{attr}' in tile code", loc)


def call_method(lw: "Lowerer", obj: FrontVal, name: str, args: list, kwargs: dict,
                loc: Loc) -> FrontVal:
    if isinstance(obj, Value) and isinstance(obj.type, TileType):
        if name == "item":
            if args or kwargs or obj.type.size != 1:
                raise TileValueError(f"item() needs a tile of exactly one element, got shape "
                                     f"{obj.type.shape}", loc)
            return S.reshape_value(lw, obj, (), loc)
        if name in ("reshape", "permute", "broadcast_to") and len(args) > 1:
            args = [TupleVal(tuple(args))]  # x.reshape(2, 4) as x.reshape((2, 4))
        return call_object(lw, _TILE_METHODS[name], [obj, *args], kwargs, loc)
    if isinstance(obj, Value) and name == "tiled_view":
        a = bind(_sig(_tiled_view_sig), "tiled_view", args, kwargs, loc)
        return M.tiled_view(lw, obj, a, loc)
    if isinstance(obj, Value) and name == "get_raw_memory":
        return R.get_raw_memory(lw, obj, args, kwargs, loc)
    if isinstance(obj, RawMemory):
        return R.call(lw, obj, name, args, kwargs, loc)
    if isinstance(obj, TiledView) and name in A.VIEW_METHODS:
        a = bind(_sig(A.view_store_signature), f"TiledView.{name}", args, kwargs, loc)
        return A.view_atomic_store(lw, obj, name, a, loc)
    if isinstance(obj, TiledView):
        sig, handler = _VIEW_METHODS[name]
        a = bind(_sig(sig), f"TiledView.{name}", args, kwargs, loc)
        return handler(lw, obj, a, loc)
    raise TileTypeError(f"{describe(obj)} has no method '{name}'", loc)


def subscript(lw: "Lowerer", obj: FrontVal, index: ast.expr, loc: Loc) -> FrontVal:
    if isinstance(obj, TupleVal):
        if isinstance(index, ast.Slice):
            parts = [None if p is None else lw.expr(p) for p in (index.lower, index.upper,
                                                                 index.step)]
            bounds = [None if p is None else const_int(p, "tuple slice", "index", loc)
                      for p in parts]
            return TupleVal(obj.items[slice(*bounds)])
        i = const_int(lw.expr(index), "tuple indexing", "index", loc)
        if not -len(obj.items) <= i < len(obj.items):
            raise TileValueError(f"Tuple index {i} is out of range for a tuple of "
                                 f"{len(obj.items)} item(s)", loc)
        return obj.items[i]
    if isinstance(obj, Value) and isinstance(obj.type, TileType):
        return _tile_subscript(lw, obj, index, loc)
    if isinstance(obj, Value) and isinstance(obj.type, ArrayType):
        raise TileSyntaxError("Arrays cannot be indexed in tile code; load tiles with "
                              "tilecore.load or tilecore.gather", loc)
    raise TileTypeError(f"{describe(obj)} cannot be subscripted", loc)


def _tile_subscript(lw: "Lowerer", v: Value, index: ast.expr, loc: Loc) -> Value:
    """`x[:, None]`-style indexing: full slices keep an axis, None inserts one."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    shape = list(v.type.shape)
    out: list[int] = []
    axis = 0
    n_real = sum(1 for i in items if not _is_none(i) and not _is_ellipsis(i))
    for item in items:
        if _is_none(item):
            out.append(1)
        elif _is_ellipsis(item):
            take = len(shape) - n_real
            out.extend(shape[axis:axis + take])
            axis += take
        elif isinstance(item, ast.Slice) and item.lower is None and item.upper is None \
                and item.step is None:
            if axis >= len(shape):
                raise TileValueError(f"Too many indices for a tile of shape {v.type.shape}", loc)
            out.append(shape[axis])
            axis += 1
        else:
            raise TileSyntaxError("Tiles can only be indexed with ':', None and '...' (tiles are "
                                  "not addressable element by element)", loc)
    out.extend(shape[axis:])
    return S.reshape_value(lw, v, tuple(out), loc)


def _is_none(node: Any) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_ellipsis(node: Any) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis
