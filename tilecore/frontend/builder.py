"""Builds typed IR: fresh values, op emission into the current block, and the
typing rules of the language (promotion, broadcasting, constant folding).

Every implicit conversion the language performs happens here, so IR ops
always see operands of one dtype and one shape, as `ir/ops.py` promises.
"""
from __future__ import annotations

import math
import operator
from contextlib import contextmanager
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Block, Op, Value
from ..ir.types import ArrayType, TileType
from ..language import dtypes as D
from ..language.dtypes import DType
from .values import Const, FrontVal, TupleVal

__all__ = ["Builder", "broadcast_shapes", "is_pow2"]

_BINARY_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>",
    "minimum": "minimum()", "maximum": "maximum()", "atan2": "atan2()",
}
_COMPARE_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_PY_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "bitand": operator.and_, "bitor": operator.or_,
    "bitxor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift,
    "minimum": min, "maximum": max, "atan2": math.atan2,
}
_PY_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
               "gt": operator.gt, "ge": operator.ge}
_BITWISE = ("bitand", "bitor", "bitxor", "lshift", "rshift")


def is_pow2(n: int) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...], loc: Optional[Loc] = None,
                     what: str = "operands") -> tuple[int, ...]:
    """NumPy broadcasting of two shapes; TileValueError if incompatible."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            raise TileValueError(f"Shapes {tuple(a)} and {tuple(b)} of the {what} cannot be "
                                 f"broadcast together (dimension {x} vs {y})", loc)
        out.append(max(x, y))
    return tuple(out)


def _fold_typed(fn, dtype: DType, *values):
    """Evaluate `fn` on NumPy scalars of `dtype` the way the tile ops would (wrapping)."""
    with np.errstate(all="ignore"):
        arrs = [np.asarray(v).astype(dtype.numpy_dtype) for v in values]
        if dtype.numpy_dtype.itemsize < 4 and dtype.is_float or dtype is D.tfloat32:
            arrs = [a.astype(np.float32) for a in arrs]
        out = fn(*arrs)
    return out


class Builder:
    """Owns the value counter and the stack of blocks ops are appended to."""

    def __init__(self) -> None:
        self.next_id = 0
        self.blocks: list[Block] = []

    # --- structure -------------------------------------------------------------------
    def new_value(self, type, hint: str = "") -> Value:
        v = Value(type, self.next_id, hint)
        self.next_id += 1
        return v

    @contextmanager
    def block(self, block: Block):
        self.blocks.append(block)
        try:
            yield block
        finally:
            self.blocks.pop()

    @property
    def current(self) -> Block:
        return self.blocks[-1]

    def emit(self, name: str, operands: Sequence[Value], result_types: Sequence,
             attrs: Optional[dict] = None, regions: Sequence[Block] = (),
             loc: Optional[Loc] = None) -> Op:
        results = tuple(self.new_value(t) for t in result_types)
        op = Op(name, tuple(operands), results, dict(attrs or {}), tuple(regions), loc)
        self.current.ops.append(op)
        return op

    def emit1(self, name: str, operands: Sequence[Value], result_type, attrs=None,
              loc: Optional[Loc] = None) -> Value:
        return self.emit(name, operands, (result_type,), attrs, (), loc).result

    # --- constants -----------------------------------------------------------------------
    def constant(self, value: Any, dtype: DType, loc: Optional[Loc] = None) -> Value:
        return self.emit1("constant", (), TileType(dtype, ()), {"value": _py_value(value, dtype)},
                          loc)

    def materialize(self, fv: FrontVal, loc: Optional[Loc], what: str = "operand") -> Value:
        """A run-time value for `fv` (constants become `constant` ops)."""
        if isinstance(fv, Value):
            return fv
        if isinstance(fv, Const) and fv.is_number:
            dtype = fv.dtype or loose_dtype(fv.value, loc)
            return self.constant(fv.value, dtype, loc)
        raise TileTypeError(f"Invalid {what}: expected a tile or a number, got {describe(fv)}",
                            loc)

    # --- conversions -----------------------------------------------------------------------
    def cast(self, v: Value, dtype: DType, loc: Optional[Loc]) -> Value:
        if v.type.dtype is dtype:
            return v
        return self.emit1("astype", (v,), TileType(dtype, v.type.shape), {"dtype": dtype}, loc)

    def broadcast(self, v: Value, shape: tuple[int, ...], loc: Optional[Loc]) -> Value:
        if v.type.shape == tuple(shape):
            return v
        broadcast_shapes(v.type.shape, shape, loc)
        if len(v.type.shape) > len(shape) or any(
                s != 1 and s != t for s, t in zip(reversed(v.type.shape), reversed(shape))):
            raise TileValueError(f"Cannot broadcast a tile of shape {v.type.shape} to {tuple(shape)}",
                                 loc)
        if math.prod(shape) == v.type.size:  # only adds 1-sized axes: same elements, same order
            return self.emit1("reshape", (v,), TileType(v.type.dtype, tuple(shape)),
                              {"shape": tuple(shape)}, loc)
        return self.emit1("broadcast", (v,), TileType(v.type.dtype, tuple(shape)),
                          {"shape": tuple(shape)}, loc)

    def to_typed(self, fv: FrontVal, dtype: DType, shape: tuple[int, ...], loc) -> Value:
        """Materialize, convert and broadcast `fv` to `dtype` and `shape`."""
        if isinstance(fv, Const) and fv.is_number and fv.dtype is None:
            if dtype.is_integer and D.constant_category(fv.value) == D.INT:
                try:
                    D.check_int_fits(int(fv.value), dtype)
                except OverflowError as e:
                    raise TileValueError(f"Invalid constant: {e}", loc) from None
            v = self.constant(fv.value, dtype, loc)
        else:
            v = self.cast(self.materialize(fv, loc), dtype, loc)
        return self.broadcast(v, shape, loc)

    # --- typing rules ---------------------------------------------------------------------
    def common_dtype(self, a: FrontVal, b: FrontVal, symbol: str, loc) -> DType:
        da, db = dtype_of(a), dtype_of(b)
        try:
            if da is not None and db is not None:
                return D.promote_types(da, db)
            if da is not None:
                return D.promote_with_constant(da, b.value)
            return D.promote_with_constant(db, a.value)
        except (TypeError, OverflowError) as e:
            raise TileTypeError(f"Invalid operands of '{symbol}': {e}", loc) from None

    def binary(self, fn: str, a: FrontVal, b: FrontVal, loc: Optional[Loc],
               attrs: Optional[dict] = None) -> FrontVal:
        symbol = _BINARY_SYMBOL[fn]
        _check_numeric(a, symbol, loc)
        _check_numeric(b, symbol, loc)
        if isinstance(a, Const) and isinstance(b, Const) and not attrs:
            return self._fold_binary(fn, a, b, symbol, loc)
        dtype = self.common_dtype(a, b, symbol, loc)
        if fn in _BITWISE and dtype.is_float:
            raise TileTypeError(f"Operator '{symbol}' needs integer or bool operands, got "
                                f"{describe(a)} and {describe(b)}", loc)
        if fn == "truediv" and not dtype.is_float:
            dtype = D.float32
        if fn in ("atan2",) and not dtype.is_float:
            dtype = D.float32
        shape = broadcast_shapes(shape_of(a), shape_of(b), loc)
        if attrs:
            _check_float32_mode(fn, dtype, loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        return self.emit1("binary", (va, vb), TileType(dtype, shape), {"fn": fn, **(attrs or {})},
                          loc)

    def _fold_binary(self, fn: str, a: Const, b: Const, symbol: str, loc) -> Const:
        try:
            if a.dtype is None and b.dtype is None:
                return Const(_PY_BINARY[fn](a.value, b.value))
            dtype = self.common_dtype(a, b, symbol, loc)
            if fn == "truediv" and not dtype.is_float:
                dtype = D.float32
            np_fn = _NP_BINARY[fn]
            out = _fold_typed(np_fn, dtype, a.value, b.value)
            return Const(_py_value(out, dtype), dtype)
        except ZeroDivisionError:
            raise TileValueError(f"Division by zero in constant expression "
                                 f"{a.value!r} {symbol} {b.value!r}", loc) from None

    def compare(self, fn: str, a: FrontVal, b: FrontVal, loc) -> FrontVal:
        symbol = _COMPARE_SYMBOL[fn]
        _check_numeric(a, symbol, loc)
        _check_numeric(b, symbol, loc)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(bool(_PY_COMPARE[fn](a.value, b.value)))
        dtype = self.common_dtype(a, b, symbol, loc)
        shape = broadcast_shapes(shape_of(a), shape_of(b), loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        return self.emit1("compare", (va, vb), TileType(D.bool_, shape), {"fn": fn}, loc)

    def unary(self, fn: str, x: FrontVal, loc, attrs: Optional[dict] = None) -> FrontVal:
        _check_numeric(x, fn, loc)
        if isinstance(x, Const) and not attrs:
            return _fold_unary(fn, x, loc)
        if isinstance(x, Const):
            x = self.materialize(x, loc)
        v = x
        if fn in _FLOAT_ONLY and not v.type.dtype.is_float:
            v = self.cast(v, D.float32, loc)
        if fn == "invert" and v.type.dtype.is_float:
            raise TileTypeError(f"Operator '~' needs an integer or bool operand, got {describe(x)}",
                                loc)
        if attrs:
            _check_float32_mode(fn, v.type.dtype, loc)
        dtype = D.bool_ if fn == "isnan" else v.type.dtype
        return self.emit1("unary", (v,), TileType(dtype, v.type.shape), {"fn": fn, **(attrs or {})},
                          loc)

    def where(self, cond: FrontVal, a: FrontVal, b: FrontVal, loc) -> FrontVal:
        if isinstance(cond, Const) and cond.is_number:
            return a if cond.value else b
        c = self.materialize(cond, loc, "condition of where()")
        if not c.type.dtype.is_bool:
            c = self.compare("ne", c, Const(0), loc)
        _check_numeric(a, "where()", loc)
        _check_numeric(b, "where()", loc)
        if isinstance(a, Const) and isinstance(b, Const) and a.dtype is None and b.dtype is None:
            dtype = D.promote_types(D.constant_dtype(a.value), D.constant_dtype(b.value)) \
                if D.constant_category(a.value) == D.constant_category(b.value) \
                else D.constant_dtype(a.value if D.constant_category(a.value) >
                                      D.constant_category(b.value) else b.value)
        else:
            dtype = self.common_dtype(a, b, "where()", loc)
        shape = broadcast_shapes(broadcast_shapes(shape_of(a), shape_of(b), loc),
                                 c.type.shape, loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        c = self.broadcast(c, shape, loc)
        return self.emit1("where", (c, va, vb), TileType(dtype, shape), None, loc)


_FLOAT_ONLY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh",
               "cosh", "tanh", "floor", "ceil", "isnan")


def _check_float32_mode(fn: str, dtype: DType, loc) -> None:
    """Rounding modes other than the default and flush-to-zero exist for float32 only."""
    if dtype is not D.float32:
        raise TileTypeError(f"{fn}() with a rounding_mode other than the default or with "
                            f"flush_to_zero needs float32 operands, got {dtype.name}", loc)


def _np_floordiv(a, b):
    return np.floor_divide(a, b)


_NP_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": _np_floordiv, "mod": np.mod, "pow": np.power, "bitand": np.bitwise_and,
    "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "lshift": np.left_shift,
    "rshift": np.right_shift, "minimum": np.minimum, "maximum": np.maximum,
    "atan2": np.arctan2,
}
_NP_UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil, "isnan": np.isnan,
}


def _fold_unary(fn: str, x: Const, loc) -> Const:
    if fn == "invert":
        if x.dtype is None:
            if isinstance(x.value, bool):
                return Const(not x.value)
            if isinstance(x.value, float):
                raise TileTypeError(f"Operator '~' needs an integer operand, got {x.value!r}", loc)
            return Const(~x.value)
        out = _fold_typed(np.invert if not x.dtype.is_bool else np.logical_not, x.dtype, x.value)
        return Const(_py_value(out, x.dtype), x.dtype)
    if x.dtype is None:
        if fn == "neg":
            return Const(-x.value)
        if fn == "abs":
            return Const(abs(x.value))
        with np.errstate(all="ignore"):
            out = _NP_UNARY[fn](np.float64(x.value))
        return Const(bool(out) if fn == "isnan" else float(out))
    dtype = x.dtype if x.dtype.is_float or fn in ("neg", "abs") else D.float32
    out = _fold_typed(_NP_UNARY[fn], dtype, x.value)
    if fn == "isnan":
        return Const(bool(out), D.bool_)
    return Const(_py_value(out, dtype), dtype)


def _py_value(v: Any, dtype: DType):
    """A Python scalar holding `v` converted to `dtype` (wrapping, rounding)."""
    with np.errstate(all="ignore"):
        if dtype.is_bool:
            return bool(v)
        if dtype.is_integer:
            if isinstance(v, (float, np.floating)):
                v = np.asarray(v).astype(np.float64)
                return int(np.asarray(v).astype(dtype.numpy_dtype))
            bits = dtype.bits
            iv = int(v) & ((1 << bits) - 1)
            if dtype.signed and iv >= 1 << (bits - 1):
                iv -= 1 << bits
            return iv
        if dtype is D.tfloat32:
            from ..language.rounding import round_tf32
            return round_tf32(float(v))
        return float(np.asarray(np.float64(v)).astype(dtype.numpy_dtype).astype(np.float64))


def loose_dtype(value: Any, loc: Optional[Loc]) -> DType:
    """The dtype a loosely typed numeric constant takes on its own (int32, int64,
    uint64, float32 or bool_); TileTypeError for integers beyond uint64."""
    try:
        return D.constant_dtype(value)
    except OverflowError as e:
        raise TileTypeError(f"Invalid constant: {e}", loc) from None


def dtype_of(fv: FrontVal) -> Optional[DType]:
    if isinstance(fv, Value):
        return fv.type.dtype
    if isinstance(fv, Const):
        return fv.dtype
    return None


def shape_of(fv: FrontVal) -> tuple[int, ...]:
    if isinstance(fv, Value):
        return fv.type.shape
    return ()


def _check_numeric(fv: FrontVal, symbol: str, loc) -> None:
    if isinstance(fv, Value) and isinstance(fv.type, TileType):
        return
    if isinstance(fv, Const) and fv.is_number:
        return
    raise TileTypeError(f"Invalid operand of '{symbol}': expected a tile or a number, "
                        f"got {describe(fv)}", loc)


def describe(fv: Any) -> str:
    """Short human description of a front-end value, for error messages."""
    if isinstance(fv, Value):
        t = fv.type
        if isinstance(t, ArrayType):
            return f"an array of {t.dtype.name} with {t.ndim} dimension(s)"
        if t.is_scalar:
            article = "an" if t.dtype.name[0] in "aeiou" else "a"
            return f"{article} {t.dtype.name} scalar"
        return f"a tile of {t.dtype.name} with shape {t.shape}"
    if isinstance(fv, Const):
        if fv.is_number:
            kind = f"strictly typed {fv.dtype.name}" if fv.dtype else "loosely typed"
            return f"a {kind} constant {fv.value!r}"
        return f"{type(fv.value).__name__} {fv.value!r}"
    if isinstance(fv, TupleVal):
        return "a tuple (" + ", ".join(_short(i) for i in fv.items) + \
            ("," if len(fv.items) == 1 else "") + ")"
    return type(fv).__name__


def _short(fv: Any) -> str:
    """A tuple item in error messages: constants by value, the rest described."""
    if isinstance(fv, Const) and (fv.is_number or fv.value is None) and fv.dtype is None:
        return repr(fv.value)
    return describe(fv)
