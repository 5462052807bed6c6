"""Dtype conversions with the GPU's rounding, on NumPy arrays: the `astype`
contract of `ir.ops`, shared by the interpreter and the constant folder (a
constant converts exactly as the same value would at run time).

The interpreter stores every tile in `dtype.numpy_dtype` (tfloat32 in a
float32 container) and computes narrow floats in float32, rounding each result
once to nearest even, as the CUDA backend does. `cast` is the single place that
implements the `astype` contract of `ir.ops`; arithmetic rules use
`compute_dtype` and `cast` to round their results.
"""
from __future__ import annotations

import functools

import numpy as np

from .dtypes import DType

__all__ = ["round_to_tf32", "compute_dtype", "cast"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_TF32_DROPPED_BITS = 13  # float32 has 23 mantissa bits, tfloat32 keeps 10


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 values to 10 mantissa bits, to nearest even.

    Overflow past the largest tfloat32 value becomes inf (the carry runs into
    the exponent); infinities pass through and NaNs stay NaN."""
    x = np.asarray(x, dtype=_F32)
    bits = x.view(np.uint32)
    half = np.uint32((1 << (_TF32_DROPPED_BITS - 1)) - 1)
    lsb = (bits >> np.uint32(_TF32_DROPPED_BITS)) & np.uint32(1)
    mask = np.uint32(~((1 << _TF32_DROPPED_BITS) - 1) & 0xFFFFFFFF)
    rounded = ((bits + half + lsb) & mask).view(np.float32)
    return np.where(np.isnan(x), x, rounded)


@functools.lru_cache(maxsize=None)
def compute_dtype(dtype: DType) -> np.dtype:
    """The NumPy dtype arithmetic on `dtype` runs in: float32 for every float
    narrower than float32 (and tfloat32), int32 for bool (C++ promotes bool
    operands to int), the storage dtype otherwise. Memoized: the interpreter
    asks once per op and block."""
    if dtype.is_float:
        return _F64 if dtype.numpy_dtype == _F64 else _F32
    if dtype.is_bool:
        return np.dtype(np.int32)
    return dtype.numpy_dtype


def cast(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Convert `x` (any bool/int/float NumPy or ml_dtypes array) to `dtype`'s
    storage with the semantics of the `astype` op: float->int truncates toward
    zero (NaN -> 0, out of range saturates, as CUDA's cvt.rzi does), int->int
    wraps, ->bool is x != 0, ->float rounds once to nearest even."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if dtype.is_bool:
            return x != 0
        if dtype.is_integer:
            if _is_float(x.dtype):
                return _float_to_int(x, dtype.numpy_dtype)
            return x.astype(dtype.numpy_dtype)
        return _to_float(x, dtype)


def _is_float(npd: np.dtype) -> bool:
    """True for NumPy floats and ml_dtypes floats (which NumPy sees as kind 'V')."""
    return npd.kind in "fV"


def _float_to_int(x: np.ndarray, npd: np.dtype) -> np.ndarray:
    t = np.trunc(x.astype(_F64))
    info = np.iinfo(npd)
    # Powers of two are exact in float64, so these comparisons are exact.
    too_big = t >= float(info.max + 1)
    too_small = t < float(info.min)
    bad = too_big | too_small | np.isnan(t)
    out = np.where(bad, 0.0, t).astype(npd)
    out[too_big] = info.max
    out[too_small] = info.min
    return out


def _to_float(x: np.ndarray, dtype: DType) -> np.ndarray:
    target = dtype.numpy_dtype
    if target == _F64:
        return x.astype(_F64)
    if dtype.name != "tfloat32" and target == _F32:
        # One correctly rounded conversion from any int or float source.
        return x.astype(_F32)
    if _is_float(x.dtype) and x.dtype.itemsize <= 4:
        f32 = x.astype(_F32)  # exact: the source already fits float32
    elif x.dtype.kind in "iu" and x.dtype.itemsize == 8:
        # float64 holds only 53 bits: converting first would round twice
        f32 = _to_f32_round_to_odd(_int64_to_f64_round_to_odd(x))
    else:
        f32 = _to_f32_round_to_odd(x.astype(_F64))
    if dtype.name == "tfloat32":
        return round_to_tf32(f32)
    return f32.astype(target)


def _int64_to_f64_round_to_odd(x: np.ndarray) -> np.ndarray:
    """int64/uint64 -> float64 rounded to odd: keep the top 52 or 53 bits of
    the magnitude and set the last one if any bit below was dropped (a later
    rounding to odd or to a format of at most 51 bits stays exact)."""
    u = x.view(np.uint64) if x.dtype.kind == "i" else x.astype(np.uint64)
    neg = x < 0
    mag = np.where(neg, ~u + np.uint64(1), u)   # two's complement magnitude (2^63 for min)
    _, length = np.frexp(mag.astype(_F64))      # bit length, or one more if rounded up
    shift = np.maximum(length - 53, 0).astype(np.uint64)
    kept = mag >> shift
    dropped = (mag & ((np.uint64(1) << shift) - np.uint64(1))) != 0
    out = np.ldexp((kept | dropped.astype(np.uint64)).astype(_F64), shift.astype(np.int64))
    return np.where(neg, -out, out)


def _to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: truncate, then set the last bit if
    inexact. A second rounding to any format at least 2 bits narrower than
    float32 is then exactly the single correct rounding of the float64
    (no double-rounding error)."""
    f = x.astype(_F32)
    back = f.astype(_F64)
    inexact = (back != x) & np.isfinite(x)
    bits = f.view(np.uint32)
    away = inexact & (np.abs(back) > np.abs(x))
    bits = np.where(away, bits - np.uint32(1), bits)  # one ulp toward zero
    bits = np.where(inexact, bits | np.uint32(1), bits)
    return bits.view(np.float32)
