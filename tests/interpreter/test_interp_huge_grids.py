"""Huge grids in the interpreter: blocks are generated lazily in either order
(constant memory, the first block runs at once), the random order is a
permutation for every grid size, and Ctrl-C stops a long run promptly."""
import itertools
import signal
import threading
import time
import tracemalloc

import numpy as np
import pytest

import tilecore as ct
from tilecore.interpreter import block_order
from tilecore.interpreter.block_order import block_ids

HUGE = (2**31 - 1, 65535, 65535)  # the largest grid launch() accepts


def _linear(ids, grid):
    gx, gy, _ = grid
    return [x + gx * (y + gy * z) for x, y, z in ids]


@pytest.mark.parametrize("grid", [(1, 1, 1), (3, 2, 2), (5, 1, 3), (0, 4, 1), (4, 0, 0)])
def test_sequential_order_is_x_fastest(grid):
    ids = list(block_ids(grid, "sequential"))
    assert _linear(ids, grid) == list(range(grid[0] * grid[1] * grid[2]))
    assert all(0 <= b < g for bid in ids for b, g in zip(bid, grid))


@pytest.mark.parametrize("in_memory", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 16, 17, 1000, 4099])
def test_random_order_is_a_permutation(monkeypatch, n, in_memory):
    """Both shuffles (NumPy's, and the Feistel network used above
    SHUFFLE_IN_MEMORY blocks) visit every block exactly once."""
    monkeypatch.setattr(block_order, "SHUFFLE_IN_MEMORY", 1 << 30 if in_memory else 0)
    grid = (n, 1, 1)
    order = _linear(block_ids(grid, "random", seed=11), grid)
    assert sorted(order) == list(range(n))
    assert order == _linear(block_ids(grid, "random", seed=11), grid)  # seeded: reproducible
    if n >= 16:
        assert order != list(range(n))                                 # and shuffled
        assert order != _linear(block_ids(grid, "random", seed=12), grid)


def test_feistel_order_is_a_permutation_of_a_3d_grid(monkeypatch):
    monkeypatch.setattr(block_order, "SHUFFLE_IN_MEMORY", 0)
    grid = (7, 5, 3)
    ids = list(block_ids(grid, "random", seed=0))
    assert sorted(ids) == sorted(itertools.product(range(7), range(5), range(3)))


def test_feistel_order_looks_random(monkeypatch):
    """Not a stride walk: steps between consecutive blocks vary (an affine map
    (a*i + b) mod n would give one step throughout)."""
    monkeypatch.setattr(block_order, "SHUFFLE_IN_MEMORY", 0)
    order = _linear(block_ids((5000, 1, 1), "random", seed=5), (5000, 1, 1))
    steps = {(b - a) % 5000 for a, b in zip(order, order[1:])}
    assert len(steps) > 2500
    first_half = sum(1 for i in order[:2500] if i < 2500)            # well mixed
    assert 1000 < first_half < 1500


@pytest.mark.parametrize("order", ["sequential", "random"])
def test_huge_grid_starts_at_once_in_constant_memory(order):
    tracemalloc.start()
    try:
        start = time.perf_counter()
        first = list(itertools.islice(block_ids(HUGE, order, seed=1), 1000))
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0 and peak < 1 << 20, (elapsed, peak)
    assert len(set(first)) == 1000
    assert all(0 <= b < g for bid in first for b, g in zip(bid, HUGE))
    if order == "sequential":
        assert first[:3] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]


@ct.kernel
def busy(a, out, TILE: ct.Constant[int]):
    """Some NumPy work per block, stored into one of out's 16 tiles."""
    bid = ct.bid(0)
    t = ct.load(a, index=(0, 0), shape=(TILE, TILE), padding_mode=ct.PaddingMode.ZERO)
    s = ct.sum(ct.exp(t * 0.5) * t, axis=1) + bid
    ct.store(out, index=(bid % 16,), tile=s)


def _interrupted_after(seconds: float, launch) -> float:
    """Run `launch` with SIGINT raised after `seconds` (from a timer thread);
    expect KeyboardInterrupt; return the seconds from the signal to its arrival."""
    fired: list[float] = []

    def interrupt():
        fired.append(time.perf_counter())
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, interrupt)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            launch()
        stopped = time.perf_counter()
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert fired
    return stopped - fired[0]


@pytest.mark.interpreter_only
@pytest.mark.parametrize("order,grid", [("sequential", (2**31 - 1,)), ("random", HUGE)])
def test_ctrl_c_stops_a_huge_interpreter_launch(monkeypatch, order, grid):
    """SIGINT during a launch over a huge grid raises KeyboardInterrupt out of
    ct.launch within well under a second."""
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", order)
    a = np.random.default_rng(0).standard_normal((40, 40)).astype(np.float32)
    out = np.zeros(16 * 64, np.float32)
    ct.launch(None, (1,), busy, (a, out, 64))                      # build the IR up front
    out[:] = 0
    latency = _interrupted_after(0.5, lambda: ct.launch(None, grid, busy, (a, out, 64)))
    assert latency < 0.25, latency
    assert np.count_nonzero(out) > 64          # blocks ran before the interrupt


@ct.kernel
def long_loop(a, out, n):
    """One block looping (nearly) forever over NumPy work."""
    acc = ct.zeros((64,), ct.float32)
    for i in range(n):
        acc = acc + ct.exp(ct.load(a, index=(0,), shape=(64,), padding_mode=ct.PaddingMode.ZERO))
    ct.store(out, index=(0,), tile=acc)


@pytest.mark.interpreter_only
def test_ctrl_c_stops_a_long_loop_inside_one_block():
    a, out = np.zeros(64, np.float32), np.zeros(64, np.float32)
    ct.launch(None, (1,), long_loop, (a, out, 3))
    np.testing.assert_array_equal(out, np.full(64, 3.0, np.float32))
    latency = _interrupted_after(0.3, lambda: ct.launch(None, (1,), long_loop,
                                                         (a, out, 2**31 - 1)))
    assert latency < 0.25, latency
