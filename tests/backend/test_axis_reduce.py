"""Reductions that keep some axes (sum, max, min, prod, argmax, argmin along
axes of 2-D and 3-D tiles), whose CUDA form folds each output element by a
group of lanes when the block has threads to spare (rules_reduce.py). Each runs
in the interpreter against NumPy; the suite compiles it for sm_80 and sm_90
and, on a GPU, compares the GPU's result with the interpreter's."""
import numpy as np
import pytest

import tilecore as ct

RNG = np.random.default_rng(21)


@ct.kernel
def reduce_axes(x, y, FN: ct.Constant[str], AXIS: ct.Constant[int], SHAPE: ct.Constant):
    t = ct.load(x, (0,) * len(SHAPE), SHAPE)
    if FN == "sum":
        r = ct.sum(t, axis=AXIS, keepdims=True)
    elif FN == "max":
        r = ct.max(t, axis=AXIS, keepdims=True)
    elif FN == "min":
        r = ct.min(t, axis=AXIS, keepdims=True)
    elif FN == "prod":
        r = ct.prod(t, axis=AXIS, keepdims=True)
    elif FN == "argmax":
        r = ct.argmax(t, axis=AXIS, keepdims=True)
    else:
        r = ct.argmin(t, axis=AXIS, keepdims=True)
    ct.store(y, (0,) * len(SHAPE), r)


SHAPES = [((16, 128), 1), ((128, 16), 0), ((128, 16), 1), ((4, 8, 32), 2), ((4, 8, 32), 1),
          ((2, 64), 1), ((64, 2), 0), ((32, 32), 0), ((8, 2), 1)]
_NP = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "argmax": np.argmax,
       "argmin": np.argmin}


@pytest.mark.parametrize("shape,axis", SHAPES, ids=str)
@pytest.mark.parametrize("fn", list(_NP))
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_against_numpy(shape, axis, fn, dtype):
    if dtype == np.int32:
        x = RNG.integers(-3, 4, shape).astype(dtype)   # ties for argmax/argmin; prod fits
    else:
        x = (RNG.standard_normal(shape) if fn != "prod" else RNG.uniform(0.9, 1.1, shape)
             ).astype(dtype)
    out_shape = tuple(1 if i == axis else s for i, s in enumerate(shape))
    y = np.zeros(out_shape, np.int32 if fn.startswith("arg") else dtype)
    ct.launch(None, (1,), reduce_axes, (x, y, fn, axis, shape))
    want = _NP[fn](x.astype(np.float64) if dtype == np.float32 else x, axis=axis, keepdims=True)
    if dtype == np.float32 and not fn.startswith("arg"):
        np.testing.assert_allclose(y, want, rtol=2e-6 * shape[axis], atol=1e-6 * shape[axis])
    else:
        np.testing.assert_array_equal(y, want)


def test_nan_and_ties_pick_the_first_index():
    x = np.zeros((16, 128), np.float32)
    x[3, 70] = x[3, 5] = 1.0
    x[9, 100] = x[9, 33] = np.nan
    y = np.zeros((16, 1), np.int32)
    ct.launch(None, (1,), reduce_axes, (x, y, "argmax", 1, (16, 128)))
    assert y[3, 0] == 5 and y[9, 0] == 33 and y[0, 0] == 0


def test_lane_groups_in_the_source():
    x, y = np.zeros((16, 128), np.float32), np.zeros((16, 1), np.float32)
    kernel = ct.compile(reduce_axes, (x, y, "sum", 1, (16, 128)), arch="sm_90")
    group = min(32, kernel.block_threads // 16)   # lanes per row: 16 rows
    assert f"r += {group})" in kernel.source and "tc::shfl_xor(acc, m)" in kernel.source
