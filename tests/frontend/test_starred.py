"""`*` in tile code (issue 13): a starred assignment target is a
TileSyntaxError saying so (it used to report a tuple-size mismatch); `*t` of a
tuple in a call or a tuple display unpacks it, as in Python."""
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import expect_error, run

STARRED = ("'*' in an assignment target: starred assignment is not supported in tile code "
           "(unpack into one name per item, or index the tuple)")


@ct.kernel
def starred_target(out, WHICH: ct.Constant[int]):
    t = (1, 2, 3)
    if WHICH == 0:
        x, *rest = t  # S0
    elif WHICH == 1:
        *first, x = t  # S1
    elif WHICH == 2:
        [x, *rest] = t  # S2
    else:
        (x, (y, *rest)) = (1, t)  # S3
    ct.store(out, (0,), ct.full((1,), x, ct.int32))


@pytest.mark.parametrize("which", range(4))
def test_starred_assignment_is_not_supported(which):
    expect_error(starred_target, [np.zeros(1, np.int32), which], ct.TileSyntaxError, STARRED,
                 f"S{which}")


def add3(a, b, c):
    return a + b + c


@ct.kernel
def unpack_tuples(x, out):
    t = ct.load(x, (0, 0), (2, 4))
    col = ct.reshape(ct.sum(t, axis=1), (*t.shape[:1], 1))   # (2, 1)
    args = (t, col, 1.0)
    ct.store(out, (0, 0), add3(*args) + ct.full((*t.shape,), 0.5, ct.float32))


def test_star_unpacks_tuples_in_calls_and_displays():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = run(unpack_tuples, [x, np.zeros((2, 4), np.float32)])[1]
    np.testing.assert_array_equal(out, x + x.sum(axis=1, keepdims=True) + 1.5)


@ct.kernel
def unpack_a_tile(x, out):
    t = ct.load(x, (0,), (4,))
    ct.store(out, (0,), add3(*t))  # TILE


def test_star_of_a_tile_is_an_error():
    expect_error(unpack_a_tile, [np.zeros(4, np.float32), np.zeros(4, np.float32)],
                 ct.TileTypeError, "Cannot unpack a tile of float32 with shape (4,) with *",
                 "TILE")
