"""The decoupled look-back scan sample (examples/lookback_scan.py) against
NumPy: in the interpreter (whose launches the suite also compiles for sm_80
and sm_90, and replays on a GPU when there is one), and on the GPU at the
sizes the issue names, int32 exactly (wrapping as int32 does) and float32
within the bound of any summation order."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecore as ct

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from lookback_scan import inclusive_scan, lookback_scan  # noqa: E402


def _expect_ok(x: np.ndarray, got: np.ndarray, tile: int = 8192) -> None:
    """int32: exact (wrapping). float32: item i's prefix is its tile's scan (at
    most 2 log2(tile) roundings deep) plus the exclusive prefix, a chain of at
    most i // tile additions, so its error is within (i // tile + 2 log2(tile)
    + 2) u sum(|x[:i+1]|), u = 2^-24: tight enough for positive data to catch a
    missing or doubled tile among the first few thousand tiles."""
    if x.dtype == np.int32:
        np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int64).astype(np.int32))
        return
    exact = np.cumsum(x.astype(np.float64))
    depth = np.arange(x.shape[0]) // tile + 2 * np.log2(tile) + 2
    bound = depth * 2.0 ** -24 * np.cumsum(np.abs(x.astype(np.float64)))
    assert (np.abs(got.astype(np.float64) - exact) <= bound).all()


def _sample(n: int, dtype, seed: int = 0, exact: bool = False) -> np.ndarray:
    """Random items; int32 large enough that the sums wrap. exact=True gives
    float32 integers whose sums are exact in any order: the suite replays each
    interpreter launch on a GPU and compares the status words bit for bit."""
    rng = np.random.default_rng(seed)
    if dtype == np.int32:
        return rng.integers(-2**30, 2**30, n).astype(np.int32)
    if exact:
        return rng.integers(-1000, 1000, n).astype(np.float32)
    return rng.random(n, np.float32)   # positive: the error bound is relative


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("n,tile,window", [(1, 32, 4), (31, 32, 4), (33, 32, 4),
                                           (32 * 4 * 3 + 5, 32, 4), (1025, 64, 8)])
def test_interpreter(n, tile, window, dtype):
    """Partial tiles, one tile, several look-back windows (the status array is
    padded to whole windows)."""
    x = _sample(n, dtype, n, exact=True)
    y = np.zeros_like(x)
    inclusive_scan(x, y, tile=tile, window=window)
    _expect_ok(x, y)


@pytest.mark.parametrize("blocks", [1, 2, 5, 1000])
def test_blocks_take_tiles_until_the_input_ends(blocks):
    """Any grid scans the whole input: one block taking all 29 tiles, a few
    taking turns, more blocks than tiles (those take one ticket past the tiles
    and end); the ticket word starts the next epoch after every scan."""
    from lookback_scan import Scanner
    scan = Scanner(29 * 32 - 3, tile=32, window=4, blocks=blocks)
    for i in range(2):
        x = _sample(29 * 32 - 3, np.int32, 40 + i)
        y = np.zeros_like(x)
        scan(x, y)
        _expect_ok(x, y)
        assert scan.ticket[0] == (i + 1) << 32
    with pytest.raises(ValueError, match='"blocks": expected an integer of at least 1, got 0'):
        Scanner(100, blocks=0)
    with pytest.raises(ValueError, match='"blocks": expected an integer of at least 1, got 2.5'):
        Scanner(100, blocks=2.5)
    for kw, got in ((dict(tile=100), "100"), (dict(window=3), "3"),
                    (dict(items_per_thread=0), "0")):
        name = next(iter(kw))
        with pytest.raises(ValueError, match=f'"{name}": expected a power of two, got {got}'):
            Scanner(100, **kw)


def test_items_per_thread_sets_the_block_and_not_the_result():
    """The same tile over fewer threads (more items each) scans the same."""
    from lookback_scan import Scanner, scan_kernel
    assert scan_kernel(32768, 64).options.num_threads == 512
    x = _sample(700, np.int32, 7)
    y = np.zeros_like(x)
    Scanner(700, tile=64, window=4, items_per_thread=2)(x, y)
    _expect_ok(x, y)


def test_prefix_published_for_every_tile():
    """After the scan every status word says PREFIX with this launch's epoch and
    holds the inclusive prefix of its tile in its low 32 bits; padding words are
    untouched; the ticket word starts the next epoch with no tickets taken."""
    from lookback_scan import PREFIX
    x = _sample(7 * 16 + 3, np.int32, 4)
    tiles, window = 8, 4
    ticket, status = np.array([5 << 32], np.int64), np.zeros(window * 3, np.int64)
    y = np.zeros_like(x)
    ct.launch(None, (tiles,), lookback_scan, (x, y, ticket, status, 16, window))
    assert ticket[0] == 6 << 32
    np.testing.assert_array_equal(status[:tiles] >> 32, (5 << 2) | PREFIX)
    np.testing.assert_array_equal(status[tiles:], 0)
    ends = np.minimum(np.arange(1, tiles + 1) * 16, x.shape[0]) - 1
    want = np.cumsum(x, dtype=np.int64)[ends].astype(np.int32)
    np.testing.assert_array_equal((status[:tiles] & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
                                  want)


def test_earlier_scans_status_words_are_ignored():
    """One scanner, many scans with no clearing in between: every earlier scan's
    status words say PREFIX (with values that would be wrong now) and must read
    as unpublished; sizes shrink and grow so some words are two epochs old; the
    epoch wraps after 2^29 scans."""
    from lookback_scan import EPOCH_MASK, Scanner
    scan = Scanner(40 * 32, tile=32, window=4)
    for i, n in enumerate([40 * 32, 7 * 32 + 1, 40 * 32 - 3, 1, 33, 40 * 32]):
        x = _sample(n, np.int32, 10 + i)
        y = np.zeros_like(x)
        scan(x, y)
        _expect_ok(x, y)
        assert scan.ticket[0] == (i + 1) << 32
    scan.ticket[0] = EPOCH_MASK << 32          # the last epoch before the wrap
    x = _sample(40 * 32, np.int32, 30)
    y = np.zeros_like(x)
    scan(x, y)
    _expect_ok(x, y)
    assert scan.ticket[0] == 0
    with pytest.raises(ValueError, match='"x": expected at most 1280 items'):
        scan(np.zeros(40 * 32 + 1, np.int32), np.zeros(40 * 32 + 1, np.int32))
    y = np.full(40, 5, np.int32)
    with pytest.raises(ValueError, match=r'"y": expected the shape of x, \(33,\), got \(40,\)'):
        scan(np.zeros(33, np.int32), y)
    assert (y == 5).all()
    with pytest.raises(TypeError, match='"y": expected the dtype of x, a 32-bit type '
                                        r'\(int32\), got float32'):
        scan(np.zeros(33, np.int32), np.zeros(33, np.float32))
    with pytest.raises(TypeError, match=r'a 32-bit type \(int64\), got int64'):
        scan(np.zeros(33, np.int64), np.zeros(33, np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("n", [1, 2**10 + 1, 2**20 + 7, 2**27])
def test_gpu(n, dtype):
    cp = pytest.importorskip("cupy")
    x = _sample(n, dtype, 7)
    y = cp.zeros(n, dtype)
    inclusive_scan(cp.asarray(x), y, alloc=cp.zeros)
    _expect_ok(x, cp.asnumpy(y))


@pytest.mark.gpu
@pytest.mark.parametrize("blocks", [1, 3, 264, 5000])
def test_gpu_any_grid(blocks):
    """2^22 + 3 int32 items in 1024-item tiles (4097 tiles) by one block, by 3, by
    about the resident blocks and by more blocks than tiles: exact."""
    cp = pytest.importorskip("cupy")
    x = _sample(2**22 + 3, np.int32, 9)
    y = cp.zeros(x.shape[0], cp.int32)
    inclusive_scan(cp.asarray(x), y, tile=1024, alloc=cp.zeros, blocks=blocks)
    _expect_ok(x, cp.asnumpy(y))


@pytest.mark.gpu
def test_gpu_many_runs_agree_exactly():
    """int32 sums are exact, so however the look-backs interleave every run gives
    the same output: 20 runs over 2^22 + 3 items with 1024-item tiles (4097
    tiles, many look-backs through windows of aggregates)."""
    cp = pytest.importorskip("cupy")
    x = _sample(2**22 + 3, np.int32, 8)
    want = np.cumsum(x, dtype=np.int64).astype(np.int32)
    xd = cp.asarray(x)
    for _ in range(20):
        y = cp.zeros_like(xd)
        inclusive_scan(xd, y, tile=1024, alloc=cp.zeros)
        np.testing.assert_array_equal(cp.asnumpy(y), want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_gpu_one_scanner_many_scans_and_graph_replay(dtype):
    """One Scanner (scratch zeroed once) over 30 scans of changing sizes, then the
    scan captured in a CUDA graph and replayed with new data in the same buffers:
    each result is right (the epoch, in device memory, advances on every launch)."""
    cp = pytest.importorskip("cupy")
    from lookback_scan import Scanner
    n_max = 2**22 + 5
    scan = Scanner(n_max, tile=4096, alloc=cp.zeros)
    rng = np.random.default_rng(12)
    for i in range(30):
        n = int(rng.integers(1, n_max + 1)) if i % 3 else n_max
        x = _sample(n, dtype, 100 + i)
        y = cp.zeros(n, dtype)
        scan(cp.asarray(x), y)
        _expect_ok(x, cp.asnumpy(y), tile=4096)
    xd, yd = cp.zeros(n_max, dtype), cp.zeros(n_max, dtype)
    stream = cp.cuda.Stream(non_blocking=True)
    scan(xd, yd, stream=stream)                # loaded outside the capture
    stream.synchronize()
    stream.begin_capture()
    scan(xd, yd, stream=stream)
    graph = stream.end_capture()
    for i in range(5):
        x = _sample(n_max, dtype, 200 + i)
        xd.set(x, stream=stream)
        graph.launch(stream)
        stream.synchronize()
        _expect_ok(x, cp.asnumpy(yd), tile=4096)
