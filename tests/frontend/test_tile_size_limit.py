"""A tile holds at most 2**18 elements (issue 13): a larger one is a
TileValueError naming the operation, the tile's shape and size and the limit,
raised by the front end in milliseconds for every way of making a tile, on
the interpreter and in `tilecore.compile` alike (no 16 GB allocation, no
NVRTC run of minutes, no C++ narrowing error)."""
import time

import numpy as np
import pytest

import tilecore as ct
from tilecore.frontend.builder import MAX_TILE_ELEMENTS
from frontend_helpers import expect_error, run


def make_big():
    return ct.zeros((2 ** 20,), ct.float32)  # HELPER


@ct.kernel
def big_tile(a, b, WHICH: ct.Constant[int]):
    x = ct.load(b, index=(0, 0), shape=(2 ** 10, 1))
    y = ct.load(b, index=(0, 0), shape=(1, 2 ** 10))
    if WHICH == 0:
        t = ct.load(a, index=(0,), shape=(2 ** 30,))  # T0
    elif WHICH == 1:
        t = ct.load(b, index=(0, 0), shape=(2 ** 15, 2 ** 15))  # T1
    elif WHICH == 2:
        t = ct.full((2 ** 31,), 0, ct.float32)  # T2
    elif WHICH == 3:
        t = ct.zeros((1024, 1024), ct.float32)  # T3
    elif WHICH == 4:
        t = ct.ones((2 ** 19,), ct.int8)  # T4
    elif WHICH == 5:
        t = ct.arange(2 ** 30, dtype=ct.int32)  # T5
    elif WHICH == 6:
        t = ct.broadcast_to(x, (2 ** 10, 2 ** 10))  # T6
    elif WHICH == 7:
        t = x + y  # T7
    elif WHICH == 8:
        t = x < y  # T8
    elif WHICH == 9:
        t = ct.where(x > 0, y, 0.0)  # T9
    elif WHICH == 10:
        t = a.tiled_view((2 ** 20,)).load((0,))  # T10
    else:
        t = make_big()
    ct.store(a, index=(0,), tile=ct.reshape(t, (-1,)))


def _message(what, dtype, shape, size):
    return (f"{what} would make a tile of {dtype} with shape {shape}, {size} elements; a tile "
            f"holds at most 262144 (2**18) elements (use more blocks or loop over smaller tiles)")


CASES = [
    (0, _message("load()", "float32", "(1073741824,)", 2 ** 30)),
    (1, _message("load()", "float32", "(32768, 32768)", 2 ** 30)),
    (2, _message("full()", "float32", "(2147483648,)", 2 ** 31)),
    (3, _message("zeros()", "float32", "(1024, 1024)", 2 ** 20)),
    (4, _message("ones()", "int8", "(524288,)", 2 ** 19)),
    (5, _message("arange()", "int32", "(1073741824,)", 2 ** 30)),
    (6, _message("broadcast_to()", "float32", "(1024, 1024)", 2 ** 20)),
    (7, _message("Operator '+'", "float32", "(1024, 1024)", 2 ** 20)),
    (8, _message("Comparison '<'", "bool_", "(1024, 1024)", 2 ** 20)),
    (9, _message("where()", "float32", "(1024, 1024)", 2 ** 20)),
    (10, _message("load()", "float32", "(1048576,)", 2 ** 20)),
]


@pytest.mark.parametrize("which,message", CASES, ids=[str(c[0]) for c in CASES])
def test_a_tile_too_large_is_refused_at_once(which, message):
    start = time.perf_counter()
    expect_error(big_tile, [np.zeros(8, np.float32), np.zeros((8, 8), np.float32), which],
                 ct.TileValueError, message, f"T{which}")
    assert time.perf_counter() - start < 2


def test_inside_a_tile_function_the_op_is_named():
    expect_error(big_tile, [np.zeros(8, np.float32), np.zeros((8, 8), np.float32), 11],
                 ct.TileValueError, _message("zeros()", "float32", "(1048576,)", 2 ** 20),
                 "HELPER")


def test_compile_refuses_it_as_fast():
    start = time.perf_counter()
    with pytest.raises(ct.TileValueError) as info:
        ct.compile(big_tile, [np.zeros(8, np.float32), np.zeros((8, 8), np.float32), 2],
                   arch="sm_90")
    assert info.value.message == CASES[2][1]
    assert time.perf_counter() - start < 2


@ct.kernel
def largest_tile(out):
    t = ct.full((512, 512), 3, ct.float32)
    ct.store(out, index=(0, 0), tile=t + 1)


def test_the_largest_tile_is_allowed():
    assert MAX_TILE_ELEMENTS == 512 * 512
    out = run(largest_tile, [np.zeros((512, 512), np.float32)])[0]
    np.testing.assert_array_equal(out, 4)


@ct.kernel
def high_rank(out, RANK: ct.Constant[int]):
    t = ct.full((1,) * RANK, 2.0, ct.float32)  # RANK
    ct.store(out, index=(0,), tile=ct.reshape(t, (1,)))


def test_a_tile_has_at_most_32_dimensions():
    out = run(high_rank, [np.zeros(1, np.float32), 32])[0]
    np.testing.assert_array_equal(out, [2.0])
    expect_error(high_rank, [np.zeros(1, np.float32), 100], ct.TileValueError,
                 "full() would make a tile of float32 with 100 dimensions; a tile has at most 32",
                 "RANK")
