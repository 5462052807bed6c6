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


def _expect_ok(x: np.ndarray, got: np.ndarray, tile: int = 32768) -> None:
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


def test_prefix_published_for_every_tile():
    """After the scan every status word says PREFIX and holds the inclusive
    prefix of its tile in its low 32 bits; padding words are untouched."""
    from lookback_scan import PREFIX, init_status
    x = _sample(7 * 16 + 3, np.int32, 4)
    tiles, window = 8, 4
    counter, status = np.zeros(1, np.int32), np.full(window * 2, 5, np.int64)
    y = np.zeros_like(x)
    ct.launch(None, (2,), init_status, (counter, status, window))
    assert not status.any()
    ct.launch(None, (tiles,), lookback_scan, (x, y, counter, status, 16, window))
    assert counter[0] == tiles
    np.testing.assert_array_equal(status[:tiles] >> 32, PREFIX)
    np.testing.assert_array_equal(status[tiles:], 0)
    ends = np.minimum(np.arange(1, tiles + 1) * 16, x.shape[0]) - 1
    want = np.cumsum(x, dtype=np.int64)[ends].astype(np.int32)
    np.testing.assert_array_equal((status[:tiles] & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
                                  want)


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
