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
