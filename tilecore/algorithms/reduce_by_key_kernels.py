"""DeviceReduce.reduce_by_key's tile kernels, in the public tile language.

The algorithm (reduce_by_key.py) runs DeviceScan between these kernels:

1. `rbk_heads`: flags[i] = 1 where item i starts a run (i == 0, or
   keys[i-1] != keys[i]; `==` as CUB's equality, so a NaN key is a run of its
   own), else 0.
2. DeviceScan.inclusive_sum of the flags, in place: flags[i] becomes the
   1-based number of the run of item i.
   DeviceScan.inclusive_scan_by_key of the values with `op`: scanned[i] is the
   fold, in order, of the values from the start of i's run to i.
3. `rbk_scatter`: item i starting a run writes its key to
   unique_out[run(i)]; item i ending a run (i == n-1, or i+1 starts one)
   writes scanned[i], its run's aggregate, to aggregates_out[run(i)]; item
   n-1 writes the number of runs. Every output element is written by exactly
   one item, so the result is as deterministic as the scan (bit-identical run
   to run for every operator, float sums included).

`rbk_zero` writes num_runs = 0 for num_items == 0.
"""
from __future__ import annotations

import tilecore as ct

from .scan_kernels import heads_at, store_items, tile_index

__all__ = ["rbk_heads", "rbk_scatter", "rbk_zero"]


@ct.kernel
def rbk_heads(keys, flags, n, TILE: ct.Constant[int], WIDE: ct.Constant[bool]):
    """flags[i] = 1 where item i starts a run of equal keys, 0 elsewhere."""
    t = ct.bid(0)
    base, g = tile_index(t, n, TILE, WIDE)
    out = ct.astype(heads_at(keys, g, n, None, False), flags.dtype)
    store_items(flags, t, out, n, base, g, TILE)


@ct.kernel
def rbk_scatter(keys, scanned, runs, unique_out, aggregates_out, num_runs_out, n,
                TILE: ct.Constant[int], WIDE: ct.Constant[bool]):
    """Each run's first key, its aggregate (the scan at its last item) and the
    number of runs, scattered to the outputs (runs: the 1-based run number of
    every item)."""
    t = ct.bid(0)
    base, g = tile_index(t, n, TILE, WIDE)
    ok = g < n
    head = heads_at(keys, g, n, None, False) != 0
    last = ok & (g == n - 1)
    tail = last | (heads_at(keys, g + 1, n, None, False) != 0)
    r = ct.gather(runs, g, mask=ok, padding_value=1) - 1
    k = ct.gather(keys, g, mask=head)
    ct.scatter(unique_out, r, ct.astype(k, unique_out.dtype), mask=head)
    v = ct.gather(scanned, g, mask=tail)
    ct.scatter(aggregates_out, r, ct.astype(v, aggregates_out.dtype), mask=tail)
    ct.scatter(num_runs_out, r - r, ct.astype(r + 1, num_runs_out.dtype), mask=last)


@ct.kernel
def rbk_zero(num_runs_out):
    """num_runs = 0 (no items)."""
    ct.store(num_runs_out, (0,), ct.zeros((1,), num_runs_out.dtype))
