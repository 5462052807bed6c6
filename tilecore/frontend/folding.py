"""Constant folding: the value of an operation whose operands are all
compile-time numbers, with the semantics the language gives constants.

Loosely typed constants follow Python (integers exact, floats IEEE double);
strictly typed ones compute in their dtype as the tile ops do (integers wrap,
16-bit floats compute in float32 and round once, bools compute as int32),
and a conversion to an integer dtype truncates and saturates as `astype`
does (NaN gives 0). Every failure (division by zero, a float conversion that
overflows, a complex result, ...) is a `TileValueError` at the kernel line.

Loosely typed integers are exact below 2**1024 in magnitude (`INT_BITS` bits:
the range of float64, so every finite float's integer part fits). Folding
stops with an error at that bound instead of computing numbers of millions
of digits (`10 ** 10 ** 8`, `1 << 10 ** 9`): a power or a shift is refused
before it is computed, any other result when it exceeds the bound.
"""
from __future__ import annotations

import math
import operator
import reprlib
from typing import Any, Callable, Optional

import numpy as np

from ..errors import Loc, TileTypeError, TileValueError
from ..language import dtypes as D
from ..language.rounding import cast
from ..language.dtypes import DType
from .values import Const

__all__ = ["INT_BITS", "fmt_number", "check_int_bound", "loose_binary", "typed_binary",
           "unary", "convert_const", "py_conversion"]

INT_BITS = 1024

_PY_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "bitand": operator.and_, "bitor": operator.or_,
    "bitxor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift,
    "minimum": min, "maximum": max, "atan2": math.atan2,
}
_NP_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.mod, "pow": np.power, "bitand": np.bitwise_and,
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
_ERRORS = (ArithmeticError, ValueError)   # what Python and NumPy raise while folding


def fmt_number(v: Any) -> str:
    """`repr(v)`, except that integers of more than 40 digits are abbreviated
    (Python refuses to print integers of more than 4,300 digits), and so are
    long strings."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 132:
        sign = "-" if v < 0 else ""
        if abs(v) & (abs(v) - 1) == 0:
            return f"{sign}2**{abs(v).bit_length() - 1}"
        return f"{sign}<a {v.bit_length()}-bit integer>"
    return reprlib.repr(v)


def _expr(symbol: str, a: Any, b: Any) -> str:
    """`a <symbol> b` (or `symbol(a, b)`) for error messages."""
    if symbol.endswith("()"):
        return f"{symbol[:-2]}({fmt_number(a)}, {fmt_number(b)})"
    left = fmt_number(a)
    if isinstance(a, (int, float)) and a < 0:
        left = f"({left})"
    return f"{left} {symbol} {fmt_number(b)}"


def _too_large(expr: str, bits: float, loc: Optional[Loc]) -> TileValueError:
    size = f"about {bits:.0f}" if bits < 1e15 else "more than 10**15"
    return TileValueError(f"Constant expression {expr} is too large: its integer value would "
                          f"have {size} bits; loosely typed integer constants are exact only "
                          f"below 2**{INT_BITS} in magnitude", loc)


def check_int_bound(value: Any, loc: Optional[Loc], what: str = "The integer constant") -> None:
    """TileValueError if `value` is an integer of more than `INT_BITS` bits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > INT_BITS:
        raise TileValueError(f"{what} {fmt_number(value)} is out of the range of loosely typed "
                             f"integer constants: their magnitude must be below 2**{INT_BITS}",
                             loc)


def _precheck(fn: str, symbol: str, a: Any, b: Any, loc: Optional[Loc]) -> None:
    """Refuse a power or a left shift of integers whose result would exceed the
    bound, before computing it, and negative shift counts."""
    ints = isinstance(a, int) and isinstance(b, int)
    if fn in ("lshift", "rshift") and ints and b < 0:
        raise TileValueError(f"Negative shift count in constant expression "
                             f"{_expr(symbol, a, b)}", loc)
    if fn == "lshift" and ints and a != 0 and abs(a).bit_length() + b > INT_BITS:
        raise _too_large(_expr(symbol, a, b), _as_float(abs(a).bit_length() + b), loc)
    if fn == "pow" and ints and b > 0 and abs(a) > 1 and \
            (abs(a).bit_length() - 1) * b >= INT_BITS:   # |a| ** b >= 2 ** ((bits - 1) * b)
        bits = math.log2(abs(a)) * _as_float(b)
        raise _too_large(_expr(symbol, a, b), math.floor(bits) + 1 if bits < 1e15 else bits,
                         loc)


