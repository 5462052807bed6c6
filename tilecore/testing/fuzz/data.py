"""Input data for fuzzed kernels: arrays and scalars of every dtype, mixing
ordinary values with the ones that break implementations (NaN, infinities,
signed zeros, subnormals, extremes, integer limits, and values exactly at or
next to a rounding midpoint of a narrower float, which catch double rounding
in conversions)."""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType

__all__ = ["values", "layout", "scalar"]

# Narrow float formats whose rounding midpoints are worth hitting from each source.
_TIE_TARGETS = {
    "float64": ("float32", "bfloat16", "float16", "float8_e8m0fnu", "tfloat32"),
    "float32": ("bfloat16", "float16", "float8_e4m3fn", "float8_e8m0fnu", "tfloat32"),
    "float16": ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"),
    "bfloat16": ("float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu"),
}
# Mantissa bits of the floats an integer may be converted to (for integer midpoints).
_INT_TIE_BITS = (7, 10, 23, 52)


def _float_specials(dtype: DType) -> np.ndarray:
    fi = ml_dtypes.finfo(dtype.numpy_dtype)
    tiny, big = float(fi.tiny), float(fi.max)
    sub = float(fi.smallest_subnormal) if hasattr(fi, "smallest_subnormal") else tiny
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, tiny, -tiny, sub, -sub,
                     1.0, -1.0, float(fi.eps), big / 2, 0.5, -2.0])


@functools.lru_cache(maxsize=None)
def _grid_values(name: str) -> np.ndarray:
    """Every finite value of a float format of at most 16 bits, sorted (cached:
    large inputs draw thousands of ties)."""
    dt = np.dtype(D.lookup(name).numpy_dtype)
    with np.errstate(all="ignore"):
        codes = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint8 if dt.itemsize == 1
                          else np.uint16).view(dt).astype(np.float64)
    grid = np.unique(codes[np.isfinite(codes)])
    grid.setflags(write=False)
    return grid


def _ties(rng: np.random.Generator, src: DType, n: int) -> np.ndarray:
    """n values of `src` at a rounding midpoint of a narrower format, or one
    ulp of `src` beside it."""
    targets = _TIE_TARGETS.get(src.name)
    if not targets:
        return rng.normal(size=n)
    return np.array([tie(rng, src, targets[rng.integers(len(targets))]) for _ in range(n)])


def tie(rng: np.random.Generator, src: DType, target: str) -> float:
    """A value of float dtype `src` at a rounding midpoint of the narrower
    format `target`, or one ulp of `src` beside it."""
    if target == "float32":
        x = np.float32(rng.normal() * 10.0 ** rng.integers(-3, 4))
        lo, hi = float(x), float(np.nextafter(x, np.float32(np.inf)))
    elif target == "tfloat32":
        bits = np.array([rng.normal() * 100], np.float32).view(np.uint32)[0] & 0xFFFFE000
        lo = float(np.array([bits], np.uint32).view(np.float32)[0])
        hi = float(np.array([bits + 0x2000], np.uint32).view(np.float32)[0])
    else:
        grid = _grid_values(target)
        i = int(rng.integers(len(grid) - 1))
        lo, hi = grid[i], grid[i + 1]
    mid = np.array([(lo + hi) / 2]).astype(src.numpy_dtype if src.numpy_dtype.kind == "f"
                                             else np.float32)
    step = int(rng.integers(-1, 2))
    if step:
        mid = np.nextafter(mid, np.inf * step)
    return float(mid[0])


def _float_values(rng: np.random.Generator, dtype: DType, n: int, special: float) -> np.ndarray:
    scale = float(rng.choice([1.0, 8.0, 1000.0, 1e-3]))
    kind = rng.random(n)
    x = rng.normal(size=n) * scale
    small = rng.integers(-8, 9, n).astype(np.float64)
    halves = rng.integers(-16, 17, n) / 4.0
    x = np.where(kind < 0.3, small, np.where(kind < 0.4, halves, x))
    pick = rng.random(n)
    specials = _float_specials(dtype)
    x = np.where(pick < special, specials[rng.integers(len(specials), size=n)], x)
    ties = (pick >= special) & (pick < special + (0.1 if special else 0.0))
    if ties.any():
        x[ties] = _ties(rng, dtype, int(ties.sum()))
    with np.errstate(all="ignore"):
        return x.astype(dtype.numpy_dtype)


def _int_values(rng: np.random.Generator, dtype: DType, n: int, special: float) -> np.ndarray:
    lo, hi = dtype.min, dtype.max
    kind = rng.random(n)
    small = rng.integers(max(lo, -8), min(hi, 16) + 1, n)
    full = rng.integers(lo, hi, n, dtype=np.int64 if dtype.signed or hi < 2**63 else np.uint64,
                        endpoint=True)
    out = np.where(kind < 0.55, small.astype(np.float64), 0.0).astype(object)
    out[kind >= 0.55] = full[kind >= 0.55].astype(object)
    specials = [lo, hi, lo + 1, hi - 1, 0, 1] + ([-1] if dtype.signed else [])
    bits = dtype.bits - (1 if dtype.signed else 0)
    for k in np.flatnonzero(rng.random(n) < special):
        r = rng.random()
        if r < 0.4:
            v = specials[rng.integers(len(specials))]
        elif r < 0.7:
            v = (1 << int(rng.integers(0, bits))) - int(rng.integers(0, 2))
        else:  # an integer at or beside a float rounding midpoint
            p = int(rng.choice(_INT_TIE_BITS))
            top = int(rng.integers(p + 2, bits)) if bits > p + 2 else bits - 1
            v = (1 << top) + (1 << max(top - p - 1, 0)) + int(rng.integers(-1, 2))
        if dtype.signed and rng.random() < 0.5:
            v = -v
        out[k] = min(max(v, lo), hi)
    return np.array([int(v) for v in out], dtype=object).astype(dtype.numpy_dtype)


def values(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...],
           special: float) -> np.ndarray:
    """A C-contiguous array of `shape`; `special` is the fraction of special values."""
    n = int(np.prod(shape))
    if dtype.is_bool:
        out = rng.random(n) < 0.5
    elif dtype.is_integer:
        out = _int_values(rng, dtype, n, special)
    elif dtype.arithmetic:
        out = _float_values(rng, dtype, n, special)
    elif dtype is D.float4_e2m1fn:
        out = rng.integers(0, 16, n, dtype=np.uint8).view(dtype.numpy_dtype)
    else:
        out = rng.integers(0, 256, n, dtype=np.uint8).view(dtype.numpy_dtype)
    return np.ascontiguousarray(out.reshape(shape))


def layout(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[tuple[int, ...],
                                                                       tuple | None, bool]:
    """(base shape, view slices, transpose) giving an array of `shape`: mostly
    contiguous; otherwise offset by one element (unaligned), strided along the
    last axis, or a transposed view (non-unit last stride)."""
    r = rng.random()
    if r < 0.65 or not shape:
        return shape, None, False
    if r < 0.77:
        base = (shape[0] + 1,) + shape[1:]
        return base, (slice(1, None),) + (slice(None),) * (len(shape) - 1), False
    if r < 0.89 or len(shape) < 2:
        base = shape[:-1] + (2 * shape[-1] + 1,)
        return base, (slice(None),) * (len(shape) - 1) + (slice(1, None, 2),), False
    return tuple(reversed(shape)), None, True


def scalar(rng: np.random.Generator, dtype: DType, special: float):
    """A NumPy scalar of `dtype` drawn like array elements."""
    return values(rng, dtype, (1,), special)[0]
