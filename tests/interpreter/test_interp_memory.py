"""Kernels that load/store/gather/scatter, run through run_function."""
import numpy as np
import pytest

from tilecore.errors import TileRuntimeError
from tilecore.interpreter import run_function
from tilecore.language import dtypes as dt
from tilecore.language.enums import PaddingMode

from interp_builder import FnBuilder, tile


def vector_add_kernel(dtype, tile_n):
    b = FnBuilder("vadd")
    x, y, out = (b.array(n, dtype, 1) for n in ("x", "y", "out"))
    i = b.op("bid", [], [tile(dt.int32)], axis=0)
    tx = b.load(x, [i], (tile_n,), padding=PaddingMode.ZERO)
    ty = b.load(y, [i], (tile_n,), padding=PaddingMode.ZERO)
    b.store(out, b.binary("add", tx, ty), [i])
    return b.build()


@pytest.mark.parametrize("n", [1, 16, 100])
def test_vector_add_with_partial_last_tile(n):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, -7.0, np.float32)
    run_function(vector_add_kernel(dt.float32, 16), (-(-n // 16), 1, 1), [x, y, out])
    np.testing.assert_array_equal(out, x + y)


def test_store_writes_through_strided_views():
    base = np.zeros((6, 12), np.int32)
    view = base[::2, 1::3]  # shape (3, 4), non-contiguous
    x = np.arange(4, dtype=np.int32)
    b = FnBuilder()
    xa, out = b.array("x", dt.int32, 1), b.array("out", dt.int32, 2)
    zero = b.const(0, dt.int32)
    row = b.op("bid", [], [tile(dt.int32)], axis=0)
    t = b.load(xa, [zero], (4,))
    t2 = b.op("reshape", [t], [tile(dt.int32, 1, 4)], shape=(1, 4))
    b.store(out, t2, [row, zero])
    run_function(b.build(), (3, 1, 1), [x, view])
    expected = np.zeros((6, 12), np.int32)
    expected[::2, 1::3] = np.arange(4)
    np.testing.assert_array_equal(base, expected)


def _transposed_load_kernel(dtype, padding):
    """out[tile (i, j)] = load(arr, (i, j), shape (4, 8), order (1, 0))."""
    b = FnBuilder()
    arr, out = b.array("arr", dtype, 2), b.array("out", dtype, 2)
    i = b.op("bid", [], [tile(dt.int32)], axis=0)
    j = b.op("bid", [], [tile(dt.int32)], axis=1)
    t = b.load(arr, [i, j], (4, 8), order=(1, 0), padding=padding)
    b.store(out, t, [i, j])
    return b.build()


_PADS = {PaddingMode.ZERO: 0.0, PaddingMode.NEG_ZERO: -0.0, PaddingMode.NAN: np.nan,
         PaddingMode.POS_INF: np.inf, PaddingMode.NEG_INF: -np.inf,
         PaddingMode.UNDETERMINED: np.nan}


@pytest.mark.parametrize("padding", list(PaddingMode))
def test_load_with_order_and_partial_tiles_pads(padding):
    arr = np.arange(35, dtype=np.float32).reshape(5, 7)
    out = np.full((8, 8), 99, np.float32)
    run_function(_transposed_load_kernel(dt.float32, padding), (2, 1, 1), [arr, out])
    expected = np.full((8, 8), _PADS[padding], np.float32)
    expected[:7, :5] = arr.T
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


@pytest.mark.parametrize("padding, pad", [(PaddingMode.UNDETERMINED, 2**31 - 1),
                                          (PaddingMode.ZERO, 0),
                                          (PaddingMode.NEG_INF, -2**31)])
def test_int_load_padding(padding, pad):
    arr = np.arange(35, dtype=np.int32).reshape(5, 7)
    out = np.zeros((8, 8), np.int32)
    run_function(_transposed_load_kernel(dt.int32, padding), (2, 1, 1), [arr, out])
    expected = np.full((8, 8), pad, np.int32)
    expected[:7, :5] = arr.T
    np.testing.assert_array_equal(out, expected)


def test_partial_store_with_order_drops_out_of_bounds():
    """Store tiles of shape (4, 8) with order (1, 0) into a (5, 7) array."""
    b = FnBuilder()
    src, out = b.array("src", dt.float32, 2), b.array("out", dt.float32, 2)
    i = b.op("bid", [], [tile(dt.int32)], axis=0)
    j = b.op("bid", [], [tile(dt.int32)], axis=1)
    t = b.load(src, [i, j], (4, 8))
    b.store(out, t, [i, j], order=(1, 0))
    src_arr = np.arange(64, dtype=np.float32).reshape(8, 8)
    out_arr = np.full((5, 7), -1.0, np.float32)
    run_function(b.build(), (2, 1, 1), [src_arr, out_arr])
    np.testing.assert_array_equal(out_arr, src_arr.T[:5, :7])


def test_traversal_steps_give_overlapping_tiles():
    n, tile_n, step = 10, 4, 2
    b = FnBuilder()
    x, out = b.array("x", dt.int64, 1), b.array("out", dt.int64, 2)
    i = b.op("bid", [], [tile(dt.int32)], axis=0)
    zero = b.const(0, dt.int32)
    t = b.load(x, [i], (tile_n,), steps=(step,), padding=PaddingMode.ZERO)
    b.store(out, b.op("reshape", [t], [tile(dt.int64, 1, tile_n)], shape=(1, tile_n)),
            [i, zero])
    xs = np.arange(100, 100 + n, dtype=np.int64)
    out_arr = np.zeros((5, tile_n), np.int64)
    run_function(b.build(), (5, 1, 1), [xs, out_arr])
    expected = [[100 + s + k if s + k < n else 0 for k in range(tile_n)]
                for s in range(0, n, step)]
    assert out_arr.tolist() == expected


def _single_load_kernel(tile_n, check_bounds=True):
    b = FnBuilder()
    x = b.array("x", dt.float32, 1)
    idx = b.scalar("i", dt.int32)
    b.load(x, [idx], (tile_n,), check_bounds=check_bounds)
    return b.build()


@pytest.mark.parametrize("index", [3, -1, -7])
def test_fully_out_of_bounds_tile_reads_padding(index):
    """As on the GPU: a tile wholly outside the array loads only padding."""
    b = FnBuilder()
    x, out = b.array("x", dt.float32, 1), b.array("out", dt.float32, 1)
    t = b.load(x, [b.scalar("i", dt.int32)], (16,), padding=PaddingMode.NEG_INF)
    b.store(out, t, [b.const(0, dt.int32)])
    out_arr = np.zeros(16, np.float32)
    run_function(b.build(), (1, 1, 1), [np.ones(40, np.float32), out_arr, index])
    assert out_arr.tolist() == [-np.inf] * 16


def test_partial_tile_with_check_bounds_false_raises():
    fn = _single_load_kernel(16, check_bounds=False)
    run_function(fn, (1, 1, 1), [np.zeros(40, np.float32), 1])  # in bounds: fine
    with pytest.raises(TileRuntimeError) as info:
        run_function(fn, (1, 1, 1), [np.zeros(40, np.float32), 2])
    assert info.value.message == ('load(): tile (2,) of shape (16,) is partly out of bounds of '
                                  'array "x" with shape (40,), but check_bounds=False promised it '
                                  "in bounds (block (0, 0, 0))")
    assert info.value.loc is fn.body.ops[0].loc


def test_fully_out_of_bounds_store_writes_nothing():
    b = FnBuilder()
    out = b.array("out", dt.int32, 1)
    b.store(out, b.op("iota", [], [tile(dt.int32, 4)], shape=(4,), dtype=dt.int32),
            [b.const(5, dt.int32)])
    out_arr = np.full(20, -3, np.int32)
    run_function(b.build(), (1, 1, 1), [out_arr])
    assert out_arr.tolist() == [-3] * 20


def _gather_kernel(has_mask, check_bounds=True):
    """out = gather(arr, pad=-1, rows, cols[, mask]) for 2-D arr, 8 indices."""
    b = FnBuilder()
    arr, rows, cols, out = (b.array("arr", dt.float32, 2), b.array("rows", dt.int32, 1),
                            b.array("cols", dt.int64, 1), b.array("out", dt.float32, 1))
    zero = b.const(0, dt.int32)
    r = b.load(rows, [zero], (8,))
    c = b.op("astype", [b.load(cols, [zero], (8,))], [tile(dt.int32, 8)], dtype=dt.int32)
    operands = [arr, b.const(-1.0, dt.float32), r, c]
    if has_mask:
        operands.append(b.compare("ne", r, b.op("broadcast", [b.const(2, dt.int32)],
                                                [tile(dt.int32, 8)], shape=(8,))))
    g = b.op("gather", operands, [tile(dt.float32, 8)], has_mask=has_mask,
             check_bounds=check_bounds)
    b.store(out, g, [zero])
    return b.build()


def test_gather_out_of_bounds_and_mask_read_pad():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = np.array([0, 2, 3, -1, 1, 2, 0, 1], np.int32)
    cols = np.array([0, 3, 0, 0, 4, 1, -2, 2], np.int64)
    expected = [0, 11, -1, -1, -1, 9, -1, 6]
    out = np.zeros(8, np.float32)
    run_function(_gather_kernel(False), (1, 1, 1), [arr, rows, cols, out])
    assert out.tolist() == expected
    run_function(_gather_kernel(True), (1, 1, 1), [arr, rows, cols, out])
    assert out.tolist() == [0, -1, -1, -1, -1, -1, -1, 6]  # row 2 masked off


def test_gather_check_bounds_false_raises_on_enabled_oob_index():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = np.array([0, 1, 2, 3, 0, 1, 2, 0], np.int32)
    cols = np.zeros(8, np.int64)
    with pytest.raises(TileRuntimeError, match=r'gather\(\): index \(3, 0\) is out of bounds '
                                               r'of array "arr" with shape \(3, 4\)'):
        run_function(_gather_kernel(False, check_bounds=False), (1, 1, 1),
                     [arr, rows, cols, np.zeros(8, np.float32)])


def test_scatter_drops_out_of_bounds_and_masked_writes():
    b = FnBuilder()
    out, idx = b.array("out", dt.int32, 1), b.array("idx", dt.int32, 1)
    zero = b.const(0, dt.int32)
    ix = b.load(idx, [zero], (8,))
    vals = b.binary("add", b.op("iota", [], [tile(dt.int32, 8)], shape=(8,), dtype=dt.int32),
                    b.op("broadcast", [b.const(10, dt.int32)], [tile(dt.int32, 8)],
                         shape=(8,)))
    mask = b.compare("ne", ix, b.op("broadcast", [b.const(4, dt.int32)], [tile(dt.int32, 8)],
                                    shape=(8,)))
    b.op("scatter", [out, vals, ix, mask], [], has_mask=True, check_bounds=True)
    target = np.full(6, -1, np.int32)
    run_function(b.build(), (1, 1, 1), [target, np.array([5, 0, -1, 6, 4, 2, 100, 1],
                                                         np.int32)])
    assert target.tolist() == [11, 17, 15, -1, -1, 10]


def test_argument_type_errors():
    fn = vector_add_kernel(dt.float32, 16)
    good = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match='Invalid argument "y": expected a NumPy array of '
                                        'float32 with 1 dimensions, got an array of float64'):
        run_function(fn, (1, 1, 1), [good, np.zeros(4), good])
    with pytest.raises(TypeError, match="takes 3 runtime arguments, got 2"):
        run_function(fn, (1, 1, 1), [good, good])


def test_scalar_gather_and_scatter():
    """out[j] = x[i] with 0-d indices; an out-of-bounds i reads the pad."""
    b = FnBuilder()
    x, out = b.array("x", dt.float16, 1), b.array("out", dt.float16, 1)
    i, j = b.scalar("i", dt.int64), b.scalar("j", dt.int64)
    g = b.op("gather", [x, b.const(-2.0, dt.float16), i], [tile(dt.float16)],
             has_mask=False, check_bounds=True)
    b.op("scatter", [out, g, j], [], has_mask=False, check_bounds=True)
    xs = np.array([0.5, 1.5, 2.5], np.float16)
    out_arr = np.zeros(3, np.float16)
    run_function(b.build(), (1, 1, 1), [xs, out_arr, 2, 0])
    run_function(b.build(), (1, 1, 1), [xs, out_arr, 3, 1])
    run_function(b.build(), (1, 1, 1), [xs, out_arr, 0, 5])  # dropped
    assert out_arr.tolist() == [2.5, -2.0, 0.0]
