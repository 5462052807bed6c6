"""64-bit indices: a tile index, a gather index or an array extent beyond int32
is never narrowed. Arrays with a dimension or stride of 2**31 or more get a
specialization of their own (int64 shapes and strides); ordinary arrays keep
32-bit index arithmetic.

CPU tests use stride-0 views (`as_strided`) to get arrays of more than 2**31
elements without the memory; the suite's conftest also compiles every launch
for sm_80 and sm_90 and, on a GPU machine, reruns it there. The GPU tests at
the end use real arrays of more than 2**31 elements."""
import re

import numpy as np
import pytest

import tilecore as ct
from tilecore.frontend.specialize import needs_wide_index

BIG = 2**31 + 5  # rows of the wide test arrays


@ct.kernel
def load_at(a, out, off, TILE: ct.Constant[int]):
    t = ct.load(a, index=(off,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(0,), tile=t)


@ct.kernel
def row_at(a, out, row):
    t = ct.load(a, index=(row, 0), shape=(1, 4), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(out, index=(0, 0), tile=t)


@ct.kernel
def extents(a, out, TILE: ct.Constant[int]):
    ct.store(out, index=(0,), tile=ct.full((1,), a.shape[0], ct.int64))
    ct.store(out, index=(1,), tile=ct.full((1,), a.strides[0], ct.int64))
    ct.store(out, index=(2,), tile=ct.full((1,), ct.num_tiles(a, 0, (TILE, 4)), ct.int64))


@ct.kernel
def gather_at(a, idx, out):
    i = ct.load(idx, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.gather(a, i, padding_value=-1))


def _rows(n_rows: int) -> np.ndarray:
    """A read-only (n_rows, 4) view whose every row is [1, 2, 3, 4] (stride 0)."""
    base = np.arange(1, 5, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(base, shape=(n_rows, 4), strides=(0, 4))


@pytest.mark.parametrize("off", [np.int64(2**32 + 1), 2**32 + 1, np.uint64(2**64 - 1),
                                 np.uint32(2**32 - 1), np.int64(-2**63), np.int64(2**62 + 3)],
                         ids=["int64", "pyint", "uint64max", "uint32max", "int64min", "int64big"])
def test_huge_tile_index_is_outside_not_wrapped(off):
    """`2**32 + 1` narrowed to int32 is 1: the load read a[256:512]."""
    a = np.arange(1024, dtype=np.float32) + 1
    out = np.full(256, -7, np.float32)
    ct.launch(None, (1,), load_at, (a, out, off, 256))
    np.testing.assert_array_equal(out, np.zeros(256, np.float32))


def test_small_index_still_loads():
    a = np.arange(1024, dtype=np.float32)
    out = np.zeros(256, np.float32)
    ct.launch(None, (1,), load_at, (a, out, np.int64(3), 256))
    np.testing.assert_array_equal(out, a[768:1024])


def test_index_dtypes_in_generated_code():
    """int32 indices keep a 32-bit multiply; 64-bit and uint32 ones a clamped one."""
    a, out = np.zeros(1024, np.float32), np.zeros(256, np.float32)
    narrow = ct.compile(load_at, (a, out, 3, 256), arch="sm_90").source
    assert re.search(r"const long long o0 = \(long long\)v\d+\.v\[0\] \* 256;", narrow)
    assert "tile_origin" not in narrow
    for off in (np.int64(3), np.uint32(3), np.uint64(3)):
        src = ct.compile(load_at, (a, out, off, 256), arch="sm_90").source
        assert "tc::tile_origin<256>(" in src


def test_wide_row_index_reads_the_right_row():
    a = _rows(BIG)
    for row, want in ((BIG - 1, [1, 2, 3, 4]), (2**31, [1, 2, 3, 4]),
                      (BIG, [-np.inf] * 4), (2**32 + BIG - 1, [-np.inf] * 4)):
        out = np.zeros((1, 4), np.float32)
        ct.launch(None, (1,), row_at, (a, out, np.int64(row)))
        np.testing.assert_array_equal(out[0], np.array(want, np.float32))


def test_wide_array_specialization():
    a = _rows(BIG)
    assert needs_wide_index(a.shape, (0, 1))
    assert not needs_wide_index((2**31 - 1, 4), (4, 1))
    assert needs_wide_index((2, 2), (2**31, 1)) and needs_wide_index((2, 2), (-2**31, 1))
    c = ct.compile(extents, (a, np.zeros(3, np.int64), 256), arch="sm_90")
    assert "long long arg0_dim0" in c.source and "array<float32, 2d, int64 index>" in c.ir
    small = ct.compile(extents, (np.zeros((8, 4), np.float32), np.zeros(3, np.int64), 256),
                       arch="sm_90")
    assert "int arg0_dim0" in small.source and "int64 index" not in small.ir


@pytest.mark.parametrize("rows", [BIG, 2**31 - 1, 2**31 - 256, 1000])
def test_extents_and_num_tiles_are_exact(rows):
    """num_tiles near the top of int32 used to overflow (dim + tile - 1)."""
    a = _rows(rows)
    out = np.zeros(3, np.int64)
    ct.launch(None, (1,), extents, (a, out, 256))
    np.testing.assert_array_equal(out, [rows, 0, -(-rows // 256)])


def test_wide_stride_attribute():
    base = np.zeros(8, np.float32)
    a = np.lib.stride_tricks.as_strided(base, shape=(1, 4), strides=(2**33, 4))
    out = np.zeros(3, np.int64)
    ct.launch(None, (1,), extents, (a, out, 1))
    np.testing.assert_array_equal(out, [1, 2**31, 1])


def test_gather_index_dtypes():
    """uint32 gather indices are widened to int64 (int32 would wrap 2**31 and up)."""
    a = np.arange(10, dtype=np.float32)
    for dtype in (np.int32, np.uint32, np.int64, np.uint64, np.int16, np.uint8):
        idx = np.array([0, 9, 3, 2], dtype)
        out = np.zeros(4, np.float32)
        ct.launch(None, (1,), gather_at, (a, idx, out))
        np.testing.assert_array_equal(out, a[idx.astype(np.int64)])
    for dtype, big in ((np.uint32, 2**32 - 1), (np.uint32, 2**31 + 3), (np.int64, 2**40),
                       (np.uint64, 2**64 - 1)):
        idx = np.array([big, 1, big, 0], dtype)
        out = np.zeros(4, np.float32)
        ct.launch(None, (1,), gather_at, (a, idx, out))
        np.testing.assert_array_equal(out, [-1, 1, -1, 0])
    src = ct.compile(gather_at, (a, np.zeros(4, np.uint32), np.zeros(4, np.float32)),
                     arch="sm_90").source
    assert "long long" in src and "Frag<long long, " in src


def test_wide_rows_gather():
    a = _rows(BIG)
    idx_rows = np.array([BIG - 1, 0, BIG, 2**31], np.int64)

    @ct.kernel
    def gather2(a, rows, out):
        r = ct.load(rows, index=(0,), shape=(4,))
        ct.store(out, index=(0,), tile=ct.gather(a, (r, ct.full((4,), 2, ct.int64)),
                                                 padding_value=-1))

    out = np.zeros(4, np.float32)
    ct.launch(None, (1,), gather2, (a, idx_rows, out))
    np.testing.assert_array_equal(out, [3, 3, -1, 3])


def test_compile_accepts_what_launch_accepts():
    from tilecore.runtime import DeviceArray
    from tilecore.language import dtypes as D
    a, out = np.zeros(1024, np.float32), np.zeros(256, np.float32)
    for off in (3, 2**40, np.int64(5), np.uint32(7), np.int8(1)):
        ct.compile(load_at, (a, out, off, 256), arch="sm_80")
    dev = DeviceArray(0x10000, (BIG, 4), (0, 1), D.float32, 0)
    c = ct.compile(row_at, (dev, DeviceArray(0x20000, (1, 4), (4, 1), D.float32, 0), 5),
                   arch="sm_90")
    assert "long long arg0_dim0" in c.source


# ---- the GPU, with real arrays of more than 2**31 elements --------------------------------------

@ct.kernel
def copy_tiles(a, b, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(b, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) + 1)


@ct.kernel
def last_tiles(a, b, first, TILE: ct.Constant[int]):
    i = first + ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(TILE,)) * 2)


@ct.kernel
def gather_scatter(a, b, idx):
    i = ct.load(idx, index=(0,), shape=(8,))
    ct.scatter(b, i, ct.gather(a, i) + 3)


@pytest.mark.gpu
def test_gpu_arrays_past_int32():
    cp = pytest.importorskip("cupy")
    n = 2**31 + 1000
    a = cp.arange(n, dtype=cp.int64).astype(cp.int8)          # a[i] = i mod 256 (wrapped)
    b = cp.zeros(n, cp.int8)
    tile = 4096
    first = (n - 3 * tile) // tile
    ct.launch(None, (4,), last_tiles, (a, b, first, tile))     # the last tiles, partial one too
    cp.cuda.Device().synchronize()
    lo = first * tile
    want = (cp.arange(lo, n, dtype=cp.int64) * 2).astype(cp.int8)
    assert bool(cp.all(b[lo:] == want)) and int(cp.count_nonzero(b[:lo])) == 0
    idx = cp.asarray([0, 2**31 - 1, 2**31, 2**31 + 1, n - 1, n - 2, 12345, 2**31 + 500],
                     dtype=cp.int64)
    c = cp.zeros(n, cp.int8)
    ct.launch(None, (1,), gather_scatter, (a, c, idx))
    cp.cuda.Device().synchronize()
    host_idx = cp.asnumpy(idx)
    got = cp.asnumpy(c[idx])
    np.testing.assert_array_equal(got, ((host_idx % 256) + 3).astype(np.int8))
    assert int(cp.count_nonzero(c)) == len(set(host_idx.tolist()))
    del a, b, c
    cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
def test_gpu_whole_copy_past_int32():
    cp = pytest.importorskip("cupy")
    n = 2**31 + 77
    a = cp.ones(n, cp.int8)
    b = cp.zeros(n, cp.int8)
    ct.launch(None, (ct.cdiv(n, 8192),), copy_tiles, (a, b, 8192))
    cp.cuda.Device().synchronize()
    assert int(cp.count_nonzero(b == 2)) == n
    del a, b
    cp.get_default_memory_pool().free_all_blocks()


def test_huge_constants_are_errors_not_raw_exceptions():
    @ct.kernel
    def dtype_of_huge(out, C: ct.Constant[int]):
        x = 2**70
        ct.store(out, index=(0,), tile=ct.full((1,), C, x.dtype))

    out = np.zeros(1, np.int64)
    with pytest.raises(ct.TileTypeError, match="Invalid constant"):
        ct.launch(None, (1,), dtype_of_huge, (out, 1))
    with pytest.raises(ct.TileError):   # a 5000-digit Constant: refused by the folder, not repr()
        ct.launch(None, (1,), dtype_of_huge, (out, 10**5000))
