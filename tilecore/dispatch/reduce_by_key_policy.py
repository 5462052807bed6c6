"""DeviceReduce.reduce_by_key's policy hub: the built-in policy per minimum
architecture, refined by the tuning tables (`tuning_db/reduce_by_key/
sm_XY.yaml`; none shipped: the built-in policies stand) and by
`override_policy("reduce_by_key", ...)`.

Inputs of 1 .. small_max_items items run one launch of rbk_small on tiles of
small_block_threads x small_items_per_thread items; larger ones the
multi-launch path (rbk_heads and rbk_scatter on block_threads x
items_per_thread tiles, around two DeviceScan calls, which take the scan's
policy). algorithms/reduce_by_key.py says why.

The tuning key: key_size and value_size (bytes per key and per value), accum
(accumulator dtype name) and op (operator class: a well-known name or
'user').
"""
from __future__ import annotations

from dataclasses import dataclass

from .hub import select_policy

__all__ = ["ReduceByKeyPolicy", "select_reduce_by_key_policy"]


@dataclass(frozen=True)
class ReduceByKeyPolicy:
    block_threads: int           # threads per block of rbk_heads / rbk_scatter
    items_per_thread: int        # their items per thread
    small_max_items: int         # 1 .. this many items: one launch of rbk_small (0: never)
    small_block_threads: int     # threads per block of rbk_small
    small_items_per_thread: int  # rbk_small's tile = small_block_threads * this
    source: str = "built-in"     # where the values come from (table row, default, built-in)

    @property
    def small_tile(self) -> int:
        return self.small_block_threads * self.small_items_per_thread


def _sm70(key: dict) -> dict:
    # rbk_small, H200, 2026-11-28 (.gpu/rbk_small.py, float32 values, int32 keys in runs of 7),
    # device us per call against the multi-launch path: 2^10 3.5 / 10.1, 2^14 6.7 / 14.8, 2^16
    # 11.8 / 16.7, 2^17 18.5 / 17.5, hence 2^16; 512 x 8 for well-known operators (512 x 16,
    # 256 x 32 and 1024 x 8 slower; 512 x 16 spills with 8-byte keys and values), 256 x 16 for
    # user operators (as fast; 512 x 8 spills 24 bytes for a float32 `a + b` on sm_80). One
    # launch saves launches on any architecture: the same values from sm_70 on.
    user = key.get("op") == "user"
    return dict(block_threads=256, items_per_thread=4, small_max_items=1 << 16,
                small_block_threads=256 if user else 512, small_items_per_thread=16 if user else 8)


def select_reduce_by_key_policy(cc: int, key: dict) -> ReduceByKeyPolicy:
    """The policy for a device of compute capability `cc` (e.g. 90) and tuning
    `key`: the hub's policy for the newest architecture <= cc, then the
    tables' fields for the key, then any active override."""
    hub = [(70, lambda: _sm70(key))]
    return select_policy("reduce_by_key", cc, key, hub, ReduceByKeyPolicy)
