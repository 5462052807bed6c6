"""C++ spellings of tilecore dtypes, constants and padding values.

The backend uses its own mapping (not DType.ctype) so that the storage-only
formats are the tagged structs of our header (conversions we control,
matching ml_dtypes) and float16/bfloat16 pull in their header only on use.
"""
from __future__ import annotations

import math

from ...language import dtypes as D
from ...language.dtypes import DType
from ...language.enums import PaddingMode

__all__ = ["ctype", "literal", "padding_value", "header_for", "scalar_format"]

_CTYPES = {
    "bool_": "bool", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long", "int8": "signed char",
    "int16": "short", "int32": "int", "int64": "long long", "float16": "__half",
    "float32": "float", "float64": "double", "bfloat16": "__nv_bfloat16",
    "tfloat32": "tc::tf32", "float8_e4m3fn": "tc::f8e4m3", "float8_e5m2": "tc::f8e5m2",
    "float8_e8m0fnu": "tc::f8e8m0", "float4_e2m1fn": "tc::f4e2m1",
}

# struct format of a scalar kernel parameter; 16-bit floats and the storage
# formats travel as raw bits.
_FORMATS = {
    "bool_": "?", "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q", "int8": "b",
    "int16": "h", "int32": "i", "int64": "q", "float16": "H", "float32": "f",
    "float64": "d", "bfloat16": "H", "tfloat32": "f", "float8_e4m3fn": "B",
    "float8_e5m2": "B", "float8_e8m0fnu": "B", "float4_e2m1fn": "B",
}


def ctype(dt: DType) -> str:
    """The C++ type holding one element of `dt`."""
    return _CTYPES[dt.name]


def scalar_format(dt: DType) -> str:
    """The struct format character of a scalar parameter of dtype `dt`."""
    return _FORMATS[dt.name]


def header_for(dt: DType) -> str | None:
    """Extra header a kernel needs when it uses `dt` (None: core header only)."""
    return {"float16": "tilecore/fp16.cuh", "bfloat16": "tilecore/bf16.cuh"}.get(dt.name)


def _float_literal(value: float) -> str:
    if math.isnan(value):
        return "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(value):
        sign = "-" if value < 0 else ""
        return f"{sign}__longlong_as_double(0x7ff0000000000000LL)"
    return float(value).hex()  # exact C++ hex-float literal (a double)


def _int_literal(dt: DType, value: int) -> str:
    if dt.signed:
        if value == -2**63:
            return "(-9223372036854775807LL - 1)"
        return f"{value}LL"
    return f"{value & (2**64 - 1)}ULL"


def literal(dt: DType, value) -> str:
    """A C++ expression of type ctype(dt) with exactly `value`."""
    t = ctype(dt)
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_integer:
        return f"(({t}){_int_literal(dt, int(value))})"
    if dt is D.float32 and math.isfinite(float(value)):
        return f"{float(value).hex()}f"
    if dt is D.float64:
        return f"({_float_literal(float(value))})"
    return f"tc::Num<{t}>::from_float({_float_literal(float(value))})"


def padding_value(dt: DType, mode: PaddingMode) -> str:
    """The element an out-of-bounds load yields under `mode`. Integers have no
    NaN/inf: NaN and +inf pad with the max, -inf with the min."""
    if dt.is_bool:
        return literal(dt, mode is not PaddingMode.ZERO and mode is not PaddingMode.NEG_ZERO)
    if dt.is_integer:
        value = {PaddingMode.ZERO: 0, PaddingMode.NEG_ZERO: 0,
                 PaddingMode.NEG_INF: dt.min}.get(mode, dt.max)
        return literal(dt, value)
    value = {PaddingMode.UNDETERMINED: math.nan, PaddingMode.NAN: math.nan,
             PaddingMode.ZERO: 0.0, PaddingMode.NEG_ZERO: -0.0,
             PaddingMode.POS_INF: math.inf, PaddingMode.NEG_INF: -math.inf}[mode]
    return literal(dt, value)
