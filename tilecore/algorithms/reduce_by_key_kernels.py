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

Small inputs (the policy's small_max_items) take one launch of `rbk_small`
instead, without temporary storage: block t handles tile t (TILE items) and
first recomputes what the tiles before it carry into it, as
DeviceScan's scan_recompute does:

- the number of runs started before its first item (the heads of tiles
  0 .. t-1, accumulated lane-wise and summed once) and the first item `s` of
  the run open at its first item (the largest head index, a lane-wise max);
- that open run's aggregate so far, the fold of values[s .. base-1] in item
  order: well-known operators accumulate lane-wise over the tiles from s's
  on (items before s masked with the identity) and fold the lanes once; a
  user operator folds each of those tiles in order ((ok, value) pairs, items
  before s not ok) and the tile folds in order.

Then it scans its own tile as a segmented inclusive scan of (head, value)
pairs (`ct.scan`, in item order, never commutative) with the open run's
aggregate folded into lane 0 when lane 0 does not start a run, and scatters:
heads write their key to unique_out[run], run ends (the next key differs, or
the last item) their scanned value to aggregates_out[run], the last item the
number of runs. Every value a block uses is a function of (n, TILE, t) only:
deterministic, float sums included (a float sum's association differs from
the multi-launch path's). The re-reads (keys of tiles 0 .. t-1, values of the
open run) come from L2 at these sizes.
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import fold_known
from .scan_tiles import fold_parts, heads_at, op2, store_items, tile_index

__all__ = ["rbk_heads", "rbk_scatter", "rbk_zero", "rbk_small"]


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


@ct.kernel
def rbk_small(keys, values, unique_out, aggregates_out, num_runs_out, n,
              TILE: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
              OP: ct.Constant, ID: ct.Constant):
    """The whole of reduce_by_key in one launch for 0 < n < 2**31 items (module
    docstring): block t recomputes the runs before its tile and the open run's
    aggregate, then scans its tile and scatters its outputs."""
    t = ct.bid(0)
    lane = ct.arange(TILE, dtype=ct.int32)
    base = t * TILE
    before = ct.zeros((1,), ct.int32)       # runs started before item base
    p_val = ct.zeros((1,), ACC)             # the open run's aggregate up to item base - 1
    if t > 0:           # (block 0 carries nothing in)
        cnt = ct.zeros((TILE,), ct.int32)
        last = ct.zeros((TILE,), ct.int32)
        for i in range(t):                  # full tiles: every item exists
            gi = i * TILE + lane
            k = ct.load(keys, (i,), (TILE,))
            kp = ct.gather(keys, gi - 1, mask=gi >= 1)
            h = ct.where((gi == 0) | ~(kp == k), 1, 0)
            cnt = cnt + h
            last = ct.maximum(last, gi * h)
        before = ct.sum(cnt, 0, keepdims=True)
        s = ct.max(last, 0, keepdims=True).item()   # the open run's first item
        if KIND != "user":
            acc = ct.full((TILE,), ID, ACC)
            for i in range(s // TILE, t):
                gi = i * TILE + lane
                v = ct.astype(ct.load(values, (i,), (TILE,)), ACC)
                acc = op2(acc, ct.where(gi >= s, v, ID), KIND, OP, ACC)
            p_val = fold_known(acc, 0, KIND, ID, True)
        else:
            first = s // TILE
            for i in range(first, t):
                gi = i * TILE + lane
                v = ct.astype(ct.load(values, (i,), (TILE,)), ACC)
                _, _, a = fold_parts(ct.where(gi >= s, 1, 0), ct.zeros((TILE,), ct.int32), v,
                                     KIND, OP, ACC, False)
                if i == first:
                    p_val = a
                else:
                    p_val = op2(p_val, a, KIND, OP, ACC)
    g = base + lane
    ok = g < n
    k = ct.gather(keys, g, mask=ok)
    kp = ct.gather(keys, g - 1, mask=ok & (g >= 1))
    kn = ct.gather(keys, g + 1, mask=g + 1 < n)
    h = ct.where(ok & ((g == 0) | ~(kp == k)), 1, 0)
    tail = ok & ((g == n - 1) | ~(k == kn))
    r = before + ct.cumsum(h, 0) - 1        # each item's run (0-based)
    u = ct.astype(ct.gather(values, g, mask=ok), ACC)
    u = ct.where((lane == 0) & (h == 0), op2(p_val, u, KIND, OP, ACC), u)   # t > 0 here
    _, z = ct.scan((h, u), 0,
                   lambda ha, a, hb, b: (ct.maximum(ha, hb),
                                         ct.where(hb != 0, b, op2(a, b, KIND, OP, ACC))),
                   (0, 0))
    head = h != 0
    ct.scatter(unique_out, r, ct.astype(k, unique_out.dtype), mask=head)
    ct.scatter(aggregates_out, r, ct.astype(z, aggregates_out.dtype), mask=tail)
    ct.scatter(num_runs_out, r - r, ct.astype(r + 1, num_runs_out.dtype), mask=ok & (g == n - 1))
