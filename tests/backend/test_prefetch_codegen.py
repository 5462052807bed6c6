"""CUDA code of ct.prefetch (an L2 hint): on sm_90 one bulk prefetch per
contiguous row (cp.async.bulk.prefetch.L2.global), its rows spread over the
threads; on sm_80, for short rows and for strided rows, 128-byte line
prefetches (prefetch.global.L2), each line once; checked in the generated
source and in the PTX NVRTC makes of it. And what the passes do with a
prefetch: they keep it, it orders nothing (no block barrier, loads move above
it), it is no write of its array (the pointer stays const), no read for the
streaming heuristic, no access that stops atomics from being privatized. The
GPU test at the end runs prefetching kernels on the device against NumPy."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.ir.block_reuse import streams
from tilecore.ir.effects import written_params

from test_dependent_launch import _ptx

BULK, LINE, ELEM = "tc::prefetch_l2_bulk(", "tc::prefetch_l2_line(", "tc::prefetch_l2(q)"
RNG = np.random.default_rng(5)


@ct.kernel
def copy_ahead(x, y, TILE: ct.Constant[int]):
    """y = x; each block prefetches the tile two after its own first."""
    bid = ct.bid(0)
    ct.prefetch(x, (bid + 2,), (TILE,))
    ct.store(y, (bid,), ct.load(x, (bid,), (TILE,), padding_mode=ct.PaddingMode.ZERO))


@ct.kernel
def copy2d(x, y, TM: ct.Constant[int], TN: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    x.tiled_view((TM, TN)).prefetch((i, j + 1))
    ct.store(y, (i, j), ct.load(x, (i, j), (TM, TN), padding_mode=ct.PaddingMode.ZERO))


def _source(kernel, args, arch):
    return ct.compile(kernel, args, arch=arch).source


def _prefetch_code(source: str) -> str:
    """The C++ of the kernel's (first) prefetch op."""
    start = source.index(": prefetch\n")
    return source[start:source.index("\n  //", start)]


def _1d(n=3 * 8192 + 5):
    x = RNG.standard_normal(n).astype(np.float32)
    return x, np.zeros_like(x), 8192


def test_sm90_one_bulk_prefetch_per_row():
    src = _source(copy_ahead, _1d(), "sm_90")
    code = _prefetch_code(src)
    assert '#include "tilecore/prefetch.cuh"' in src
    assert "const long long o0 = (long long)" in code and " * 8192;" in code  # 64-bit
    assert "if (p < 1) {" in code  # a 1-D tile is one row: thread 0
    assert f"{BULK}arg0 + (lo), arg0 + (hi));" in code and LINE not in code
    ptx = _ptx(src, "sm_90")
    assert ptx.count("cp.async.bulk.prefetch.L2.global") == 1
    assert "prefetch.global.L2 " not in ptx


def test_sm80_line_prefetches_over_the_threads():
    src = _source(copy_ahead, _1d(), "sm_80")
    code = _prefetch_code(src)
    assert "if (p < 257) {" in code and "const int j = p % 257;" in code  # 32 KB: 257 lines
    assert f"{LINE}arg0 + (lo), arg0 + (hi), j);" in code and BULK not in code
    ptx = _ptx(src, "sm_80")
    assert "prefetch.global.L2 " in ptx and "cp.async.bulk" not in ptx


def test_bounds_of_the_row():
    """Only the part of the row inside the array: [max(o, 0), min(o + n, dim))."""
    code = _prefetch_code(_source(copy_ahead, _1d(), "sm_90"))
    assert "const long long lo = o0 > 0 ? o0 : 0;" in code
    assert "const long long hi = o0 + 8192 < arg0_dim0 ? o0 + 8192 : (long long)arg0_dim0;" \
        in code
    assert "if (lo < hi) " in code


@pytest.mark.parametrize("arch,call", [("sm_90", BULK), ("sm_80", LINE)])
def test_2d_rows_spread_over_the_threads(arch, call):
    x = RNG.standard_normal((100, 300)).astype(np.float32)
    args = (x, np.zeros_like(x), 64, 64)
    ck = ct.compile(copy2d, args, arch=arch)
    code = _prefetch_code(ck.source)
    assert call in code and "c0 * arg0_stride0 + lo" in code
    assert "c0 >= 0 && c0 < arg0_dim0 && lo < hi" in code
    rows = 64 * (1 if call == BULK else 3)  # 256-byte rows touch up to 3 lines
    threads = ck.block_threads
    assert (f"for (int k = 0; k < {rows // threads}; ++k)" in code) == (rows > threads)


