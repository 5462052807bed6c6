"""Checking the compile-time arguments of tile-code calls, with messages that
name the function, the argument, what was expected and what was found."""
from __future__ import annotations

from typing import Optional

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import ArrayType, TileType
from ..language.dtypes import DType
from .builder import describe, is_pow2
from .values import Const, FrontVal, TupleVal

__all__ = ["const_int", "const_bool", "const_shape", "const_axes", "const_dtype", "tile_arg",
           "array_arg", "normalize_axis", "order_arg"]


def _bad(fn: str, name: str, expected: str, got: FrontVal, loc: Loc, cls=TileTypeError):
    return cls(f'Invalid argument "{name}" of {fn}(): expected {expected}, got {describe(got)}',
               loc)


def _is_int_const(v: FrontVal) -> bool:
    return isinstance(v, Const) and isinstance(v.value, int) and not isinstance(v.value, bool)


def const_int(v: FrontVal, fn: str, name: str, loc: Loc) -> int:
    if not _is_int_const(v):
        raise _bad(fn, name, "a constant int", v, loc)
    return int(v.value)


def const_bool(v: FrontVal, fn: str, name: str, loc: Loc) -> bool:
    if not (isinstance(v, Const) and isinstance(v.value, bool)):
        raise _bad(fn, name, "a constant bool", v, loc)
    return v.value


def const_shape(v: FrontVal, fn: str, name: str, loc: Loc, *, pow2: bool = True,
                ndim: Optional[int] = None, allow_minus_one: bool = False) -> tuple[int, ...]:
    """A shape given as a constant int or a tuple of constant ints."""
    items = v.items if isinstance(v, TupleVal) else (v,)
    if not all(_is_int_const(i) for i in items):
        raise _bad(fn, name, "a tuple of constant ints", v, loc)
    shape = tuple(int(i.value) for i in items)
    if ndim is not None and len(shape) != ndim:
        raise TileValueError(f'Invalid argument "{name}" of {fn}(): expected a tuple of {ndim} '
                             f"ints, got {shape}", loc)
    for s in shape:
        if allow_minus_one and s == -1:
            continue
        if pow2 and not is_pow2(s):
            raise TileValueError(f'Invalid argument "{name}" of {fn}(): tile dimensions must be '
                                 f"powers of two, got {shape}", loc)
        if not pow2 and s <= 0:
            raise TileValueError(f'Invalid argument "{name}" of {fn}(): expected positive ints, '
                                 f"got {shape}", loc)
    return shape


def const_axes(v: FrontVal, fn: str, name: str, loc: Loc) -> Optional[tuple[int, ...]]:
    if isinstance(v, Const) and v.value is None:
        return None
    items = v.items if isinstance(v, TupleVal) else (v,)
    if not all(_is_int_const(i) for i in items):
        raise _bad(fn, name, "None, a constant int or a tuple of constant ints", v, loc)
    return tuple(int(i.value) for i in items)


def normalize_axis(axis: int, ndim: int, fn: str, loc: Loc, name: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise TileValueError(f'Invalid argument "{name}" of {fn}(): axis {axis} is out of range '
                             f"for a tile with {ndim} dimension(s)", loc)
    return axis % ndim


def const_dtype(v: FrontVal, fn: str, name: str, loc: Loc) -> DType:
    if isinstance(v, Const) and isinstance(v.value, DType):
        return v.value
    raise _bad(fn, name, "a tilecore dtype (e.g. tilecore.float32)", v, loc)


def tile_arg(lw, v: FrontVal, fn: str, name: str, loc: Loc) -> Value:
    """A tile or scalar operand (numbers become constants)."""
    if isinstance(v, Value) and isinstance(v.type, TileType):
        return v
    if isinstance(v, Const) and v.is_number:
        return lw.b.materialize(v, loc)
    raise _bad(fn, name, "a tile", v, loc)


def array_arg(v: FrontVal, fn: str, name: str, loc: Loc) -> Value:
    if isinstance(v, Value) and isinstance(v.type, ArrayType):
        return v
    raise _bad(fn, name, "an array (a kernel parameter)", v, loc)


def order_arg(v: FrontVal, ndim: int, fn: str, loc: Loc) -> tuple[int, ...]:
    if isinstance(v, Const) and v.value in ("C", "F"):
        return tuple(range(ndim)) if v.value == "C" else tuple(reversed(range(ndim)))
    items = v.items if isinstance(v, TupleVal) else None
    if items is None or not all(_is_int_const(i) for i in items):
        raise _bad(fn, "order", '"C", "F" or a tuple of constant ints', v, loc)
    order = tuple(int(i.value) for i in items)
    if sorted(order) != list(range(ndim)):
        raise TileValueError(f'Invalid argument "order" of {fn}(): expected a permutation of '
                             f"{tuple(range(ndim))}, got {order}", loc)
    return order
