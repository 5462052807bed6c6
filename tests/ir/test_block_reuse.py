"""Which kernels stream (each block reads data no other block reads), the
analysis that picks the L1/shared-memory split at launch. Each kernel also
runs against NumPy, so that the access pattern named is the one it has."""
import numpy as np

import tilecore as ct
from tilecore.ir.block_reuse import streams
from tilecore.samples import tile_sum

T = 8
RNG = np.random.default_rng(7)


def _streams(kernel) -> bool:
    (fn,) = kernel._ir.values()
    return streams(fn)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@ct.kernel
def add(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(TILE,)) +
             ct.load(b, index=(i,), shape=(TILE,)))


def test_elementwise_add_streams():
    a, b = _f32(3 * T + 3), _f32(3 * T + 3)
    c = np.zeros_like(a)
    ct.launch(None, (4,), add, (a, b, c, T))
    np.testing.assert_array_equal(c, a + b)
    assert _streams(add)
    assert ct.compile(add, (a, b, c, T)).streams


@ct.kernel
def scale_rows(x, w, y, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N))
    ct.store(y, index=(row, 0), tile=t * ct.load(w, index=(0,), shape=(N,)))


def test_block_invariant_load_is_reuse():
    """Every block reads all of w (layer-norm's weight): not streaming."""
    x, w = _f32(5, T), _f32(T)
    y = np.zeros_like(x)
    ct.launch(None, (5,), scale_rows, (x, w, y, T))
    np.testing.assert_allclose(y, x.astype(np.float64) * w, rtol=1e-6)
    assert not _streams(scale_rows)
    assert not ct.compile(scale_rows, (x, w, y, T)).streams


@ct.kernel
def row_sums(x, out, TILE: ct.Constant[int]):
    row = ct.bid(0)
    acc = ct.zeros((1, TILE), dtype=ct.float32)
    for k in range(ct.num_tiles(x, 1, (1, TILE))):
        acc += ct.load(x, index=(row, k), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(row,), tile=ct.reshape(ct.sum(acc, axis=1), (1,)))


def test_loop_over_a_row_streams():
    x = _f32(3, 3 * T + 5)
    out = np.zeros(3, np.float32)
    ct.launch(None, (3,), row_sums, (x, out, T))
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5)
    assert _streams(row_sums)


def test_kernel_without_block_index_is_not_streaming():
    x = _f32(2 * T + 1)
    out = np.zeros(1, np.float32)
    total = ct.kernel(tile_sum.pyfunc)  # the sample, with IR of its own
    ct.launch(None, (1,), total, (x, out, T))
    np.testing.assert_allclose(out, [x.astype(np.float64).sum()], rtol=1e-5)
    assert not _streams(total)


@ct.kernel
def blocked_product(a, b, c, TILE: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TILE, TILE), dtype=ct.float32)
    for k in range(ct.num_tiles(a, 1, (TILE, TILE))):
        acc += ct.load(a, index=(i, k), shape=(TILE, TILE)) * \
            ct.load(b, index=(k, j), shape=(TILE, TILE))
    ct.store(c, index=(i, j), tile=acc)


def test_tile_read_by_a_row_of_blocks_is_reuse():
    """a's tile (i, k) is read by every block of row i: not streaming."""
    a, b = _f32(2 * T, 3 * T), _f32(3 * T, 2 * T)
    c = np.zeros((2 * T, 2 * T), np.float32)
    ct.launch(None, (2, 2), blocked_product, (a, b, c, T))
    ref = np.zeros((2 * T, 2 * T))
    for i in range(2):
        for j in range(2):
            for k in range(3):
                ref[i * T:(i + 1) * T, j * T:(j + 1) * T] += \
                    a[i * T:(i + 1) * T, k * T:(k + 1) * T].astype(np.float64) * \
                    b[k * T:(k + 1) * T, j * T:(j + 1) * T]
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)
    assert not _streams(blocked_product)