def test_short_rows_take_line_prefetches_on_sm90():
    """A bulk prefetch keeps a row's 16-byte aligned interior: rows under 128
    bytes take lines instead."""
    x = RNG.standard_normal((100, 300)).astype(np.float32)
    code = _prefetch_code(_source(copy2d, (x, np.zeros_like(x), 64, 16), "sm_90"))
    assert LINE in code and BULK not in code
    code = _prefetch_code(_source(copy2d, (x, np.zeros_like(x), 64, 32), "sm_90"))
    assert BULK in code


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_strided_rows_prefetch_each_line_once(arch):
    base = RNG.standard_normal((100, 600)).astype(np.float32)
    x = base[:, ::2]
    src = _source(copy2d, (x, np.zeros(x.shape, np.float32), 16, 64), arch)
    code = _prefetch_code(src)
    assert ELEM in code and BULK not in code and LINE not in code
    # an element is prefetched unless the one before it along the row shares its line
    assert "if (c1 == o1 || c1 == 0 || !tc::same_line(q, arg0_stride1)) tc::prefetch_l2(q);" \
        in code
    ptx = _ptx(src, arch)
    assert "prefetch.global.L2 " in ptx and "cp.async.bulk" not in ptx


def test_transposed_tile_dedups_along_the_array_rows():
    """order="F" on a C-contiguous array: the tile's rows are strided, its
    columns contiguous; lines are told apart along the array's last axis."""
    @ct.kernel
    def transposed(x, y):
        ct.prefetch(x, (0, 0), (64, 8), order="F")
        ct.store(y, (0, 0), ct.load(x, (0, 0), (8, 64)))

    x = np.zeros((8, 64), np.float32)
    code = _prefetch_code(_source(transposed, (x, np.zeros_like(x)), "sm_90"))
    assert "!tc::same_line(q, 1)" in code and "c0 == o0 || c0 == 0" in code


def test_wide_arrays_and_indices_are_64_bit():
    base = np.arange(1, 5, dtype=np.float32)
    x = np.lib.stride_tricks.as_strided(base, shape=(2**31 + 5, 4), strides=(0, 4),
                                        writeable=False)

    @ct.kernel
    def at(x, y, row):
        ct.prefetch(x, (row, 0), (256, 4))
        ct.store(y, (0, 0), ct.load(x, (row, 0), (1, 4)))

    for arch in ("sm_80", "sm_90"):
        src = _source(at, (x, np.zeros((1, 4), np.float32), np.int64(2**31)), arch)
        code = _prefetch_code(src)
        assert "long long arg0_dim0" in src and "tc::tile_origin<256>(" in code


# --- the passes --------------------------------------------------------------------------------
@ct.kernel
def prefetch_only(x, y, z, TILE: ct.Constant[int]):
    """z is only prefetched."""
    bid = ct.bid(0)
    ct.prefetch(z, (bid,), (TILE,))
    ct.store(y, (bid,), ct.load(x, (bid,), (TILE,)))


def test_prefetch_is_no_write():
    x, y, z = np.ones(64, np.float32), np.zeros(64, np.float32), np.ones(64, np.float32)
    ct.launch(None, (2,), prefetch_only, (x, y, z, 32))
    np.testing.assert_array_equal(y, x)
    (fn,) = prefetch_only._ir.values()
    assert written_params(fn) == {1}
    src = _source(prefetch_only, (x, y, z, 32), "sm_90")
    assert "const float* __restrict__ arg2" in src


@ct.kernel
def plain_copy(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, (bid,), ct.load(x, (bid,), (TILE,), padding_mode=ct.PaddingMode.ZERO))


