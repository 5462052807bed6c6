"""A float `where` selected by a float comparison returns the operand it names,
signed zeros included. NVVM folds `x > y ? x : y` into max.f32 (and the like
into min.f32), which order -0.0 below +0.0: `where(t > -0.0, t, -0.0)` gave
+0.0 for t = +0.0 on an H200 (the differential fuzzer's seed 3800396), the
interpreter -0.0. Such selects are emitted opaque to it (tc::select_exact). The
conftest's GPU rerun compares floats within rounding, so the GPU test here
compares bits."""
import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def min_max_idioms(x, y, out):
    a = ct.load(x, index=(0,), shape=(16,))
    b = ct.load(y, index=(0,), shape=(16,))
    ct.store(out, index=(0, 0), tile=ct.reshape(ct.where(a > b, a, b), (1, 16)))
    ct.store(out, index=(1, 0), tile=ct.reshape(ct.where(a < b, a, b), (1, 16)))
    ct.store(out, index=(2, 0), tile=ct.reshape(ct.where(a > -0.0, a, -0.0), (1, 16)))
    ct.store(out, index=(3, 0), tile=ct.reshape(ct.where(a < 0.0, a, 0.0), (1, 16)))
    ct.store(out, index=(4, 0), tile=ct.reshape(ct.where(a >= b, b, a), (1, 16)))


def _inputs(dtype):
    x = np.array([0.0, -0.0, 0.0, -0.0, np.nan, 1.0, -1.0, np.inf, -np.inf, 0.5, -0.5, np.nan,
                  2.0, -0.0, 3.0, 0.0], dtype)
    y = np.array([-0.0, 0.0, 0.0, -0.0, 1.0, np.nan, -1.0, 0.0, -0.0, -0.5, 0.5, np.nan,
                  -0.0, 2.0, 3.0, -1.0], dtype)
    return x, y


def _want(x, y):
    return np.stack([np.where(x > y, x, y), np.where(x < y, x, y),
                     np.where(x > -0.0, x, x.dtype.type(-0.0)),
                     np.where(x < 0.0, x, x.dtype.type(0.0)), np.where(x >= y, y, x)])


def _same_bits(got, want):
    kind = np.uint32 if got.dtype == np.float32 else np.uint64
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(kind), want[~nan].view(kind))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpreter_selects_the_named_operand(dtype):
    x, y = _inputs(dtype)
    out = np.full((5, 16), 7, dtype)
    ct.launch(None, (1,), min_max_idioms, (x, y, out))
    _same_bits(out, _want(x, y))


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_float_compare_selects_are_opaque_to_nvvm(arch):
    x, y = _inputs(np.float32)
    src = ct.compile(min_max_idioms, (x, y, np.zeros((5, 16), np.float32)), arch=arch).source
    assert src.count("tc::select_exact(") == 5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_selects_the_named_operand(dtype):
    cp = pytest.importorskip("cupy")
    x, y = _inputs(dtype)
    out = cp.full((5, 16), 7, dtype)
    ct.launch(None, (1,), min_max_idioms, (cp.asarray(x), cp.asarray(y), out))
    _same_bits(out.get(), _want(x, y))