def _as_float(n: int) -> float:
    return float(n) if n.bit_length() <= INT_BITS - 1 else math.inf


def loose_binary(fn: str, symbol: str, a: Any, b: Any, loc: Optional[Loc]) -> Const:
    """`a <op> b` for two loosely typed constants, as Python computes it."""
    check_int_bound(a, loc)
    check_int_bound(b, loc)
    _precheck(fn, symbol, a, b, loc)
    try:
        out = _PY_BINARY[fn](a, b)
    except _ERRORS as e:
        raise _fold_error(e, _expr(symbol, a, b), loc) from None
    if isinstance(out, complex):
        raise TileValueError(f"Constant expression {_expr(symbol, a, b)} has a complex result; "
                             f"tile code has no complex numbers", loc)
    if isinstance(out, int) and not isinstance(out, bool) and out.bit_length() > INT_BITS:
        raise _too_large(_expr(symbol, a, b), float(out.bit_length()), loc)
    return Const(out)


def typed_binary(fn: str, symbol: str, dtype: DType, a: Any, b: Any,
                 loc: Optional[Loc]) -> Const:
    """`a <op> b` computed in `dtype` (a strictly typed constant's dtype) as the
    tile op computes it."""
    if fn == "pow" and dtype.is_integer and b < 0:
        raise TileValueError(f"Invalid constant expression {_expr(symbol, a, b)}: an integer "
                             f"power of {dtype.name} needs a non-negative exponent", loc)
    if fn in ("floordiv", "mod") and dtype.is_integer and b == 0:
        raise _fold_error(ZeroDivisionError(), _expr(symbol, a, b), loc)
    out = _in_dtype(_NP_BINARY[fn], dtype, lambda: _expr(symbol, a, b), loc, a, b)
    return Const(convert_const(out, dtype, loc), dtype)


def _in_dtype(fn: Callable, dtype: DType, expr: Callable[[], str], loc: Optional[Loc],
              *values) -> Any:
    """`fn` on `values` as elements of `dtype`, as the interpreter computes a tile
    op (on 1-element arrays: NumPy's scalar and array math differ in the last bit)."""
    try:
        with np.errstate(all="ignore"):
            arrs = [np.array([convert_const(v, dtype, loc)]).astype(dtype.numpy_dtype)
                    for v in values]
            if dtype.numpy_dtype.itemsize < 4 and dtype.is_float or dtype is D.tfloat32:
                arrs = [a.astype(np.float32) for a in arrs]
            elif dtype.is_bool:   # bools compute as int32 and convert back (x != 0)
                arrs = [a.astype(np.int32) for a in arrs]
            return fn(*arrs)[0]
    except _ERRORS as e:
        raise _fold_error(e, expr(), loc) from None


def _fold_error(e: BaseException, expr: str, loc: Optional[Loc]) -> TileValueError:
    if isinstance(e, ZeroDivisionError):
        return TileValueError(f"Division by zero in constant expression {expr}", loc)
    if isinstance(e, OverflowError):
        return TileValueError(f"Constant expression {expr} overflows: {_reason(e)}", loc)
    return TileValueError(f"Invalid constant expression {expr}: {_reason(e)}", loc)


