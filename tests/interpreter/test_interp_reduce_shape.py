"""reduce / argreduce and the shape ops (iota, broadcast, reshape, permute)."""
import ml_dtypes
import numpy as np
import pytest

from tilecore.language import dtypes as dt

from interp_builder import eval_op, tile


def reduce(fn, x, dtype, axes, keepdims=False):
    shape = tuple(1 if (k in axes) else s for k, s in enumerate(x.shape) if keepdims
                  or k not in axes)
    return eval_op("reduce", [(x, dtype)], tile(dtype, *shape), fn=fn, axes=axes,
                   keepdims=keepdims)


def argreduce(fn, x, dtype, axis, keepdims=False):
    if axis is None:
        shape = (1,) * x.ndim if keepdims else ()
    else:
        shape = tuple(1 if k == axis else s for k, s in enumerate(x.shape)
                      if keepdims or k != axis)
    return eval_op("argreduce", [(x, dtype)], tile(dt.int32, *shape), fn=fn, axis=axis,
                   keepdims=keepdims)


@pytest.mark.parametrize("fn, ref", [("sum", np.sum), ("prod", np.prod), ("max", np.max),
                                     ("min", np.min)])
@pytest.mark.parametrize("axes, keepdims", [((0,), False), ((1,), True), ((0, 2), False),
                                            ((0, 1, 2), True)])
def test_float_reduce_matches_float64(fn, ref, axes, keepdims):
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 1.5, (4, 8, 2)).astype(np.float32)
    got = reduce(fn, x, dt.float32, axes, keepdims)
    expected = ref(x.astype(np.float64), axis=axes, keepdims=keepdims)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=2e-6)


def test_reduce_max_min_propagate_nan():
    x = np.array([[1.0, np.nan, 3.0, 2.0], [1.0, 5.0, -3.0, 2.0]], np.float32)
    mx = reduce("max", x, dt.float32, (1,))
    mn = reduce("min", x, dt.float32, (1,))
    assert np.isnan(mx[0]) and mx[1] == 5.0
    assert np.isnan(mn[0]) and mn[1] == -3.0
    assert np.isnan(reduce("sum", x, dt.float32, (0, 1)))


def test_integer_sum_and_prod_wrap():
    x = np.array([100, 100, 100, 0], np.int8)
    assert reduce("sum", x, dt.int8, (0,)) == 44
    assert reduce("prod", np.array([256, 256, 256, 256], np.int32), dt.int32, (0,)) == 0
    assert reduce("sum", np.array([2**32 - 1, 2], np.uint32), dt.uint32, (0,)) == 1
    single = reduce("max", np.array([-5], np.int64), dt.int64, (0,), keepdims=True)
    assert single.shape == (1,) and single.tolist() == [-5]


def test_bfloat16_sum_accumulates_in_float32():
    # 256 + 255 * 1: a bfloat16 accumulator sticks at 256 (257 ties back to 256);
    # float32 accumulation gives 511, which rounds once to 512.
    x = np.ones(256, ml_dtypes.bfloat16)
    x[0] = 256
    got = reduce("sum", x, dt.bfloat16, (0,))
    assert got.dtype == ml_dtypes.bfloat16 and float(got) == 512.0


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argreduce_ties_pick_first(fn):
    x = np.array([[1, 3, 3, 2], [0, 0, -1, -1]], np.int16)
    got = argreduce(fn, x, dt.int16, 1)
    assert got.dtype == np.int32
    assert got.tolist() == ([1, 0] if fn == "argmax" else [0, 2])


def test_argreduce_nan_wins_first():
    x = np.array([1.0, np.nan, 5.0, np.nan, -7.0, 0, 0, 0], np.float32)
    assert argreduce("argmax", x, dt.float32, 0) == 1
    assert argreduce("argmin", x, dt.float32, 0) == 1
    bf = x.astype(ml_dtypes.bfloat16)
    assert argreduce("argmax", bf, dt.bfloat16, 0) == 1


def test_argreduce_flattened_and_keepdims():
    x = np.array([[0, 1, 9, 3], [9, 2, 0, 0]], np.float64)
    flat = argreduce("argmax", x, dt.float64, None)
    assert flat.shape == () and flat == 2
    kept = argreduce("argmin", x, dt.float64, None, keepdims=True)
    assert kept.shape == (1, 1) and kept.tolist() == [[0]]
    col = argreduce("argmax", x, dt.float64, 0, keepdims=True)
    assert col.shape == (1, 4) and col.tolist() == [[1, 1, 0, 0]]


def test_iota_broadcast_reshape_permute():
    io = eval_op("iota", [], tile(dt.int64, 8), shape=(8,), dtype=dt.int64)
    assert io.dtype == np.int64 and io.tolist() == list(range(8))
    r = eval_op("reshape", [(io, dt.int64)], tile(dt.int64, 2, 4), shape=(2, 4))
    assert r.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    p = eval_op("permute", [(r, dt.int64)], tile(dt.int64, 4, 2), axes=(1, 0))
    assert p.tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    col = np.array([[1.0], [2.0]], np.float32)
    bc = eval_op("broadcast", [(col, dt.float32)], tile(dt.float32, 4, 2, 4), shape=(4, 2, 4))
    np.testing.assert_array_equal(bc, np.broadcast_to(col, (4, 2, 4)))
    s = eval_op("broadcast", [(np.array(3, np.int8), dt.int8)], tile(dt.int8, 1), shape=(1,))
    assert s.tolist() == [3]
    p3 = eval_op("permute", [(bc, dt.float32)], tile(dt.float32, 2, 4, 4), axes=(1, 2, 0))
    np.testing.assert_array_equal(p3, np.transpose(bc, (1, 2, 0)))
