"""Shared pieces of the algorithm tests: a small policy that makes the
interpreter run many tiny blocks (and keeps NVRTC's compile-only checks of
every launch cheap)."""
import contextlib

from tilecore.dispatch import override_policy

SMALL = dict(block_threads=32, items_per_thread=2, blocks_per_sm=4, single_block_max_items=200,
             final_block_threads=32)
SMALL_TILE = SMALL["block_threads"] * SMALL["items_per_thread"]


@contextlib.contextmanager
def small():
    with override_policy("reduce", **SMALL):
        yield