@ct.kernel
def scale_in_place(x, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.prefetch(x, (bid + 1,), (TILE,))
    ct.store(x, (bid,), 2 * ct.load(x, (bid,), (TILE,), padding_mode=ct.PaddingMode.ZERO))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_prefetched_read_only_arrays_keep_the_read_only_path(arch):
    """A prefetch hands the array's address to inline asm, after which NVVM no
    longer proves its `const __restrict__` loads read-only (ld.global.v4, not
    .nc): the vector loads of an array a kernel prefetches and never writes go
    through __ldg. Without a prefetch NVVM finds .nc itself (no __ldg needed);
    an array the kernel writes never takes it."""
    x, y, tile = _1d(4 * 8192)
    ahead = _source(copy_ahead, (x, y, tile), arch)
    assert "__ldg(reinterpret_cast<const uint4*>(arg0 + " in ahead
    assert "ld.global.nc.v4" in _ptx(ahead, arch)
    plain = _source(plain_copy, (x, y, tile), arch)
    assert "__ldg(" not in plain and "ld.global.nc.v4" in _ptx(plain, arch)
    written = _source(scale_in_place, (x, tile), arch)
    assert "__ldg(" not in written and ".nc" not in _ptx(written, arch)


def test_read_only_path_kernels_on_the_interpreter():
    """The kernels above compute what they say (NumPy), partial last tile included."""
    x, y, tile = _1d()
    ct.launch(None, (-(-x.size // tile),), plain_copy, (x, y, tile))
    np.testing.assert_array_equal(y, x)
    z = x.copy()
    ct.launch(None, (-(-z.size // tile),), scale_in_place, (z, tile))
    np.testing.assert_array_equal(z, 2 * x)


@ct.kernel
def around_writes(a, ON: ct.Constant[bool]):
    """Load, store, transposed reload and store of one tile: a block barrier
    before each access but the first, whether prefetches sit between them or
    not."""
    t = ct.load(a, (0, 0), (16, 16))
    if ON:
        ct.prefetch(a, (0, 0), (8, 32), order="F")
    ct.store(a, (0, 0), t.T + 1)
    if ON:
        ct.prefetch(a, (0, 0), (16, 16))
    ct.store(a, (0, 0), ct.load(a, (0, 0), (16, 16), order="F"))


def test_prefetch_needs_and_gives_no_barrier():
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    counts = []
    for on in (False, True):
        b = a.copy()
        ct.launch(None, (1,), around_writes, (b, on))
        np.testing.assert_array_equal(b, a + 1)
        src = _source(around_writes, (b, on), "sm_90")
        counts.append(src.count("__syncthreads();  // the block's earlier accesses"))
        if on:
            for code in src.split(": prefetch\n")[1:]:
                assert "__syncthreads" not in code[:code.index("\n  //")]
    assert counts[0] == counts[1] == 3


@ct.kernel
def prefetch_then_load(x, y):
    bid = ct.bid(0)
    ct.prefetch(x, (bid + 2,), (64,))
    ct.store(y, (bid,), ct.load(x, (bid,), (64,)))


def test_loads_move_above_a_prefetch_which_stays():
    x = RNG.standard_normal(3 * 64).astype(np.float32)
    y = np.zeros_like(x)
    ct.launch(None, (3,), prefetch_then_load, (x, y))
    np.testing.assert_array_equal(y, x)
    (fn,) = prefetch_then_load._ir.values()
    names = [op.name for op in fn.body.ops]
    assert names.count("prefetch") == 1
    assert names.index("load") < names.index("prefetch")  # the load is issued first


@ct.kernel
def stream_with_shared_prefetch(x, w, y, TILE: ct.Constant[int]):
    """Streams: every block prefetches tile 0 of w, which no load reads."""
    bid = ct.bid(0)
    ct.prefetch(w, (0,), (TILE,))
    ct.store(y, (bid,), ct.load(x, (bid,), (TILE,)))


def test_prefetch_is_no_read_for_streaming():
    x = RNG.standard_normal(64).astype(np.float32)
    y = np.zeros_like(x)
    ct.launch(None, (2,), stream_with_shared_prefetch, (x, x.copy(), y, 32))
    np.testing.assert_array_equal(y, x)
    (fn,) = stream_with_shared_prefetch._ir.values()
    assert streams(fn)


@ct.kernel
def histogram(samples, bins, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.prefetch(bins, (0,), (256,))
    x = ct.load(samples, (bid,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    inside = bid * TILE + ct.arange(TILE, dtype=ct.int32) < samples.shape[0]
    ct.atomic_add(bins, x, ct.where(inside, 1, 0), memory_order=ct.MemoryOrder.RELAXED)


def test_prefetch_keeps_atomics_private():
    samples = RNG.integers(0, 256, 1000).astype(np.uint8)
    bins = np.zeros(256, np.int32)
    ct.launch(None, (4,), histogram, (samples, bins, 256))
    np.testing.assert_array_equal(bins, np.bincount(samples, minlength=256))
    assert "tc::private_update<" in _source(histogram, (samples, bins, 256), "sm_90")


# --- on the GPU ---------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_prefetching_kernels_match_numpy():
    cp = pytest.importorskip("cupy")
    n = 5 * 8192 + 123
    x = RNG.standard_normal(n).astype(np.float32)
    dx, dy = cp.asarray(x), cp.full(n, cp.nan, cp.float32)
    ct.launch(None, (ct.cdiv(n, 8192),), copy_ahead, (dx, dy, 8192))
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(dy), x)
    base = RNG.standard_normal((100, 600)).astype(np.float32)
    for view in (lambda a: a, lambda a: a[:, ::2], lambda a: a[::-1, 1:]):
        src = view(cp.asarray(base))
        out = cp.zeros(src.shape, cp.float32)
        grid = (ct.cdiv(src.shape[0], 16), ct.cdiv(src.shape[1], 64))
        ct.launch(None, grid, copy2d, (src, out, 16, 64))
        cp.cuda.Device().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(out), view(base))
