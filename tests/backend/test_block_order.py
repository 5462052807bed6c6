"""Block barriers between accesses of one array that map elements to threads
differently (ir/block_order.py): a tile program is sequential, so a load after
a store sees it and a store after a load does not change what it read, also
where other threads of the block did the other access. The suite's conftest
compiles each launch for sm_80 and sm_90 and, on a GPU, compares with the
interpreter."""
import numpy as np

import tilecore as ct


@ct.kernel
def shift_in_place(a, TILE: ct.Constant[int]):
    """Reads tile 0 then writes it shifted by one element: a write-after-read."""
    t = ct.load(a, index=(0,), shape=(TILE,))
    ct.store(a, index=(0,), tile=ct.full((TILE,), 0.0, ct.float32))
    ct.scatter(a, ct.arange(TILE, dtype=ct.int32) + 1, t)


@ct.kernel
def same_tile_update(a, TILE: ct.Constant[int]):
    """Load and store of the same tile: each thread keeps its own elements."""
    bid = ct.bid(0)
    ct.store(a, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) * 2)


@ct.kernel
def transpose_back(a, out, N: ct.Constant[int]):
    """Stores a tile, then loads it transposed (other threads' elements)."""
    ct.store(out, index=(0, 0), tile=ct.load(a, index=(0, 0), shape=(N, N)))
    t = ct.load(out, index=(0, 0), shape=(N, N), order=(1, 0))
    ct.store(a, index=(0, 0), tile=t)


@ct.kernel
def accumulate(a, out, TILE: ct.Constant[int]):
    """A loop that loads what it stored in the previous iteration at another index."""
    for i in range(4):
        prev = ct.load(out, index=(i,), shape=(TILE,))
        ct.store(out, index=(i + 1,), tile=prev + ct.load(a, index=(i,), shape=(TILE,)))


def _barriers(kernel, args):
    src = ct.compile(kernel, args, arch="sm_90").source
    return src.count("__syncthreads();  // the block's earlier accesses")


def test_write_after_read_through_another_mapping():
    a = np.arange(257, dtype=np.float32)
    ct.launch(None, (1,), shift_in_place, (a, 256))
    np.testing.assert_array_equal(a, np.concatenate([[0], np.arange(256)]).astype(np.float32))
    assert _barriers(shift_in_place, (a, 256)) == 2    # before the store and the scatter


def test_same_tile_needs_no_barrier():
    a = np.arange(1024, dtype=np.float32)
    ct.launch(None, (4,), same_tile_update, (a, 256))
    np.testing.assert_array_equal(a, 2 * np.arange(1024, dtype=np.float32))
    assert _barriers(same_tile_update, (a, 256)) == 0


def test_read_after_write_transposed():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 32)).astype(np.float32)
    want = a.T.copy()
    out = np.zeros_like(a)
    ct.launch(None, (1,), transpose_back, (a, out, 32))
    np.testing.assert_array_equal(a, want)
    assert _barriers(transpose_back, (a, out, 32)) >= 1


def test_loop_carried_read_after_write():
    a = np.ones(4 * 256, np.float32)
    out = np.zeros(5 * 256, np.float32)
    ct.launch(None, (1,), accumulate, (a, out, 256))
    np.testing.assert_array_equal(out.reshape(5, 256), np.arange(5)[:, None] * np.ones(256))
    assert _barriers(accumulate, (a, out, 256)) == 2   # the loop's load and store
