"""DeviceScan's policy hub: the built-in policy per minimum architecture,
refined by the tuning tables (`tuning_db/scan/sm_XY.yaml`) and by
`override_policy("scan", ...)`.

The tuning key: value_size (bytes per input item), accum (accumulator dtype
name), op (operator class), offset_size (4, or 8 from 2**31 items) and by_key.

Modes (`mode` for operators whose results depend on the association, i.e.
float sums and products and user operators; `exact_mode` for exact ones:
integer add/mul/and/or/xor and min/max of any dtype, by key too):
0 single pass, Fenwick look-back; 1 reduce-then-scan; 2 decoupled look-back
(exact operators only: it folds whatever its predecessors have published);
3 single pass, two-level look-back over aligned groups of `group_tiles` tiles
(widened to fit; `group_sqrt` 1: about sqrt(tiles) tiles);
4 decoupled look-back folded left to right from the newest complete prefix
(any operator: a left fold from any earlier inclusive prefix is the same bits).
All are deterministic for the operators they run (scan_kernels.py).
Modes 2 and 3 with `load_ahead` 1 run about the resident blocks (at most sm_count *
blocks_per_sm), each taking tiles until the input ends and loading its next
tile (publishing that tile's aggregate) before it looks back for the one it
holds, the tile after next prefetched into L2 (scan_kernels.scan_ahead); 0:
one tile a block.
Inputs of at most `one_launch_max_items` items, not in place (by key too),
run in one launch of scan_recompute (its own tile: one_launch_block_threads x
one_launch_items_per_thread), whose blocks fold the items before their tiles
themselves instead of a launch clearing status words first: a small input's
time is its launches'.
"""
from __future__ import annotations

from dataclasses import dataclass

from .hub import select_policy

__all__ = ["ScanPolicy", "select_scan_policy", "MODE_SINGLE_PASS", "MODE_REDUCE_THEN_SCAN",
           "MODE_LOOKBACK", "MODE_GROUPS", "MODE_ORDERED", "MODE_FENWICK"]

MODE_SINGLE_PASS, MODE_REDUCE_THEN_SCAN, MODE_LOOKBACK, MODE_GROUPS, MODE_ORDERED = 0, 1, 2, 3, 4
MODE_FENWICK = MODE_SINGLE_PASS


@dataclass(frozen=True)
class ScanPolicy:
    block_threads: int      # threads per block
    items_per_thread: int   # items per thread per tile
    mode: int               # inexact operators: 0 Fenwick, 1 reduce-then-scan, 3 groups,
                            # 4 ordered look-back
    blocks_per_sm: int      # reduce-then-scan and load_ahead grids: at most sm_count * this
    exact_mode: int = MODE_LOOKBACK     # exact operators: 0..4
    lookback_window: int = 16           # modes 2 and 4 (at most 32): status words per load
    group_tiles: int = 32               # mode 3: tiles per group (at least)
    group_sqrt: int = 0                 # mode 3: 1: about sqrt(tiles) tiles a group, up to
                                        # 256 (algorithms/scan_plan.groups_for)
    small_items: int = 0                # num_items <= this: small_block_threads per tile
    small_block_threads: int = 256
    exclusive_inverse: int = 0          # modes 2/3: exclusive integer add/xor as incl. - item
    exclusive_pairs: int = 0            # modes 2/3: exclusive well-known op as a pair scan
                                        # (1: every size; 2: above small_items only)
    load_ahead: int = 0                 # modes 2, 3: 1: blocks take tiles until the input ends,
                                        # loading the next before looking back
    split_status: int = 0               # modes 2-4, 8-byte values: 1: split over two status
                                        # words, relaxed (algorithms/scan_status.py)
    one_launch_max_items: int = 0       # num_items <= this: one launch (see one_launch)
    one_launch_block_threads: int = 512 # its tile: these threads times
    one_launch_items_per_thread: int = 16   # these items
    vector_width: int = 0               # single-pass kernels' kernel option vector_width (the
                                        # items a thread holds together); 0: the compiler's
    source: str = "built-in"

    @property
    def tile_items(self) -> int:
        return self.block_threads * self.items_per_thread

    def one_launch(self, n: int) -> bool:
        """Whether a scan of n items (not in place) runs in one
        launch: scan_recompute, whose blocks fold the items before their tiles
        themselves, on tiles of one_launch_block_threads *
        one_launch_items_per_thread items."""
        return n <= self.one_launch_max_items

    def threads_for(self, n: int) -> int:
        """Threads per block (the tile is this times items_per_thread) for n items."""
        return self.small_block_threads if n <= self.small_items else self.block_threads


def _items(key: dict, bytes_per_thread: int) -> int:
    """Items per thread so that a thread holds `bytes_per_thread` of accumulators
    (by-key scans carry a head flag per item too, user operators more live
    values: half as many)."""
    acc = max(4, key.get("value_size", 4))
    half = key.get("by_key") or key.get("op") == "user"
    per = bytes_per_thread // acc // (2 if half else 1)
    return max(1, min(64, per))


_COMMON = dict(exact_mode=MODE_LOOKBACK, lookback_window=16, group_tiles=32, group_sqrt=0,
               small_items=0, small_block_threads=256, exclusive_inverse=0, exclusive_pairs=0,
               load_ahead=0, split_status=0, one_launch_max_items=0, one_launch_block_threads=512,
               one_launch_items_per_thread=16, vector_width=0)


def _sm70(key: dict) -> dict:
    return dict(block_threads=128, items_per_thread=_items(key, 128), mode=MODE_GROUPS,
                blocks_per_sm=4, **_COMMON)


def _sm80(key: dict) -> dict:
    return dict(block_threads=128, items_per_thread=_items(key, 256), mode=MODE_GROUPS,
                blocks_per_sm=4, **_COMMON)


def _sm90(key: dict) -> dict:
    return dict(block_threads=1024, items_per_thread=_items(key, 128), mode=MODE_GROUPS,
                blocks_per_sm=4, **_COMMON)


def select_scan_policy(cc: int, key: dict) -> ScanPolicy:
    """The policy for compute capability `cc` and tuning `key`: the hub's
    policy for the newest architecture <= cc, then the tables' fields for the
    key (exact row, table default, previous architecture's table), then any
    active override."""
    hub = [(70, lambda: _sm70(key)), (80, lambda: _sm80(key)), (90, lambda: _sm90(key))]
    return select_policy("scan", cc, key, hub, ScanPolicy)
