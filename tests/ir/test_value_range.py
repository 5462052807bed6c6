"""Compile-time bounds of integer tiles (ir/value_range.py): each kernel stores
the tile whose interval is checked, runs against NumPy, and the stored values
must lie in the interval, which must also be the tight one stated."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.ir.value_range import value_ranges

RNG = np.random.default_rng(3)


def _range_of_stored(kernel, args) -> tuple[int, int]:
    """Launch `kernel` (interpreter) and return the interval of the tile its last
    store writes."""
    ct.launch(None, (1,), kernel, args)
    fn = list(kernel._ir.values())[-1]   # this launch's specialization
    store = [op for op in fn.walk() if op.name == "store"][-1]
    return value_ranges(fn)[store.operands[1].id]


@ct.kernel
def bounded(x, y, WHICH: ct.Constant[int]):
    t = ct.load(x, (0,), (64,)).astype(ct.int32)          # uint8 -> [0, 255]
    s = ct.load(y, (0,), (64,))                            # int32: unbounded
    if WHICH == 0:
        r = t
    elif WHICH == 1:
        r = s & 1023
    elif WHICH == 2:
        r = s % 100
    elif WHICH == 3:
        r = t >> 4
    elif WHICH == 4:
        r = ct.where(t > 3, t + 10, ct.arange(64, dtype=ct.int32))
    elif WHICH == 5:
        r = ct.minimum(ct.maximum(s, -5), 70)
    elif WHICH == 6:
        r = t * 3 - 7
    else:
        r = s + 1                                          # may wrap: int32's range
    ct.store(y, (0,), r)


@pytest.mark.parametrize("which,expect", [
    (0, (0, 255)), (1, (0, 1023)), (2, (0, 99)), (3, (0, 15)), (4, (0, 265)),
    (5, (-5, 70)), (6, (-7, 758)), (7, (-2**31, 2**31 - 1))])
def test_intervals_hold_and_are_tight(which, expect):
    x = RNG.integers(0, 256, 64).astype(np.uint8)
    x[:2] = (0, 255)
    y = RNG.integers(-2**31, 2**31, 64).astype(np.int32)
    lo, hi = _range_of_stored(bounded, (x, y, which))
    assert (lo, hi) == expect
    assert lo <= y.min() and y.max() <= hi


@ct.kernel
def wraps(x, y):
    ct.store(y, (0,), ct.load(x, (0,), (8,)).astype(ct.int8) + 100)   # int8 + 100 wraps


def test_a_result_that_may_wrap_gets_the_whole_dtype():
    x, y = np.array([0, 27, 28, 100, 127, 128, 200, 255], np.uint8), np.zeros(8, np.int8)
    assert _range_of_stored(wraps, (x, y)) == (-128, 127)
    np.testing.assert_array_equal(y, (x.astype(np.int8).astype(np.int32) + 100).astype(np.int8))
