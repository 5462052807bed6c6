"""truediv's rounding_mode and flush_to_zero, exp's rounding_mode: exact
directed roundings against exact rational references, the approximate modes
within their error bounds, and the errors for other dtypes."""
from fractions import Fraction

import numpy as np
import pytest

import tilecore as ct

RM = ct.RoundingMode


@ct.kernel
def divide(a, b, out, MODE: ct.Constant, FTZ: ct.Constant[bool], N: ct.Constant[int]):
    x = ct.load(a, index=(0,), shape=(N,))
    y = ct.load(b, index=(0,), shape=(N,))
    ct.store(out, index=(0,), tile=ct.truediv(x, y, rounding_mode=MODE, flush_to_zero=FTZ))


def _exact(a, b, mode):
    """a / b rounded to float32 in `mode`, from the exact rational quotient."""
    out = np.empty_like(a)
    for i, (x, y) in enumerate(zip(a, b)):
        q = Fraction(float(x)) / Fraction(float(y))
        r = np.float32(float(q))                      # nearest double, then nearest float32
        lo, hi = (r, np.nextafter(r, np.float32(np.inf))) if Fraction(float(r)) <= q \
            else (np.nextafter(r, np.float32(-np.inf)), r)
        if Fraction(float(lo)) == q:
            out[i] = lo
        elif mode is RM.RZ:
            out[i] = lo if q > 0 else hi
        elif mode is RM.RM:
            out[i] = lo
        else:
            out[i] = hi
    return out


@pytest.mark.parametrize("mode", [RM.RZ, RM.RM, RM.RP])
def test_directed_division_is_exact(mode):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(64) * 10).astype(np.float32)
    b = (rng.standard_normal(64) * 3).astype(np.float32)
    a[:4] = [1, -1, 3, 0]
    b[:4] = [3, 3, 3, 5]          # 1/3 and -1/3 round differently per mode; 3/3 and 0/5 exact
    out = np.zeros(64, np.float32)
    ct.launch(None, (1,), divide, (a, b, out, mode, False, 64))
    np.testing.assert_array_equal(out, _exact(a, b, mode))
    third = Fraction(1, 3)
    assert (Fraction(float(out[0])) < third) == (mode in (RM.RZ, RM.RM))
    assert (Fraction(float(out[1])) < -third) == (mode is RM.RM)


@pytest.mark.parametrize("mode", [RM.RN, RM.FULL, RM.APPROX])
def test_fast_and_nearest_division(mode):
    rng = np.random.default_rng(8)
    a = rng.uniform(-100, 100, 64).astype(np.float32)
    b = rng.uniform(0.5, 50, 64).astype(np.float32)
    out = np.zeros(64, np.float32)
    ct.launch(None, (1,), divide, (a, b, out, mode, False, 64))
    want = a.astype(np.float64) / b
    if mode is RM.RN:
        np.testing.assert_array_equal(out, want.astype(np.float32))
    else:
        np.testing.assert_allclose(out, want, rtol=4e-7)


def test_flush_to_zero_flushes_subnormal_quotients():
    a = np.array([1e-30, -1e-30, 1.0, 6.0], np.float32)
    b = np.array([1e10, 1e10, 4.0, 3.0], np.float32)   # 1e-40 is subnormal in float32
    out = np.full(4, np.nan, np.float32)
    ct.launch(None, (1,), divide, (a, b, out, RM.RN, True, 4))
    np.testing.assert_array_equal(out, [0.0, -0.0, 0.25, 2.0])
    assert np.signbit(out[1]) and not np.signbit(out[0])
    ct.launch(None, (1,), divide, (a, b, out, RM.RN, False, 4))
    assert out[0] != 0 and abs(out[0] - 1e-40) < 1e-44


@ct.kernel
def fast_exp(x, out, N: ct.Constant[int]):
    ct.store(out, index=(0,), tile=ct.exp(ct.load(x, index=(0,), shape=(N,)),
                                          rounding_mode=ct.RoundingMode.APPROX))


def test_approximate_exp():
    x = np.linspace(-20, 20, 128).astype(np.float32)
    out = np.zeros_like(x)
    ct.launch(None, (1,), fast_exp, (x, out, 128))
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)), rtol=2e-6)


@ct.kernel
def half_divide(a, out):
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.truediv(t, t, rounding_mode=ct.RoundingMode.RZ))


@ct.kernel
def bad_mode(a, out):
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.exp(t, rounding_mode=ct.RoundingMode.RZ))


def test_rounding_mode_errors():
    h = np.ones(4, np.float16)
    with pytest.raises(ct.TileTypeError, match="truediv\\(\\) with a rounding_mode other than "
                                               "the default or with flush_to_zero needs float32 "
                                               "operands, got float16"):
        ct.launch(None, (1,), half_divide, (h, h.copy()))
    f = np.ones(4, np.float32)
    with pytest.raises(ct.TileValueError, match='Invalid argument "rounding_mode" of exp\\(\\): '
                                                'expected one of RoundingMode.FULL, '
                                                'RoundingMode.APPROX, got'):
        ct.launch(None, (1,), bad_mode, (f, f.copy()))
