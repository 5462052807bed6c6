"""DeviceSegmentedReduce's tile kernels (CUB's agents), in the public tile language.

Segment s is d_in[begins[s]:ends[s]] (empty when ends[s] <= begins[s]);
segments may overlap, leave gaps or come in any order. Two kernels:

- rows (`rows_known`, `rows_user`, `rows_arg`): block b reduces segments
  b*SEGS .. b*SEGS+SEGS-1, one per row of a (SEGS, ITEMS) tile. Row r's
  lane c folds items c, c+ITEMS, c+2*ITEMS, ... of its segment (gathered,
  masked past the segment's end); the block loops until its longest
  segment is done, so short segments share a block and a long one simply
  loops. Each row is then reduced in lane order and combined with init.
- long (`long_known`): one block per segment (or SPLIT blocks per segment,
  FINAL=False) folding aligned TILE-item tiles of d_in with vector loads:
  the tiles wholly inside the segment unmasked, the first and last masked.
  With SPLIT blocks, block j of a segment folds its tiles j, j+SPLIT, ...
  into a partial, and `split_final` reduces each segment's SPLIT partials.

The association of every result depends only on the segment's bounds and
the compile-time shape (ITEMS, TILE, SPLIT), so results are bit-identical
run to run. Operators and accumulators as DeviceReduce (operators.py,
reduce_kernels.combine_known / before).
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import before, combine_known

__all__ = ["rows_known", "rows_user", "rows_arg", "long_known", "split_final"]

ZERO = ct.PaddingMode.ZERO
BIG = 9223372036854775807


@ct.function
def row_lanes(begins, ends, num_segments, SEGS, ITEMS):
    """This block's segments: (segment ids, live, items per segment, the
    gather index of each lane's first item, items left for each lane)."""
    b = ct.bid(0)
    s = b * SEGS + ct.arange(SEGS)
    live = s < num_segments
    beg = ct.load(begins, index=(b,), shape=(SEGS,), padding_mode=ZERO)
    end = ct.load(ends, index=(b,), shape=(SEGS,), padding_mode=ZERO)
    n = ct.where(live & (end > beg), end - beg, 0)
    col = ct.arange(ITEMS)
    # Loop-invariant 2-D tiles, broadcast once: a lane's k-th item is
    # idx + k*ITEMS and exists while k*ITEMS < rem (no index overflows).
    idx = beg[:, None] + col[None, :]
    rem = n[:, None] - col[None, :]
    return s, live, n, idx, rem


@ct.function
def fold_rows(acc, KIND, ID):
    """Each row of acc reduced in lane order (shape (SEGS,))."""
    if KIND == "add":
        return ct.sum(acc, 1)
    elif KIND == "min" and not acc.dtype.is_float:
        return ct.min(acc, 1)
    elif KIND == "max" and not acc.dtype.is_float:
        return ct.max(acc, 1)
    else:
        return ct.reduce(acc, 1, lambda p, q: combine_known(p, q, KIND), ID)


@ct.kernel
def rows_known(x, begins, ends, out, num_segments, init, SEGS: ct.Constant[int],
               ITEMS: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
               ID: ct.Constant):
    s, live, n, idx, rem = row_lanes(begins, ends, num_segments, SEGS, ITEMS)
    acc = ct.full((SEGS, ITEMS), ID, ACC)
    for k in range(ct.cdiv(ct.max(n), ITEMS)):
        off = k * ITEMS
        m = rem > off
        v = ct.astype(ct.gather(x, idx + off, mask=m), ACC)
        acc = ct.where(m, combine_known(acc, v, KIND), acc)
    r = combine_known(ct.full((SEGS,), init, ACC), fold_rows(acc, KIND, ID), KIND)
    ct.scatter(out, s, ct.astype(r, out.dtype), mask=live)


@ct.kernel
def rows_user(x, begins, ends, out, num_segments, init, SEGS: ct.Constant[int],
              ITEMS: ct.Constant[int], ACC: ct.Constant, OP: ct.Constant):
    """A user operator: no identity, so lanes carry (value, has-a-value)."""
    s, live, n, idx, rem = row_lanes(begins, ends, num_segments, SEGS, ITEMS)
    acc = ct.zeros((SEGS, ITEMS), ACC)
    ok = ct.full((SEGS, ITEMS), False, ct.bool_)
    for k in range(ct.cdiv(ct.max(n), ITEMS)):
        off = k * ITEMS
        m = rem > off
        v = ct.astype(ct.gather(x, idx + off, mask=m), ACC)
        acc = ct.where(m & ok, ct.astype(OP(acc, v), ACC), ct.where(m, v, acc))
        ok = ok | m

    def pair(p, p_ok, q, q_ok):
        both = ct.astype(OP(p, q), ACC)
        return ct.where(p_ok & q_ok, both, ct.where(p_ok, p, q)), p_ok | q_ok
    r, r_ok = ct.reduce((acc, ok), 1, pair, (0, False))
    start = ct.full((SEGS,), init, ACC)
    r = ct.where(r_ok, ct.astype(OP(start, r), ACC), start)
    ct.scatter(out, s, ct.astype(r, out.dtype), mask=live)


