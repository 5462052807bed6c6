"""ct.prefetch and TiledView.prefetch (tilecore's extension: an L2 hint): a
kernel that prefetches gives exactly what it gives without the prefetch
(partial tiles, tiles past the end or before the start, 64-bit indices,
strided and empty arrays, loops), and its arguments are checked as load's.
Every launch here is also compiled for sm_80 and sm_90 (conftest) and, on a
GPU machine, rerun there and compared with the interpreter."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, expect_error, run


@ct.kernel
def copy_ahead(x, y, ahead, TILE: ct.Constant[int], ON: ct.Constant[bool]):
    """y = x tile by tile; with ON, each block first prefetches the tile `ahead`
    tiles after its own (past the end, before the start, or its own)."""
    bid = ct.bid(0)
    if ON:
        ct.prefetch(x, (bid + ahead,), (TILE,))
    t = ct.load(x, (bid,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    if ON:
        ct.prefetch(y, (bid,), (TILE,))   # the array it then writes
    ct.store(y, (bid,), t * 2)


def _same_with_and_without(kernel, args, grid, out: int = 1):
    """Run `kernel` with ON=False and ON=True (its last argument) on copies of
    the writable arrays of `args`; they must come out bitwise identical."""
    results = []
    for on in (False, True):
        a = [v.copy() if isinstance(v, np.ndarray) and v.flags.writeable else v for v in args]
        run(kernel, a + [on], grid=grid)
        results.append(a)
    for before, after in zip(*results):
        if isinstance(before, np.ndarray) and before.flags.writeable:
            assert after.tobytes() == before.tobytes()
    return results[1]


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float16, ml_dtypes.bfloat16,
                                   np.float64, np.uint16, np.int64])
@pytest.mark.parametrize("n,ahead", [(3 * 64 + 5, 2), (64, 0), (100, 1000), (130, -3),
                                     (1000, 1)])
def test_1d_prefetch_changes_nothing(dtype, n, ahead):
    x = (RNG.standard_normal(n) * 20).astype(dtype)
    y = np.zeros_like(x)
    grid = (-(-n // 64),)
    out = _same_with_and_without(copy_ahead, [x, y, ahead, 64], grid)
    np.testing.assert_array_equal(out[1], (x * 2).astype(dtype))


@ct.kernel
def prefetch_at(x, y, off, TILE: ct.Constant[int], ON: ct.Constant[bool]):
    """y = x (tile 0); with ON, first prefetches tile `off` of x (never narrowed)."""
    if ON:
        ct.prefetch(x, (off,), (TILE,))
    ct.store(y, (0,), ct.load(x, (0,), (TILE,)))


@pytest.mark.parametrize("off", [np.int64(2**40), np.uint64(2**64 - 1), np.int64(-2**63),
                                 np.int64(2**62 + 3), np.uint32(2**32 - 1), 2**32 + 1,
                                 np.int64(1), np.uint8(1)],
                         ids=["int64", "uint64max", "int64min", "int64big", "uint32max", "pyint",
                              "int64small", "uint8"])
def test_64_bit_tile_indices(off):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(128, np.float32)
    out = _same_with_and_without(prefetch_at, [x, y, off, 128], (1,))
    np.testing.assert_array_equal(out[1], x[:128])


def test_big_tile_one_thread_per_row():
    """A 1-D tile of 8192 float32 (one bulk prefetch on sm_90, 257 lines on sm_80)."""
    x = RNG.standard_normal(3 * 8192 + 7).astype(np.float32)
    y = np.zeros_like(x)
    _same_with_and_without(copy_ahead, [x, y, 2, 8192], (4,))


def test_one_element_rows():
    """Rows of one element: one line each, on every architecture."""
    x = np.arange(10, dtype=np.float32)
    _same_with_and_without(copy_ahead, [x, np.zeros_like(x), 1, 1], (10,))
    x2 = RNG.standard_normal((20, 3)).astype(np.float32)
    for tile in ((8, 1), (1, 1)):
        grid = (-(-20 // tile[0]), -(-3 // tile[1]))
        _same_with_and_without(copy2d, [x2, np.zeros_like(x2), *tile], grid)


def test_empty_array():
    x, y = np.zeros(0, np.float32), np.zeros(0, np.float32)
    _same_with_and_without(copy_ahead, [x, y, 1, 8], (2,))


@ct.kernel
def copy2d(x, y, TM: ct.Constant[int], TN: ct.Constant[int], ON: ct.Constant[bool]):
    """y = x by (TM, TN) tiles; with ON, prefetches in every form first: the
    next tile of the row, the tile read transposed (order "F"), a tiled view
    with traversal steps, and a tile past the end."""
    i, j = ct.bid(0), ct.bid(1)
    if ON:
        ct.prefetch(x, (i, j + 1), (TM, TN))
        ct.prefetch(x, (j, i), (TN, TM), order="F")
        ct.prefetch(x, index=(i, j), shape=(TM, TN), order=(0, 1))
        x.tiled_view((TM, TN), traversal_steps=(TM + 1, 3)).prefetch((i, j))
        ct.prefetch(x, (i + 1000, j), (TM, TN))
    t = ct.load(x, (i, j), (TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (i, j), t)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64, np.bool_])
@pytest.mark.parametrize("shape,tile", [((13, 10), (4, 8)), ((33, 70), (8, 64)),
                                        ((5, 300), (1, 256)), ((70, 3), (64, 4))])
def test_2d_prefetch_changes_nothing(dtype, shape, tile):
    x = (RNG.standard_normal(shape) * 50).astype(dtype)
    y = np.zeros_like(x)
    grid = (-(-shape[0] // tile[0]), -(-shape[1] // tile[1]))
    out = _same_with_and_without(copy2d, [x, y, *tile], grid)
    np.testing.assert_array_equal(out[1], x)


@pytest.mark.parametrize("view", ["columns", "transposed", "reversed", "broadcast"])
def test_strided_arrays(view):
    """Rows that are not contiguous in memory (line prefetches of elements)."""
    base = RNG.standard_normal((40, 96)).astype(np.float32)
    x = {"columns": base[:, ::3], "transposed": base.T, "reversed": base[::-1, ::-2],
         "broadcast": np.broadcast_to(base[0], (40, 96))}[view]
    y = np.zeros(x.shape, np.float32)
    grid = (-(-x.shape[0] // 16), -(-x.shape[1] // 8))
    out = _same_with_and_without(copy2d, [x, y, 16, 8], grid)
    np.testing.assert_array_equal(out[1], x)


def test_wide_array():
    """An array of more than 2**31 elements (64-bit shapes in the kernel)."""
    base = np.arange(1, 5, dtype=np.float32)
    x = np.lib.stride_tricks.as_strided(base, shape=(2**31 + 5, 4), strides=(0, 4),
                                        writeable=False)
    y = np.zeros((8, 4), np.float32)
    _same_with_and_without(copy2d, [x, y, 8, 4], (1, 1))


@ct.kernel
def running_sum(x, out, TILE: ct.Constant[int], ON: ct.Constant[bool]):
    """One block sums x tile by tile, prefetching two tiles ahead (the
    single-pass scan's pattern), in a loop and behind a branch."""
    n = ct.num_tiles(x, 0, (TILE,))
    acc = ct.zeros((TILE,), ct.float32)
    for i in range(n):
        if ON and i + 2 < n:
            ct.prefetch(x, (i + 2,), (TILE,))
        acc += ct.load(x, (i,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, (0,), ct.sum(acc, 0, keepdims=True))


def test_prefetch_in_a_loop():
    x = RNG.standard_normal(1000).astype(np.float32)
    out = _same_with_and_without(running_sum, [x, np.zeros(1, np.float32), 64], (1,))
    np.testing.assert_allclose(out[1], [x.sum()], rtol=1e-5)


@ct.kernel
def update_in_place(a, TILE: ct.Constant[int], ON: ct.Constant[bool]):
    """a[tile] += 1 then a[tile shifted by half] reloaded: prefetches of the
    array it writes, between its accesses, order nothing and change nothing."""
    bid = ct.bid(0)
    if ON:
        ct.prefetch(a, (bid,), (TILE,))
    t = ct.load(a, (bid,), (TILE,))
    if ON:
        ct.prefetch(a, (2 * bid + 1,), (TILE // 2,))
    ct.store(a, (bid,), t + 1)
    if ON:
        ct.prefetch(a, (bid,), (TILE,))
    u = ct.load(a, (2 * bid + 1,), (TILE // 2,))
    ct.store(a, (2 * bid + 1,), u * 3)


def test_prefetch_between_accesses_of_the_array_it_writes():
    a = np.arange(100, dtype=np.int32)
    out = _same_with_and_without(update_in_place, [a, 16], (7,))
    want = a + 1
    for b in range(7):
        want[16 * b + 8:16 * b + 16] *= 3
    np.testing.assert_array_equal(out[0], want)


@ct.kernel
def scalar_array(x, y, ON: ct.Constant[bool]):
    if ON:
        ct.prefetch(x, (), ())
    ct.store(y, (0,), ct.full((1,), 7, ct.int32))


def test_zero_dimensional_array():
    _same_with_and_without(scalar_array, [np.array(3.0, np.float32), np.zeros(1, np.int32)],
                           (1,))


# --- argument errors: the same as load's, naming prefetch ------------------------------------------
@ct.kernel
def bad_array(x):
    ct.prefetch(ct.zeros((4,), ct.float32), (0,), (4,))  # BAD-ARRAY


@ct.kernel
def bad_index_len(x):
    ct.prefetch(x, (0, 0), (4,))  # BAD-INDEX-LEN


@ct.kernel
def bad_index_type(x):
    ct.prefetch(x, (1.5,), (4,))  # BAD-INDEX-TYPE


@ct.kernel
def bad_index_float_tile(x):
    ct.prefetch(x, (ct.bid(0) * 1.0,), (4,))  # BAD-INDEX-TILE


@ct.kernel
def bad_shape_pow2(x):
    ct.prefetch(x, (0,), (6,))  # BAD-POW2


@ct.kernel
def bad_shape_ndim(x):
    ct.prefetch(x, (0,), (4, 4))  # BAD-NDIM


@ct.kernel
def bad_shape_runtime(x, n):
    ct.prefetch(x, (0,), (n,))  # BAD-RT-SHAPE


@ct.kernel
def bad_order(x):
    ct.prefetch(x, (0, 0), (4, 4), order="K")  # BAD-ORDER


@ct.kernel
def bad_order_perm(x):
    ct.prefetch(x, (0, 0), (4, 4), order=(0, 0))  # BAD-PERM


@ct.kernel
def bad_keyword(x):
    ct.prefetch(x, (0,), (4,), padding_mode=ct.PaddingMode.ZERO)  # BAD-KW


@ct.kernel
def bad_view_index(x):
    x.tiled_view((4,)).prefetch((0, 1))  # BAD-VIEW-INDEX


@ct.kernel
def bad_view_index_type(x):
    x.tiled_view((4,)).prefetch((0.5,))  # BAD-VIEW-TYPE


@ct.kernel
def bad_view_keyword(x):
    x.tiled_view((4,)).prefetch((0,), shape=(4,))  # BAD-VIEW-KW


@ct.kernel
def prefetch_in_reduce(x, out):
    def combine(a, b):
        ct.prefetch(x, (0,), (4,))  # IN-REDUCE
        return a + b
    ct.store(out, (0,), ct.reduce(ct.zeros((4,), ct.float32), 0, combine, 0.0, keepdims=True))


_X1, _X2 = np.zeros(8, np.float32), np.zeros((8, 8), np.float32)


@pytest.mark.parametrize("kernel,args,cls,message,marker", [
    (bad_array, [_X1], ct.TileTypeError,
     'Invalid argument "array" of prefetch(): expected an array (a kernel parameter), got a '
     "tile of float32 with shape (4,)", "BAD-ARRAY"),
    (bad_index_len, [_X1], ct.TileValueError,
     'Invalid argument "index" of prefetch(): expected a tuple of 1 index value(s), got 2',
     "BAD-INDEX-LEN"),
    (bad_index_type, [_X1], ct.TileTypeError,
     'Invalid argument "index" of prefetch(): expected integer scalars, got a loosely '
     "typed constant 1.5",
     "BAD-INDEX-TYPE"),
    (bad_index_float_tile, [_X1], ct.TileTypeError,
     'Invalid argument "index" of prefetch(): expected integer scalars, got a float32 scalar',
     "BAD-INDEX-TILE"),
    (bad_shape_pow2, [_X1], ct.TileValueError,
     'Invalid argument "shape" of prefetch(): tile dimensions must be powers of two, got (6,)',
     "BAD-POW2"),
    (bad_shape_ndim, [_X1], ct.TileValueError,
     'Invalid argument "shape" of prefetch(): expected a tuple of 1 ints, got (4, 4)',
     "BAD-NDIM"),
    (bad_shape_runtime, [_X1, 4], ct.TileTypeError,
     'Invalid argument "shape" of prefetch(): expected a tuple of constant ints, got a tuple '
     "(an int32 scalar,)", "BAD-RT-SHAPE"),
    (bad_order, [_X2], ct.TileTypeError,
     'Invalid argument "order" of prefetch(): expected "C", "F" or a tuple of constant ints, '
     "got str 'K'", "BAD-ORDER"),
    (bad_order_perm, [_X2], ct.TileValueError,
     'Invalid argument "order" of prefetch(): expected a permutation of (0, 1), got (0, 0)',
     "BAD-PERM"),
    (bad_keyword, [_X1], ct.TileTypeError,
     "Invalid call to prefetch(): got an unexpected keyword argument 'padding_mode'", "BAD-KW"),
    (bad_view_index, [_X1], ct.TileValueError,
     'Invalid argument "index" of TiledView.prefetch(): expected a tuple of 1 index value(s), '
     "got 2", "BAD-VIEW-INDEX"),
    (bad_view_index_type, [_X1], ct.TileTypeError,
     'Invalid argument "index" of TiledView.prefetch(): expected integer scalars, got a '
     "loosely typed constant 0.5", "BAD-VIEW-TYPE"),
    (bad_view_keyword, [_X1], ct.TileTypeError,
     "Invalid call to TiledView.prefetch(): got an unexpected keyword argument 'shape'",
     "BAD-VIEW-KW"),
    (prefetch_in_reduce, [_X1, np.zeros(1, np.float32)], ct.TileSyntaxError,
     "Operations with memory effects are not supported inside reduction body", "IN-REDUCE"),
], ids=lambda v: v if isinstance(v, str) and v.replace("-", "").isupper() else None)
def test_argument_errors(kernel, args, cls, message, marker):
    expect_error(kernel, args, cls, message, marker)


def test_host_call_is_an_error():
    with pytest.raises(TypeError, match=r"tilecore.prefetch\(\) can only be called from tile "
                                        r"code"):
        ct.prefetch(np.zeros(4), (0,), (4,))
    assert "prefetch" in ct.__all__ and ct.prefetch.__doc__.startswith("A hint")
