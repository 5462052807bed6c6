"""Division by a constant power of two is emitted as a multiplication by its
reciprocal (bit-identical: both round the same real number); any other
divisor keeps IEEE division. Checked on the generated source, in the
interpreter, and bitwise on the GPU."""
import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def divide(x, y, C: ct.Constant[float]):
    ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(64,)) / C)


def _inputs(dtype):
    rng = np.random.default_rng(7)
    info = np.finfo(dtype)
    x = (rng.standard_normal(64) * rng.choice([1e-30, 1.0, 1e30], 64)).astype(dtype)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, info.smallest_subnormal, info.max]
    return x


@pytest.mark.parametrize("c,fast", [(4.0, True), (0.5, True), (-1024.0, True), (2.0 ** 127, True),
                                    (3.0, False), (0.1, False), (2.0 ** -149, False)])
def test_source_uses_the_reciprocal_only_when_exact(c, fast):
    x = np.zeros(64, np.float32)
    src = ct.compile(divide, (x, x.copy(), c), arch="sm_90").source
    assert ("op_mul" in src) is fast
    assert ("tc::DivBy" in src) is not fast  # IEEE division by one value (test_divide_by_scalar)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [4.0, 2.0 ** -20, -2.0 ** 100, 3.0])
def test_interpreter_matches_ieee_division(dtype, c):
    x = _inputs(dtype)
    y = np.empty_like(x)
    ct.launch(None, (1,), divide, (x, y, c))
    with np.errstate(over="ignore"):
        want = x / dtype(c)
    _assert_same_bits(y, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [4.0, 2.0 ** -20, -2.0 ** 100, 2.0 ** 127, 3.0])
def test_gpu_is_bitwise_ieee_division(dtype, c):
    cp = pytest.importorskip("cupy")
    x = _inputs(dtype)
    dx, dy = cp.asarray(x), cp.empty(64, dtype)
    ct.launch(None, (1,), divide, (dx, dy, c))
    with np.errstate(over="ignore"):
        want = x / dtype(c)
    _assert_same_bits(cp.asnumpy(dy), want)


def _assert_same_bits(got, want):
    """Bitwise equal, except that a NaN may have any payload (the GPU gives its canonical NaN)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    u = f"u{want.itemsize}"
    np.testing.assert_array_equal(got[ok].view(u), want[ok].view(u))
