"""DeviceSegmentedReduce's policy hub: the built-in policy per minimum
architecture, refined by the tuning tables (`tuning_db/segmented_reduce/
sm_XY.yaml`) and by `override_policy("segmented_reduce", ...)`; and the
kernel choice, a plain function of the policy and what the host knows
without reading device memory (the number of segments, the input's length,
the SM count).

The built-in policies leave `one_row_items_per_thread` (64: the rows tile) and
`convert_offsets` (2) to their dataclass defaults.

The tuning key: value_size (bytes per input item), accum (accumulator dtype
name), op (operator class) and offset_size (4 or 8: the offsets' dtype).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .hub import select_policy

__all__ = ["SegmentedPolicy", "select_segmented_policy", "Shape", "choose_shape"]

ALGORITHM = "segmented_reduce"


@dataclass(frozen=True)
class SegmentedPolicy:
    block_threads: int            # threads per block of the rows kernel (and split_final)
    rows_items_per_thread: int    # rows kernel: tile = block_threads * this
    min_row_items: int            # rows kernel: narrowest row
    rows_waves: int               # rows kernel (well-known operators): row groups per block
    long_block_threads: int       # threads per block of the long kernel
    long_items_per_thread: int    # long kernel: largest tile = long_block_threads * this
    long_min_items_per_thread: int  # long kernel: smallest tile (fitted to the average length)
    long_min_avg_items: int       # average segment length from which the long kernel runs
    split_min_blocks_per_sm: int  # long kernel: split segments while fewer blocks than this/SM
    one_row_items_per_thread: int = 64  # rows kernel, a block of one segment: its steps hold
                                  # block_threads * this items at most (within the rows tile)
    convert_offsets: int = 2      # rows kernels, int64 offsets: 2 clamps each row's once in the
                                  # kernel (int32 offsets too where a block holds one row),
                                  # 1 into int32 arrays first (one pass, temporary
                                  # storage), 0 lets every element clamp its own
    source: str = "built-in"

    @property
    def rows_tile(self) -> int:
        return self.block_threads * self.rows_items_per_thread

    @property
    def long_tile(self) -> int:
        return self.long_block_threads * self.long_items_per_thread

    def long_tile_for(self, avg: int) -> int:
        """The long kernel's tile for segments of `avg` items on average: the
        average rounded up to a power of two, within [long_min_items_per_thread,
        long_items_per_thread] items per thread (a segment is then one or two
        tiles, not a large mostly masked one)."""
        lo = self.long_block_threads * min(self.long_min_items_per_thread,
                                           self.long_items_per_thread)
        return min(max(_pow2_ceil(avg), lo), self.long_tile)


def _per_thread(key: dict, nbytes: int) -> int:
    """Items per thread so that each thread holds `nbytes` of input per step
    (whole 16-byte vectors), at most 32; halved for arg reductions."""
    per = nbytes // (2 if key.get("op") == "arg" else 1)
    return max(1, min(32, per // key.get("value_size", 4)))


def _sm70(key: dict) -> dict:
    return dict(block_threads=256, rows_items_per_thread=_per_thread(key, 16), min_row_items=32,
                rows_waves=1, long_block_threads=256, long_items_per_thread=_per_thread(key, 32),
                long_min_items_per_thread=1, long_min_avg_items=8192, split_min_blocks_per_sm=4)


def _sm80(key: dict) -> dict:
    return dict(block_threads=256, rows_items_per_thread=_per_thread(key, 32), min_row_items=32,
                rows_waves=1, long_block_threads=256, long_items_per_thread=_per_thread(key, 64),
                long_min_items_per_thread=1, long_min_avg_items=8192, split_min_blocks_per_sm=4)


def _sm90(key: dict) -> dict:
    return _sm80(key)


def select_segmented_policy(cc: int, key: dict) -> SegmentedPolicy:
    """The policy for compute capability `cc` and tuning `key`: the hub's
    policy for the newest architecture <= cc, the tables' fields for the key
    (exact row, table default, previous architecture's table), then any
    active override."""
    hub = [(70, lambda: _sm70(key)), (80, lambda: _sm80(key)), (90, lambda: _sm90(key))]
    return select_policy(ALGORITHM, cc, key, hub, SegmentedPolicy)


class Shape(NamedTuple):
    """The kernel a call runs and its compile-time shape.
    kind "rows": a block reduces `segs` segments at a time, each through a
    row of `items` lanes, `waves` times in turn (well-known operators; 1
    otherwise). kind "long": `split` blocks per segment (1: one block writing
    the result), each loading `items`-item aligned tiles."""
    kind: str
    segs: int
    items: int
    split: int
    waves: int = 1


# The rows kernel's grid keeps at least this many blocks per SM when it gives a
# block several row groups (rows_waves).
_MIN_BLOCKS_PER_SM = 8


def _pow2_ceil(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _pow2_floor(n: int) -> int:
    return 1 if n <= 1 else 1 << (n.bit_length() - 1)


def choose_shape(p: SegmentedPolicy, num_segments: int, num_items: int, sm_count: int,
                 long_ok: bool) -> Shape:
    """The kernel for `num_segments` segments over an input of `num_items`
    items (d_in's length: the host's bound on the total, read without touching
    device memory). `long_ok`: the operator has a long kernel (well-known
    operators). The rows kernel's row is the average rounded up to a power of
    two within [min_row_items, the rows tile]; a row as wide as the tile (one
    segment a block) is then narrowed to block_threads *
    one_row_items_per_thread items at most."""
    avg = num_items // max(num_segments, 1)
    if long_ok and avg >= p.long_min_avg_items:
        tile = p.long_tile_for(avg)
        split = 1
        want = sm_count * p.split_min_blocks_per_sm
        if num_segments < want:
            # enough blocks to fill the device, each with at least two tiles
            split = min(_pow2_ceil(-(-want // max(num_segments, 1))),
                        _pow2_floor(max(avg // (2 * tile), 1)), 1024)
        return Shape("long", 1, tile, split)
    items = min(max(_pow2_ceil(avg), p.min_row_items), p.rows_tile)
    segs = p.rows_tile // items
    if segs == 1:   # a segment a block: the row in steps of its own width
        items = max(min(items, p.block_threads * p.one_row_items_per_thread), p.min_row_items)
    waves = p.rows_waves if long_ok else 1
    # fewer waves while they would leave fewer than _MIN_BLOCKS_PER_SM blocks per SM
    while waves > 1 and -(-num_segments // (segs * waves)) < sm_count * _MIN_BLOCKS_PER_SM:
        waves //= 2
    return Shape("rows", segs, items, 1, waves)
