"""abs of the minimum signed integer is itself, as in NumPy, also where a
comparison uses it (the fuzzer's seed 9811: on the H100, `0 >= abs(x)` of an
int16 -32768 compiled as false). The conftest reruns these launches on the GPU."""
import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def abs_and_compare(a, out_abs, out_ge):
    t = ct.abs(ct.load(a, index=(0,), shape=(8,)))
    ct.store(out_abs, index=(0,), tile=t)
    ct.store(out_ge, index=(0,), tile=ct.zeros((8,), a.dtype) >= t)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_abs_of_the_minimum(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min + 1, -1, 0, 1, info.max, -7, 7], dtype)
    out_abs, out_ge = np.zeros(8, dtype), np.zeros(8, np.bool_)
    ct.launch(None, (1,), abs_and_compare, (a, out_abs, out_ge))
    with np.errstate(over="ignore"):
        want = np.abs(a)
    np.testing.assert_array_equal(out_abs, want)
    np.testing.assert_array_equal(out_ge, np.zeros(8, dtype) >= want)
    assert out_ge[0] and out_abs[0] == info.min


@ct.kernel
def abs_as_index(a, b, out_neg, out_gathered):
    t = ct.abs(ct.load(a, index=(0,), shape=(8,)))
    ct.store(out_neg, index=(0,), tile=t < 0)
    ct.store(out_gathered, index=(0,), tile=ct.gather(b, t, padding_value=-1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_abs_of_the_minimum_as_a_gather_index(dtype):
    """abs(minimum) is negative, so a gather at it pads (the fuzzer's seed 3900037: on
    the H200 the gather's `>= 0` test was dropped and the read went 2^31 elements
    before the array). The conftest reruns the launch on the GPU."""
    info = np.iinfo(dtype)
    a = np.array([info.min, -3, 0, 5, info.min + 1, 2, -7, 1], dtype)
    b = np.arange(10, dtype=np.float32)
    out_neg, out_gathered = np.zeros(8, np.bool_), np.zeros(8, np.float32)
    ct.launch(None, (1,), abs_as_index, (a, b, out_neg, out_gathered))
    with np.errstate(over="ignore"):
        t = np.abs(a)
    np.testing.assert_array_equal(out_neg, t < 0)
    want = np.where((t >= 0) & (t < b.size), b[np.clip(t, 0, b.size - 1)], -1)
    np.testing.assert_array_equal(out_gathered, want)
    assert out_neg[0] and out_gathered[0] == -1
