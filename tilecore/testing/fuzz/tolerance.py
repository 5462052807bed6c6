"""The oracle: how far the GPU's result may be from the interpreter's, per op
class, with the reason for each rule. The generator asks these functions for
the tolerance of every value it creates; `compare` applies them to outputs.

Exact (bit for bit; any NaN equals any NaN, since NaN payloads are not part of
the semantics):
  integer and bool arithmetic (it wraps on both sides), comparisons, bitwise
  ops, shifts, conversions (`astype`: both sides round once to nearest even;
  float->int only after the generator clamps the value into range, since
  NaN/inf/out-of-range conversions are unspecified), add/sub/mul/truediv
  (RN, RZ, RM, RP)/floordiv/mod/sqrt/floor/ceil/abs/neg in every float dtype
  (IEEE single operations; 16-bit floats compute in float32 and round once on
  both sides), loads, stores, gathers, scatters, shape ops, `where`, argmax/argmin,
  and integer reductions (wrapping sums are independent of order).
Exact up to the sign of zero ("zsign"): float minimum/maximum and max/min
  reductions. IEEE leaves min(+0, -0) open, NumPy's answer depends on the
  operand order (and on its SIMD path), and a reduction's order differs.
  Such values may still feed comparisons, add/sub/mul and conversions (the
  difference stays a zero sign) but never a divisor, pow, atan2 or rsqrt.
Within ulps ("ulp"): the CUDA math library against NumPy's (glibc/SIMD)
  implementations. The bound is CUDA's documented maximum error (CUDA C++
  Programming Guide, "Mathematical Functions") plus NumPy's (4 ulp in float32
  for its SIMD kernels, 2 in float64), counted in the op's dtype. 16-bit floats
  compute in float32 and round once, so the two sides differ by at most one
  ulp of the 16-bit type. exp(rounding_mode=APPROX) is __expf: 2 + 1.173 |x|
  ulp (the generator clamps |x| <= 8). truediv FULL/APPROX: 2 ulp for divisors
  in [2^-126, 2^126] (the generator keeps divisors inside). Such values are
  only carried on (shape ops, neg/abs, conversion to a float, store): one more
  arithmetic op could cancel and make any relative bound meaningless.
Within a bound from the data ("sum", "prod"): float sum and prod reductions add
  in another order on the GPU (per-thread folds, a butterfly, shared memory).
  Any order's sum of n terms is within (n-1) u sum|x| of the exact sum (u the
  unit roundoff of the accumulation dtype, float32 for 16-bit floats), so the
  two results differ by at most 2 n u sum|x|, plus one rounding of the result
  dtype; the kernel itself computes sum|x| in float64 as a "shadow" value
  stored next to the result. A product has relative error n u as long as no
  partial product overflows or underflows, which the shadow max(|x|, 1/|x|)
  guarantees when n log2(shadow) stays inside the exponent range; otherwise
  the element is not checked. A sum whose sum|x| may overflow is not checked.
  Scans and custom folds (cumsum, cumprod, scan/reduce with `a + b`) take the
  same bounds, but accumulate in their own dtype: their combining function
  rounds every step to it, 16-bit floats too (`scan_tol`).
FMA contraction: NVRTC fuses a float32/float64 multiply (or a division by a
  constant, compiled as a multiplication) followed by an add or sub into one
  FMA, which rounds once instead of twice. The generator never feeds such a
  product to an add or sub (README "Floating point"), so every remaining
  single op is compared exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType

__all__ = ["Tol", "EXACT", "ZSIGN", "math_tol", "narrowed", "join", "reduce_tol", "scan_tol",
           "APPROX_EXP_LIMIT", "DIV_APPROX_TOL", "compare", "CARRIER_ONLY"]


@dataclass(frozen=True)
class Tol:
    """A tolerance class. kind: exact, zsign, ulp, sum, prod.
    ulp: `ulps` counted in dtype `measure`; values with magnitude <= `floor`
    count as zero (flush-to-zero ops). sum/prod: `terms` reduced, accumulating
    in dtype `acc`."""

    kind: str
    ulps: int = 0
    measure: str = ""
    floor: float = 0.0
    terms: int = 0
    acc: str = ""


EXACT = Tol("exact")
ZSIGN = Tol("zsign")
CARRIER_ONLY = ("ulp", "sum", "prod")  # values that may only be carried to a store

# CUDA's documented maximum ulp error per function (float32, float64).
_CUDA_ULPS = {
    "exp": (2, 1), "exp2": (2, 1), "log": (1, 1), "log2": (1, 1), "sin": (2, 2),
    "cos": (2, 2), "tan": (4, 2), "sinh": (3, 2), "cosh": (2, 1), "tanh": (2, 1),
    "rsqrt": (2, 1), "pow": (4, 2), "atan2": (3, 2),
}
_NUMPY_ULPS = (4, 2)  # NumPy's SIMD float32 kernels, glibc float64
APPROX_EXP_LIMIT = 8.0  # |x| bound the generator gives exp(APPROX)
DIV_APPROX_TOL = Tol("ulp", 2 + _NUMPY_ULPS[0], "float32", 2.0 ** -125)


def _wide(dtype: DType) -> int:
    """0 for dtypes computed in float32, 1 for float64."""
    return 1 if dtype is D.float64 else 0


def math_tol(fn: str, dtype: DType, approx: bool = False) -> Tol:
    """Tolerance of a unary or binary math function computed in `dtype`; EXACT
    for the functions IEEE defines exactly (not listed in _CUDA_ULPS)."""
    if fn not in _CUDA_ULPS:
        return EXACT
    if dtype not in (D.float32, D.float64):
        return Tol("ulp", 1, dtype.name)
    w = _wide(dtype)
    ulps = _CUDA_ULPS[fn][w] + _NUMPY_ULPS[w]
    if approx:
        ulps = 2 + math.floor(1.173 * APPROX_EXP_LIMIT) + _NUMPY_ULPS[0]
        return Tol("ulp", ulps, dtype.name, 2.0 ** -125)
    return Tol("ulp", ulps, dtype.name)


def _mantissa_bits(dtype: DType) -> int:
    if dtype is D.tfloat32:
        return 10
    return int(ml_dtypes.finfo(dtype.numpy_dtype).nmant)


def narrowed(tol: Tol, src: DType, dst: DType) -> Optional[Tol]:
    """The tolerance after astype(src -> dst) of a value with `tol`; None when
    the conversion would make the difference unbounded (to an integer or bool:
    a one-ulp difference can cross an integer or zero)."""
    if tol.kind in ("exact", "zsign"):
        if not dst.is_float:
            return EXACT
        if dst is D.float4_e2m1fn and src.is_float:
            return ZSIGN    # no NaN there: a NaN's sign (unspecified) becomes a zero's
        return tol
    if not dst.is_float:
        return None
    if tol.kind != "ulp":
        return tol  # sum/prod bounds are absolute; compare() adds the result's rounding
    measure = D.lookup(tol.measure)
    if _mantissa_bits(dst) < _mantissa_bits(measure):
        # Two values k ulps apart (k ulps of `measure` << one ulp of dst) round
        # to the same or adjacent dst values.
        return Tol("ulp", 1, dst.name, tol.floor)
    return tol


def join(a: Tol, b: Tol) -> Optional[Tol]:
    """Tolerance of a value that is one of two (where, if-branches); None if
    the two cannot be combined (carrier-only values)."""
    if a.kind in CARRIER_ONLY or b.kind in CARRIER_ONLY:
        return None
    return ZSIGN if ZSIGN in (a, b) else EXACT


def reduce_tol(fn: str, dtype: DType, terms: int) -> Tol:
    """Tolerance of a reduce op over `terms` elements of `dtype` (after the
    front end's bool -> int32 cast)."""
    if not dtype.is_float:
        return EXACT
    if fn in ("max", "min"):
        return ZSIGN
    acc = "float64" if dtype is D.float64 else "float32"
    return Tol(fn, terms=terms, acc=acc)


def scan_tol(fn: str, dtype: DType, terms: int) -> Tol:
    """Tolerance of a float scan or fold ('sum' or 'prod') along `terms`
    elements, in any association: each step rounds to `dtype` itself. In a
    16-bit float (n - 1) u is not small, so the first-order bound 2 n u is
    kept above the exact one, 2 gamma(n - 1) = 2 (n-1) u / (1 - (n-1) u), by
    counting n / (1 - (n-1) u) terms; past (n - 1) u = 1/2 so many that
    nothing is checked (compare's overflow guard)."""
    u = float(ml_dtypes.finfo(dtype.numpy_dtype).eps) / 2
    ku = (terms - 1) * u
    return Tol(fn, terms=math.ceil(terms / (1 - ku)) if ku < 0.5 else 2 ** 60,
               acc=dtype.name)


# --- comparison ---------------------------------------------------------------------------------
def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype.kind == "V" or a.dtype in _NARROW


_NARROW = {np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                 ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu,
                                 ml_dtypes.float4_e2m1fn)}


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _ordered(a: np.ndarray) -> np.ndarray:
    """Integers whose differences count ulps between finite values and
    infinities of a's float dtype (+0 and -0 map to the same integer)."""
    dt = np.dtype(a.dtype)
    if dt.itemsize <= 2:
        table = _RANKS.get(dt)
        if table is None:
            codes = np.arange(2 ** (8 * dt.itemsize), dtype=np.uint8 if dt.itemsize == 1
                              else np.uint16).view(dt).astype(np.float64)
            table = np.unique(codes[~np.isnan(codes)])
            _RANKS[dt] = table
        return np.searchsorted(table, _f64(a)).astype(np.int64)
    ui = np.uint32 if dt.itemsize == 4 else np.uint64
    bits = np.asarray(a).view(ui).astype(np.uint64)
    sign = np.uint64(1) << np.uint64(8 * dt.itemsize - 1)
    mag = (bits & (sign - np.uint64(1))).astype(np.int64)
    return np.where(bits & sign, -mag, mag)


