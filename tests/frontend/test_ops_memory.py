"""bid/num_blocks/num_tiles, tile-space load/store (shape, order, padding,
check_bounds, partial tiles, hints), tiled views, gather/scatter."""
import numpy as np
import ml_dtypes
import pytest

import tilecore as ct
from frontend_helpers import RNG, run


@ct.kernel
def grid_ids(out):
    x, y, z = ct.bid(0), ct.bid(1), ct.bid(2)
    nx, ny, nz = ct.num_blocks(0), ct.num_blocks(1), ct.num_blocks(2)
    flat = x + nx * (y + ny * z)
    v = ct.full((1, 1, 1), flat * 1000 + nx * 100 + ny * 10 + nz, ct.int32)
    ct.store(out, (z, y, x), v)


def test_bid_and_num_blocks():
    out = np.zeros((2, 3, 5), np.int32)
    run(grid_ids, [out], grid=(5, 3, 2))
    z, y, x = np.indices(out.shape)
    np.testing.assert_array_equal(out, (x + 5 * (y + 3 * z)) * 1000 + 532)


@ct.kernel
def tiles_count(x, out):
    a = ct.num_tiles(x, 0, (4, 8))
    b = ct.num_tiles(x, 1, (4, 8))
    c = ct.num_tiles(x, 0, (4, 8), order="F")   # tile axis 0 runs along array axis 1
    d = ct.num_tiles(x, axis=1, shape=(2, 2), order=(1, 0))
    ct.store(out, (0,), ct.full((1,), a * 1000 + b * 100 + c * 10 + d, ct.int32))


def test_num_tiles():
    out = np.zeros(1, np.int32)
    run(tiles_count, [np.zeros((9, 17), np.float32), out])
    assert out[0] == 3 * 1000 + 3 * 100 + 5 * 10 + 5


@ct.kernel
def copy2d(x, y, TM: ct.Constant[int], TN: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO, latency=3,
                allow_tma=False)
    ct.store(y, index=(i, j), tile=t, latency=10, allow_tma=True)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, ml_dtypes.bfloat16, np.bool_,
                                   np.float64, np.int64])
def test_load_store_partial_tiles(dtype):
    x = (RNG.standard_normal((13, 10)) * 50).astype(dtype)
    y = np.zeros_like(x)
    run(copy2d, [x, y, 4, 8], grid=(4, 2))
    np.testing.assert_array_equal(y, x)


@ct.kernel
def load_order(x, out_c, out_f, out_t):
    a = ct.load(x, (0, 0), (4, 8), order="C")
    b = ct.load(x, (0, 0), (8, 4), order="F")         # transposed tile of the same data
    c = ct.load(x, (1, 0), (2, 4), order=(1, 0))      # t[k0, k1] = x[k1, 2 + k0]
    ct.store(out_c, (0, 0), a)
    ct.store(out_f, (0, 0), b)
    ct.store(out_t, (0, 0), c)


def test_load_order():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    oc, of, ot = np.zeros((4, 8), np.float32), np.zeros((8, 4), np.float32), \
        np.zeros((2, 4), np.float32)
    run(load_order, [x, oc, of, ot])
    np.testing.assert_array_equal(oc, x)
    np.testing.assert_array_equal(of, x.T)
    np.testing.assert_array_equal(ot, x[:4, 2:4].T)


@ct.kernel
def store_order(x, out):
    t = ct.load(x, (0, 0), (8, 4))
    ct.store(out, (0, 0), t, order="F")


def test_store_order():
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    out = np.zeros((4, 8), np.float32)
    run(store_order, [x, out])
    np.testing.assert_array_equal(out, x.T)


@ct.kernel
def pad_load(x, out, MODE: ct.Constant):
    t = ct.load(x, (1,), (8,), padding_mode=MODE)
    ct.store(out, (0,), t)


