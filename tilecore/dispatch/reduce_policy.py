"""DeviceReduce's policy hub: the built-in policy per minimum architecture,
refined by the tuning tables (`tuning_db/reduce/sm_XY.yaml`) and by
`override_policy("reduce", ...)`.

The tuning key: value_size (bytes per input item), accum (accumulator dtype
name), op (operator class) and offset_size (4, or 8 from 2**31 items).
"""
from __future__ import annotations

from dataclasses import dataclass

from .hub import select_policy

__all__ = ["ReducePolicy", "select_reduce_policy"]


@dataclass(frozen=True)
class ReducePolicy:
    block_threads: int           # threads per block of the tile kernels
    items_per_thread: int        # input items per thread per tile
    blocks_per_sm: int           # first-pass grid = sm_count * blocks_per_sm (at most)
    single_block_max_items: int  # up to this many items: one single-block kernel
    final_block_threads: int     # threads of the pass over the partials
    single_block_threads: int    # threads of the single-block kernel (small inputs)
    source: str = "built-in"     # where the values come from (table row, default, built-in)

    @property
    def tile_items(self) -> int:
        return self.block_threads * self.items_per_thread


def _items(key: dict, bytes_per_thread: int) -> int:
    """Items per thread so that each thread loads `bytes_per_thread` per tile
    (16-byte vectors), halved for arg reductions (two accumulators)."""
    per = bytes_per_thread // (2 if key.get("op") == "arg" else 1)
    return max(1, min(32, per // key.get("value_size", 4)))


def _sm70(key: dict) -> dict:
    return dict(block_threads=256, items_per_thread=_items(key, 32), blocks_per_sm=4,
                single_block_max_items=8192, final_block_threads=256, single_block_threads=256)


def _sm80(key: dict) -> dict:
    return dict(block_threads=256, items_per_thread=_items(key, 64), blocks_per_sm=4,
                single_block_max_items=16384, final_block_threads=256, single_block_threads=256)


def _sm90(key: dict) -> dict:
    # the single block runs alone on one SM: 1024 threads keep 4x the loads of 256 in
    # flight (H100, tilecore.tune 2026-11-27: a 2^16 float32 sum in one block at 1024 x 16
    # ran at 77.6 GB/s against 31.4 at 256 x 16); 512 where 32 items a thread (1- and
    # 2-byte inputs) would spill within 1024 threads' 64 registers
    items = _items(key, 64)
    return dict(block_threads=256, items_per_thread=items, blocks_per_sm=4,
                single_block_max_items=16384, final_block_threads=256,
                single_block_threads=1024 if items <= 16 else 512)


def select_reduce_policy(cc: int, key: dict) -> ReducePolicy:
    """The policy for a device of compute capability `cc` (e.g. 90) and tuning
    `key`: the hub's policy for the newest architecture <= cc, then the
    tables' fields for the key (exact row, table default, previous
    architecture's table), then any active override."""
    hub = [(70, lambda: _sm70(key)), (80, lambda: _sm80(key)), (90, lambda: _sm90(key))]
    return select_policy("reduce", cc, key, hub, ReducePolicy)