@ct.kernel
def add_2d(a, b, c, TILE: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    ct.store(c, index=(i, j), tile=ct.load(a, index=(i, j), shape=(TILE, TILE)) +
             ct.load(b, index=(i, j), shape=(TILE, TILE)))


def test_two_dimensional_grid_indexed_by_both_streams():
    a, b = _f32(2 * T, 3 * T), _f32(2 * T, 3 * T)
    c = np.zeros_like(a)
    ct.launch(None, (2, 3), add_2d, (a, b, c, T))
    np.testing.assert_array_equal(c, a + b)
    assert _streams(add_2d)


@ct.kernel
def persistent_rows(x, y, N: ct.Constant[int]):
    for row in range(ct.bid(0), x.shape[0], ct.num_blocks(0)):
        t = ct.load(x, index=(row, 0), shape=(1, N))
        ct.store(y, index=(row, 0), tile=t * 2.0)


def test_persistent_loop_from_block_index_streams():
    x = _f32(7, T)
    y = np.zeros_like(x)
    ct.launch(None, (3,), persistent_rows, (x, y, T))
    np.testing.assert_array_equal(y, x * 2)
    assert _streams(persistent_rows)


@ct.kernel
def carried_from_block(x, out, TILE: ct.Constant[int]):
    i = ct.bid(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for _ in range(2):
        acc += ct.load(x, index=(i,), shape=(TILE,))
        i = i + ct.num_blocks(0)
    ct.store(out, index=(ct.bid(0),), tile=acc)


@ct.kernel
def carried_from_zero(x, out, TILE: ct.Constant[int]):
    i = 0
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for _ in range(2):
        acc += ct.load(x, index=(i,), shape=(TILE,))
        i = i + 1
    ct.store(out, index=(ct.bid(0),), tile=acc)


def test_loop_carried_index_follows_its_origin():
    x = _f32(4 * T)
    out = np.zeros(2 * T, np.float32)
    ct.launch(None, (2,), carried_from_block, (x, out, T))
    x64 = x.astype(np.float64).reshape(4, T)
    np.testing.assert_allclose(out.reshape(2, T), x64[:2] + x64[2:], rtol=1e-6)
    assert _streams(carried_from_block)
    ct.launch(None, (2,), carried_from_zero, (x, out, T))
    np.testing.assert_allclose(out.reshape(2, T), np.tile(x64[0] + x64[1], (2, 1)), rtol=1e-6)
    assert not _streams(carried_from_zero)


@ct.kernel
def strided_while(x, out, TILE: ct.Constant[int]):
    i = ct.bid(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    while True:
        if i >= ct.num_tiles(x, 0, (TILE,)):
            break
        acc += ct.load(x, index=(i,), shape=(TILE,))
        i = i + ct.num_blocks(0)
    ct.store(out, index=(ct.bid(0),), tile=acc)


@ct.kernel
def restarted_while(x, out, TILE: ct.Constant[int]):
    i = ct.bid(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    while True:
        acc += ct.load(x, index=(i,), shape=(TILE,))
        if i >= 1:
            break
        i = 1  # the next round reads tile 1, whatever the block
    ct.store(out, index=(ct.bid(0),), tile=acc)


def test_while_loop_carried_index():
    """Carried through a while loop: from the block index it streams; once
    overwritten by a constant on some path, every block also reads that tile."""
    x = _f32(5 * T)
    x64 = x.astype(np.float64).reshape(5, T)
    out = np.zeros(2 * T, np.float32)
    ct.launch(None, (2,), strided_while, (x, out, T))
    np.testing.assert_allclose(out.reshape(2, T), [x64[0] + x64[2] + x64[4], x64[1] + x64[3]],
                               rtol=1e-6)
    assert _streams(strided_while)
    ct.launch(None, (2,), restarted_while, (x, out, T))
    np.testing.assert_allclose(out.reshape(2, T), [x64[0] + x64[1], x64[1]], rtol=1e-6)
    assert not _streams(restarted_while)


@ct.kernel
def branch_index(x, out, TILE: ct.Constant[int], SHARED: ct.Constant[bool]):
    b = ct.bid(0)
    if b % 2 == 0:
        i = 2 * b
    elif SHARED:
        i = 1
    else:
        i = 2 * b + 1
    ct.store(out, index=(b,), tile=ct.load(x, index=(i,), shape=(TILE,)))


def test_if_results_depend_on_what_every_branch_yields():
    x = _f32(6 * T)
    x64 = x.reshape(6, T)
    out = np.zeros(3 * T, np.float32)
    ct.launch(None, (3,), branch_index, (x, out, T, False))
    np.testing.assert_array_equal(out.reshape(3, T), x64[[0, 3, 4]])
    assert _streams(branch_index)
    branch_index._ir.clear()
    ct.launch(None, (3,), branch_index, (x, out, T, True))
    np.testing.assert_array_equal(out.reshape(3, T), x64[[0, 1, 4]])
    assert not _streams(branch_index)


@ct.kernel
def reverse(src, dst, TILE: ct.Constant[int]):
    idx = ct.bid(0) * TILE + ct.arange(TILE, dtype=ct.int32)
    ct.scatter(dst, idx, ct.gather(src, src.shape[0] - 1 - idx, padding_value=0.0))


def test_gather_is_not_streaming():
    src = _f32(3 * T)
    dst = np.zeros_like(src)
    ct.launch(None, (3,), reverse, (src, dst, T))
    np.testing.assert_array_equal(dst, src[::-1])
    assert not _streams(reverse)
