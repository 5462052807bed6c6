"""The language's typing rules as the generator needs them: result dtypes of
operators (promotion with typed operands and loosely typed constants),
broadcasting, and the dtype groups the generator draws from. They mirror
`frontend/builder.py` through the same `language.dtypes` functions, so a
program the generator believes well typed and the front end refuses is a
finding (of one or the other)."""
from __future__ import annotations

from typing import Optional, Union

from ...language import dtypes as D
from ...language.dtypes import DType

__all__ = ["ARITH", "STORAGE_ONLY", "INTS", "FLOATS", "promote", "broadcast", "is_pow2",
           "result_dtype", "fits", "Operand"]

FLOATS = (D.float16, D.float32, D.float64, D.bfloat16)
INTS = (D.uint8, D.uint16, D.uint32, D.uint64, D.int8, D.int16, D.int32, D.int64)
ARITH = (D.bool_,) + INTS + FLOATS
STORAGE_ONLY = (D.float8_e4m3fn, D.float8_e5m2, D.float8_e8m0fnu, D.float4_e2m1fn, D.tfloat32)
_BITWISE = ("bitand", "bitor", "bitxor", "lshift", "rshift")

# An operand: a typed dtype, or a loosely typed Python constant.
Operand = Union[DType, bool, int, float]


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def fits(value: int, dtype: DType) -> bool:
    return dtype.min <= value <= dtype.max


def promote(a: Operand, b: Operand) -> Optional[DType]:
    """The common dtype of two operands (None where the language refuses)."""
    if isinstance(a, DType) and isinstance(b, DType):
        try:
            return D.promote_types(a, b)
        except TypeError:
            return None
    if isinstance(a, DType) or isinstance(b, DType):
        typed, const = (a, b) if isinstance(a, DType) else (b, a)
        try:
            return D.promote_with_constant(typed, const)
        except (TypeError, OverflowError):
            return None
    return None  # two constants fold at compile time; the generator never emits that


def result_dtype(fn: str, a: Operand, b: Operand) -> Optional[DType]:
    """Result dtype of binary `fn` (None if refused)."""
    dt = promote(a, b)
    if dt is None or not dt.arithmetic:
        return None
    if fn in _BITWISE and dt.is_float:
        return None
    if fn in ("truediv", "atan2") and not dt.is_float:
        return D.float32
    return dt


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> Optional[tuple[int, ...]]:
    """NumPy broadcasting of two shapes (None if incompatible)."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(out)
