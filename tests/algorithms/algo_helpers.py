"""Shared pieces of the algorithm tests: a small policy that makes the
interpreter run many tiny blocks (and keeps NVRTC's compile-only checks of
every launch cheap), and the host-path tests' launch recorder and call
counters."""
import contextlib

import numpy as np

from tilecore.dispatch import override_policy

SMALL = dict(block_threads=32, items_per_thread=2, blocks_per_sm=4, single_block_max_items=200,
             final_block_threads=32)
SMALL_TILE = SMALL["block_threads"] * SMALL["items_per_thread"]


@contextlib.contextmanager
def small():
    with override_policy("reduce", **SMALL):
        yield


class Recorder:
    """Stands in for tilecore.launch: records each launch, runs nothing."""

    def __init__(self):
        self.calls = []

    def __call__(self, stream, grid, kernel, args):
        self.calls.append((stream, tuple(grid), kernel, tuple(map(_fingerprint, args))))


def _fingerprint(a):
    if isinstance(a, np.ndarray):
        return ("array", a.__array_interface__["data"][0], a.shape, a.dtype.str)
    return a


def count_calls(monkeypatch, targets) -> dict:
    """Wrap each (module, attribute, name) of `targets` so that its calls are
    counted under `name`; returns the counts (every name starts at 0)."""
    counts = {name: 0 for _, _, name in targets}

    def wrap(name, fn):
        def counting(*a, **k):
            counts[name] += 1
            return fn(*a, **k)
        return counting
    for module, attr, name in targets:
        monkeypatch.setattr(module, attr, wrap(name, getattr(module, attr)))
    return counts


def run_keys(rng: np.random.Generator, n: int, max_run: int, dtype=np.int32) -> np.ndarray:
    """n keys 0, 0, 1, 1, 1, 2, ... in runs of rng.integers(1, max_run) items each.
    Draws only as many run lengths as n items need: a length for every item, cut to n
    afterwards, builds about n * max_run / 2 keys first (80 GB at 2^22 items, runs up
    to 5000: the host kills the process)."""
    lengths = np.zeros(0, np.int64)
    while lengths.sum() < n:
        more = max(16, 2 * (n - int(lengths.sum())) // max_run + 16)
        lengths = np.concatenate([lengths, rng.integers(1, max_run, more)])
    return np.repeat(np.arange(lengths.size), lengths)[:n].astype(dtype)