def unary(fn: str, x: Const, loc: Optional[Loc]) -> Const:
    """`fn(x)` of a constant: `neg`, `abs`, `invert` or a math function."""
    value = x.value
    if fn == "invert":
        if x.dtype is None:
            if isinstance(value, bool):
                return Const(not value)
            if isinstance(value, float):
                raise TileTypeError(f"Operator '~' needs an integer operand, got {value!r}", loc)
            check_int_bound(value, loc)
            out = ~value
            if out.bit_length() > INT_BITS:
                raise _too_large(f"~{fmt_number(value)}", float(out.bit_length()), loc)
            return Const(out)
        if x.dtype.is_float:
            raise TileTypeError(f"Operator '~' needs an integer or bool operand, got a strictly "
                                f"typed {x.dtype.name} constant {value!r}", loc)
        npfn = np.invert if not x.dtype.is_bool else np.logical_not
        return Const(convert_const(_in_dtype(npfn, x.dtype, lambda: f"~{value!r}", loc, value),
                                   x.dtype, loc), x.dtype)
    if x.dtype is None:
        check_int_bound(value, loc)
        if fn == "neg":
            return Const(-value)
        if fn == "abs":
            return Const(abs(value))
        arg = _to_float64(value, lambda: f"{fn}({fmt_number(value)})", loc)
        with np.errstate(all="ignore"):
            out = _NP_UNARY[fn](arg)
        return Const(bool(out) if fn == "isnan" else float(out))
    dtype = x.dtype if x.dtype.is_float or fn in ("neg", "abs") else D.float32
    out = _in_dtype(_NP_UNARY[fn], dtype, lambda: f"{fn}({value!r})", loc, value)
    if fn == "isnan":
        return Const(bool(out), D.bool_)
    return Const(convert_const(out, dtype, loc), dtype)


def _to_float64(v: Any, expr: Callable[[], str], loc: Optional[Loc]) -> np.float64:
    try:
        return np.float64(v)
    except OverflowError as e:
        raise _fold_error(e, expr(), loc) from None


def convert_const(v: Any, dtype: DType, loc: Optional[Loc] = None):
    """A Python scalar holding the number `v` converted to `dtype` as `astype`
    converts: integers wrap, floats truncate toward zero and saturate (NaN
    gives 0), floats round to nearest even."""
    with np.errstate(all="ignore"):
        if dtype.is_bool:
            return bool(v)
        if dtype.is_integer:
            if isinstance(v, (float, np.floating)):
                f = float(v)
                if math.isnan(f):
                    return 0
                if math.isinf(f):
                    return dtype.max if f > 0 else dtype.min
                return min(max(int(f), dtype.min), dtype.max)
            bits = dtype.bits
            iv = int(v) & ((1 << bits) - 1)
            if dtype.signed and iv >= 1 << (bits - 1):
                iv -= 1 << bits
            return iv
        f = _to_float64(v, lambda: f"{dtype.name}({fmt_number(v)})", loc)
        if isinstance(v, (int, np.integer)):   # bool included: rounded once, from the exact int
            f = _exact_source(int(v), f)
        return float(np.asarray(cast(f, dtype)).astype(np.float64).reshape(-1)[0])


def _exact_source(v: int, f: np.float64) -> np.ndarray:
    """An array whose one element `cast` rounds to any float dtype exactly as the
    integer `v` itself would round: `v` in int64 or uint64, else its float64
    rounded to odd (the top 53 bits and a sticky bit; a second rounding to a
    format of at most 51 bits is then the single correct one). `f`: float(v)."""
    if -(1 << 63) <= v < 1 << 64:
        return np.array([v], np.int64 if v < 1 << 63 else np.uint64)
    mag = abs(v)
    shift = mag.bit_length() - 53
    kept = (mag >> shift) | (1 if mag & ((1 << shift) - 1) else 0)
    odd = math.ldexp(kept, shift) if math.isfinite(f) else float(f)
    return np.array([odd if v > 0 else -odd])


def py_conversion(conv: type, v: Any, loc: Optional[Loc]) -> Const:
    """`int(v)`, `float(v)` or `bool(v)` of a loosely typed constant or a string,
    with Python's semantics (`float('inf')`, `int(2.5) == 2`)."""
    try:
        out = conv(v)
    except (OverflowError, ValueError, TypeError) as e:
        raise TileValueError(f"Invalid constant expression {conv.__name__}({fmt_number(v)}): "
                             f"{_reason(e)}", loc) from None
    check_int_bound(out, loc, f"The result of {conv.__name__}(),")
    return Const(out)


def _reason(e: BaseException) -> str:
    """An exception's message (OverflowError(34, 'Numerical result out of range')
    gives the text)."""
    if e.args and isinstance(e.args[-1], str):
        return e.args[-1]
    return str(e)