_RANKS: dict = {}


def _ulp(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One ulp of `dtype` at magnitude |v| (float64)."""
    fi = ml_dtypes.finfo(dtype)
    _, e = np.frexp(np.abs(v))
    e = np.maximum(e - 1, int(fi.minexp))
    return np.ldexp(1.0, e - int(fi.nmant))


def _describe(name: str, bad: np.ndarray, got: np.ndarray, want: np.ndarray, why: str) -> str:
    idx = np.flatnonzero(bad)
    pos = [np.unravel_index(i, got.shape) for i in idx[:4]]
    g = got.reshape(-1)[idx[:4]]
    w = want.reshape(-1)[idx[:4]]
    items = ", ".join(f"{tuple(int(c) for c in p)}: gpu {gv!r} interp {wv!r}"
                      for p, gv, wv in zip(pos, g.tolist(), w.tolist()))
    return f"{name}: {idx.size} element(s) differ ({why}); {items}"


def compare(name: str, got: np.ndarray, want: np.ndarray, tol: Tol,
            shadow: Optional[np.ndarray] = None) -> Optional[str]:
    """None if `got` (GPU) agrees with `want` (interpreter) under `tol`, else a
    message naming up to four differing elements. `shadow` is the
    interpreter's shadow array for sum/prod tolerances (same shape)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    if not _is_float(want):
        bad = got != want
        return _describe(name, bad, got, want, "exact") if bad.any() else None
    g, w = _f64(got), _f64(want)
    both_nan = np.isnan(g) & np.isnan(w)
    if tol.kind == "exact":
        ui = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
        bad = (got.view(ui) != want.view(ui)) & ~both_nan
        return _describe(name, bad, got, want, "bit-exact") if bad.any() else None
    same = both_nan | (g == w)
    if tol.kind == "zsign":
        bad = ~same
        return _describe(name, bad, got, want, "exact up to zero sign") if bad.any() else None
    if tol.kind == "ulp":
        mdt = D.lookup(tol.measure).numpy_dtype
        gm, wm = got.astype(mdt), want.astype(mdt)
        dist = np.abs(_ordered(gm) - _ordered(wm))
        tiny = (np.abs(g) <= tol.floor) & (np.abs(w) <= tol.floor)
        nan_mismatch = np.isnan(g) != np.isnan(w)
        bad = ~same & ~tiny & (nan_mismatch | (dist > tol.ulps))
        why = f"more than {tol.ulps} ulp of {tol.measure}"
        return _describe(name, bad, got, want, why) if bad.any() else None
    return _compare_reduction(name, got, want, g, w, same, tol, shadow)


def _compare_reduction(name, got, want, g, w, same, tol: Tol, shadow) -> Optional[str]:
    if shadow is None or shadow.shape != got.shape:
        return f"{name}: no shadow array for a {tol.kind} tolerance"
    s = np.asarray(shadow, dtype=np.float64)
    acc = np.dtype(D.lookup(tol.acc).numpy_dtype)
    u = float(ml_dtypes.finfo(acc).eps) / 2
    big = float(ml_dtypes.finfo(acc).max)
    near = np.abs(_ordered(got) - _ordered(want)) <= 1  # adjacent values of the result dtype
    mag = np.maximum(np.abs(g), np.abs(w))
    with np.errstate(all="ignore"):
        rounding = 2 * _ulp(np.where(np.isfinite(mag), mag, 0.0), got.dtype)
        if tol.kind == "sum":
            checked = np.isfinite(s) & (s * (1 + 2 * tol.terms * u) < big / 2)
            bound = 2 * tol.terms * u * s + rounding
        else:
            exp_range = float(ml_dtypes.finfo(acc).maxexp) - 4
            checked = np.isfinite(s) & (tol.terms * np.log2(np.maximum(s, 1.0)) < exp_range)
            bound = 2 * tol.terms * u * mag + rounding
        within = np.isfinite(g) & np.isfinite(w) & (np.abs(g - w) <= bound)
    bad = checked & ~same & ~near & ~within
    why = f"{tol.kind} of {tol.terms} terms beyond its error bound"
    return _describe(name, bad, got, want, why) if bad.any() else None