@pytest.mark.parametrize("mode,pad", [
    (ct.PaddingMode.ZERO, 0.0), (ct.PaddingMode.NEG_ZERO, -0.0), (ct.PaddingMode.NAN, np.nan),
    (ct.PaddingMode.POS_INF, np.inf), (ct.PaddingMode.NEG_INF, -np.inf)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_padding_modes(mode, pad, dtype):
    x = np.arange(11, dtype=dtype) + 1
    out = np.zeros(8, dtype)
    run(pad_load, [x, out, mode])
    np.testing.assert_array_equal(out[:3], x[8:])
    np.testing.assert_array_equal(out[3:], np.full(5, pad, dtype))
    assert np.all(np.signbit(out[3:]) == np.signbit(dtype(pad)))


@pytest.mark.interpreter_only
def test_padding_undetermined_is_accepted():
    x = np.arange(11, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(pad_load, [x, out, ct.PaddingMode.UNDETERMINED])
    np.testing.assert_array_equal(out[:3], x[8:])   # the rest is unspecified


def test_int_padding_zero():
    x = np.arange(11, dtype=np.int16)
    out = np.ones(8, np.int16)
    run(pad_load, [x, out, ct.PaddingMode.ZERO])
    np.testing.assert_array_equal(out, [8, 9, 10, 0, 0, 0, 0, 0])


@ct.kernel
def no_check(x, out):
    ct.store(out, (1,), ct.load(x, (1,), (4,), check_bounds=False), check_bounds=False)


def test_check_bounds_false_in_bounds():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(no_check, [x, out])
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 4, 5, 6, 7])


@ct.kernel
def one_element(x, out):
    t = ct.load(x, (0, 0), (1, 1))
    s = t.item() * 2
    ct.store(out, (0, 0), t + s)


def test_one_element_tiles():
    x = np.array([[3.0]], np.float32)
    out = np.zeros((1, 1), np.float32)
    run(one_element, [x, out])
    assert out[0, 0] == 9.0


@ct.kernel
def zero_d(x, out, half):
    t = ct.load(x, (), ())                     # a 0-d array's one element, as a 0-d tile
    ct.store(out, (), t * 2 + 1)
    ct.store(half, (), ct.astype(t, ct.float16))


def test_zero_d_arrays():
    """Load and store of 0-d arrays (index (), shape ()): the interpreter had
    stored into a copy (a NumPy scalar) and code generation had failed."""
    out, half = np.zeros((), np.float32), np.zeros((), np.float16)
    run(zero_d, [np.array(-3.5, np.float32), out, half])
    assert out.shape == () and out == -6.0 and half == np.float16(-3.5)


@ct.kernel
def scalar_store(out, v):
    ct.store(out, (ct.bid(0),), v)     # a scalar is stored as a 1-element tile


def test_store_scalar():
    out = np.zeros(3, np.float32)
    run(scalar_store, [out, 2.5], grid=(3,))
    np.testing.assert_array_equal(out, 2.5)


@ct.kernel
def strided(x, out):
    ct.store(out, (0, 0), ct.load(x, (0, 0), (4, 4)) * 2)


def test_strided_arrays():
    base = np.arange(100, dtype=np.float32).reshape(10, 10)
    x = base[1::2, ::3]             # non-contiguous view (5, 4)
    out = np.zeros((8, 8), np.float32)[::2, 1::2]
    run(strided, [x, out])
    np.testing.assert_array_equal(out, x[:4] * 2)


# --- tiled views -------------------------------------------------------------------------------
@ct.kernel
def view_copy(x, y, n_out, TILE: ct.Constant[int]):
    xv = x.tiled_view((TILE,), padding_mode=ct.PaddingMode.ZERO)
    yv = y.tiled_view(TILE)
    b = ct.bid(0)
    t = xv.load((b,), latency=2)
    yv.store(b, t + 1, allow_tma=False)
    assert xv.tile_shape == (TILE,) and xv.dtype == ct.float32
    ct.store(n_out, (0,), ct.full((1,), xv.num_tiles(0), ct.int32))


def test_tiled_view_load_store():
    x = np.arange(21, dtype=np.float32)
    y = np.zeros(21, np.float32)
    n = np.zeros(1, np.int32)
    run(view_copy, [x, y, n, 8], grid=(3,))
    np.testing.assert_array_equal(y, x + 1)
    assert n[0] == 3


@ct.kernel
def view_steps(x, out, nt, STEP: ct.Constant[int]):
    v = x.tiled_view((4,), padding_mode=ct.PaddingMode.NEG_ZERO, traversal_steps=(STEP,))
    b = ct.bid(0)
    ct.store(out, (b, 0), ct.reshape(v.load((b,)), (1, 4)))
    ct.store(nt, (0,), ct.full((1,), v.num_tiles(0), ct.int32))


@pytest.mark.parametrize("step", [2, 4, 6])   # overlapping, adjacent, gapped
def test_traversal_steps(step):
    n = 13
    x = np.arange(n, dtype=np.float32) + 1
    count = (max(n - 4, 0) + step - 1) // step + 1 if step < 4 else (n + step - 1) // step
    out = np.full((count, 4), 99, np.float32)
    nt = np.zeros(1, np.int32)
    run(view_steps, [x, out, nt, step], grid=(count,))
    assert nt[0] == count
    for b in range(count):
        want = np.full(4, -0.0, np.float32)
        part = x[b * step:b * step + 4]
        want[:len(part)] = part
        np.testing.assert_array_equal(out[b], want)


@ct.kernel
def view_2d(x, y):
    v = x.tiled_view((2, 4), traversal_steps=(1, 4))
    w = y.tiled_view((2, 4))
    t = v.load((ct.bid(0), 0))         # rows b, b+1
    w.store((ct.bid(0), 0), t)


def test_tiled_view_2d_overlap():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    y = np.zeros((10, 4), np.float32)
    run(view_2d, [x, y], grid=(5,))
    for b in range(5):
        np.testing.assert_array_equal(y[2 * b:2 * b + 2], x[b:b + 2])


# --- gather / scatter ---------------------------------------------------------------------------
@ct.kernel
def gather_1d(x, out, idx_arr):
    idx = ct.load(idx_arr, (0,), (8,))
    mask = idx != 3
    a = ct.gather(x, idx)                                  # default padding 0
    b = ct.gather(x, idx, padding_value=-1)                # scalar padding
    c = ct.gather(x, idx, mask=mask, padding_value=ct.arange(8, dtype=ct.float32) + 100)
    ct.store(out, (0, 0), ct.reshape(a, (1, 8)))
    ct.store(out, (1, 0), ct.reshape(b, (1, 8)))
    ct.store(out, (2, 0), ct.reshape(c, (1, 8)))


def test_gather_padding_and_mask():
    x = np.arange(10, dtype=np.float32) * 10
    idx = np.array([0, 3, -1, 9, 10, 100, -100, 5], np.int32)
    out = np.zeros((3, 8), np.float32)
    run(gather_1d, [x, out, idx])
    inb = (idx >= 0) & (idx < 10)
    vals = np.where(inb, x[np.clip(idx, 0, 9)], 0)
    np.testing.assert_array_equal(out[0], vals)
    np.testing.assert_array_equal(out[1], np.where(inb, vals, -1))
    keep = inb & (idx != 3)
    np.testing.assert_array_equal(out[2], np.where(keep, vals, np.arange(8) + 100))


@ct.kernel
def gather_2d(x, out):
    r = ct.arange(4, dtype=ct.int32)[:, None] - 1          # (4, 1): -1..2
    c = ct.arange(8, dtype=ct.int64)[None, :] * 2          # (1, 8): 0..14
    t = ct.gather(x, (r, c), padding_value=7)
    ct.store(out, (0, 0), t)


def test_gather_tuple_indices_broadcast():
    x = RNG.integers(-50, 50, (3, 9)).astype(np.int16)
    out = np.zeros((4, 8), np.int16)
    run(gather_2d, [x, out])
    r = np.arange(4)[:, None] - 1
    c = np.arange(8)[None, :] * 2
    ok = (r >= 0) & (r < 3) & (c < 9)
    want = np.where(ok, x[np.clip(r, 0, 2), np.clip(c, 0, 8)], 7)
    np.testing.assert_array_equal(out, want)


@ct.kernel
def gather_unchecked(x, out):
    t = ct.gather(x, ct.arange(4, dtype=ct.int32) + 2, check_bounds=False, latency=4)
    ct.store(out, (0,), t)


def test_gather_check_bounds_false():
    x = np.arange(6, dtype=np.uint8)
    out = np.zeros(4, np.uint8)
    run(gather_unchecked, [x, out])
    np.testing.assert_array_equal(out, [2, 3, 4, 5])


@ct.kernel
def scatter_k(out, vals):
    idx = ct.arange(8, dtype=ct.int32) * 2 - 3               # -3..11
    v = ct.load(vals, (0,), (8,))
    ct.scatter(out, idx, v, mask=idx != 5)
    ct.scatter(out, idx + 1, 1.5)                             # scalar value, broadcast
    ct.scatter(out, (ct.arange(2, dtype=ct.int32) + 11,), v.max() + ct.zeros((2,), ct.float32),
               check_bounds=False)


def test_scatter_mask_bounds_and_scalar():
    out = np.zeros(13, np.float32)
    vals = np.arange(8, dtype=np.float32) + 1
    run(scatter_k, [out, vals])
    want = np.zeros(13, np.float32)
    for k in range(8):
        i = 2 * k - 3
        if 0 <= i < 13 and i != 5:
            want[i] = vals[k]
        if 0 <= i + 1 < 13:
            want[i + 1] = 1.5
    want[11:13] = 8
    np.testing.assert_array_equal(out, want)


@ct.kernel
def vec_add_gather_2d(a, out):
    i = ct.arange(4, dtype=ct.int32)[:, None]
    j = ct.arange(4, dtype=ct.int32)[None, :]
    ct.scatter(out, (j, i), ct.gather(a, (i, j)))            # transpose through indices


def test_scatter_2d_transpose():
    a = np.arange(16, dtype=np.int32).reshape(4, 4)
    out = np.zeros((4, 4), np.int32)
    run(vec_add_gather_2d, [a, out])
    np.testing.assert_array_equal(out, a.T)


# --- run-time errors -------------------------------------------------------------------------------
@ct.kernel
def fully_out(x, out):
    ct.store(out, (0,), ct.load(x, (3,), (4,)))


def test_tile_fully_out_of_bounds_reads_padding():
    out = run(fully_out, [np.zeros(10, np.float32), np.zeros(4, np.float32)])[1]
    assert np.isnan(out).all()  # UNDETERMINED padding of a float array: NaN, as on the GPU