@ct.kernel
def rows_arg(x, begins, ends, out_value, out_index, num_segments, empty,
             SEGS: ct.Constant[int], ITEMS: ct.Constant[int], ID: ct.Constant,
             MAX: ct.Constant[bool]):
    """arg_min / arg_max per segment: the first best item and its offset in
    the segment (ties: the smallest offset; NaN last). Lanes keep the step k
    of their best item; its offset k*ITEMS + lane is formed once at the end.
    Empty segments: (empty, 1), as CUB."""
    s, live, n, idx, rem = row_lanes(begins, ends, num_segments, SEGS, ITEMS)
    none = 2147483647                                   # "no item yet"
    acc = ct.full((SEGS, ITEMS), ID, x.dtype)
    step_of = ct.full((SEGS, ITEMS), none, ct.int32)
    for k in range(ct.cdiv(ct.max(n), ITEMS)):
        off = k * ITEMS
        m = rem > off
        v = ct.gather(x, idx + off, mask=m)
        kt = ct.full((SEGS, ITEMS), k, ct.int32)
        take = before(v, kt, acc, step_of, MAX) & m
        acc = ct.where(take, v, acc)
        step_of = ct.where(take, kt, step_of)
    lane = ct.astype(ct.arange(ITEMS), ct.int64)[None, :]
    pos = ct.where(step_of == none, BIG, ct.astype(step_of, ct.int64) * ITEMS + lane)

    def pick(v, i, w, j):
        first = before(v, i, w, j, MAX)
        return ct.where(first, v, w), ct.where(first, i, j)
    r, ri = ct.reduce((acc, pos), 1, pick, (ID, BIG))
    r = ct.where(n == 0, ct.full((SEGS,), empty, x.dtype), r)
    ri = ct.where(n == 0, ct.full((SEGS,), 1, ct.int64), ri)
    ct.scatter(out_value, s, ct.astype(r, out_value.dtype), mask=live)
    ct.scatter(out_index, s, ct.astype(ri, out_index.dtype), mask=live)


@ct.function
def masked_tile(x, t, beg, end, acc, TILE, ACC, KIND):
    """acc folded with tile t of x, items outside [beg, end) left out."""
    p = t * TILE + ct.arange(TILE)
    v = ct.astype(ct.load(x, index=(t,), shape=(TILE,), padding_mode=ZERO), ACC)
    return ct.where((p >= beg) & (p < end), combine_known(acc, v, KIND), acc)


@ct.function
def fold_all(acc, KIND, ID):
    if KIND == "add":
        return ct.sum(acc, 0, keepdims=True)
    elif KIND == "min" and not acc.dtype.is_float:
        return ct.min(acc, 0, keepdims=True)
    elif KIND == "max" and not acc.dtype.is_float:
        return ct.max(acc, 0, keepdims=True)
    else:
        return ct.reduce(acc, 0, lambda p, q: combine_known(p, q, KIND), ID, keepdims=True)


@ct.kernel
def long_known(x, begins, ends, out, init, TILE: ct.Constant[int], ACC: ct.Constant,
               KIND: ct.Constant[str], ID: ct.Constant, SPLIT: ct.Constant[int],
               FINAL: ct.Constant[bool]):
    """FINAL: block s reduces segment s and writes out[s] (init applied).
    Else block b folds its share (tiles j, j+SPLIT, ... of segment b // SPLIT,
    j = b % SPLIT) into the partial out[b] (no init)."""
    b = ct.bid(0)
    s = b // SPLIT
    beg = ct.load(begins, index=(s,), shape=(1,)).item()
    end = ct.load(ends, index=(s,), shape=(1,)).item()
    acc = ct.full((TILE,), ID, ACC)
    if FINAL:
        lo = ct.cdiv(beg, TILE)                 # tiles [lo, hi) lie wholly inside
        hi = end // TILE
        for t in range(lo, hi):
            v = ct.astype(ct.load(x, index=(t,), shape=(TILE,)), ACC)
            acc = combine_known(acc, v, KIND)
        head = beg // TILE
        if head * TILE < beg:
            acc = masked_tile(x, head, beg, end, acc, TILE, ACC, KIND)
        if hi >= lo:
            if hi * TILE < end:
                acc = masked_tile(x, hi, beg, end, acc, TILE, ACC, KIND)
        r = combine_known(ct.full((1,), init, ACC), fold_all(acc, KIND, ID), KIND)
        ct.store(out, index=(s,), tile=ct.astype(r, out.dtype))
    else:
        j = b - s * SPLIT
        first = beg // TILE + j
        last = ct.cdiv(end, TILE)
        if end > beg:
            for t in range(first, last, SPLIT):
                acc = masked_tile(x, t, beg, end, acc, TILE, ACC, KIND)
        ct.store(out, index=(b,), tile=fold_all(acc, KIND, ID))


@ct.kernel
def split_final(partials, out, num_segments, init, SEGS: ct.Constant[int],
                SPLIT: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                ID: ct.Constant):
    """Each segment's SPLIT partials (consecutive in `partials`) reduced in
    order and combined with init."""
    b = ct.bid(0)
    s = b * SEGS + ct.arange(SEGS)
    p = ct.load(partials, index=(b,), shape=(SEGS * SPLIT,), padding_mode=ZERO)
    r = fold_rows(ct.reshape(p, (SEGS, SPLIT)), KIND, ID)
    r = combine_known(ct.full((SEGS,), init, ACC), r, KIND)
    ct.scatter(out, s, ct.astype(r, out.dtype), mask=s < num_segments)
