"""DeviceSegmentedReduce's tile kernels (CUB's agents), in the public tile language.

Segment s is d_in[begins[s]:ends[s]] (empty when ends[s] <= begins[s]);
segments may overlap, leave gaps or come in any order. Two kernels:

- rows (`rows_known`, `rows_user`, `rows_arg`): block b reduces segments
  b*SEGS .. b*SEGS+SEGS-1, one per row of a (SEGS, ITEMS) tile (rows_known:
  WAVES such groups in turn, the next group's bounds loading with the
  current group's items). Row r's lane c folds items c, c+ITEMS, c+2*ITEMS,
  ... of its segment (gathered, masked past the segment's end); the block
  loops until its longest segment is done, so short segments share a block
  and a long one simply loops. Each row is then reduced in lane order and
  combined with init. Each element computes its row and column itself and
  loads its row's bounds (no broadcast through shared memory, no barriers
  before the first items load); with NARROW (the host's choice: d_in and
  the segment count below 2**30, or, one segment a block, d_in plus two
  rows of lanes at most 2**31) bounds and indices are int32 whatever the
  offsets' dtype, so int64 offsets cost no 64-bit arithmetic per item.
  Int64 offsets (policy convert_offsets): ROWWISE (2) loads and clamps each
  row's bounds once and broadcasts them along the row through shared memory
  (`bounds_of_rows`); or `clamp_offsets` does row_bounds' NARROW clamp once
  per offset ahead of the rows kernel, into int32 arrays of the temporary
  storage (1), and the rows kernel gathers 32-bit bounds. With 2, int32
  offsets are loaded once per row too where a block holds one segment (every
  item loading them there cost a fifth of the speed).
- long (`long_known`): one block per segment (or SPLIT blocks per segment,
  FINAL=False) folding aligned TILE-item tiles of d_in with vector loads:
  the tiles wholly inside the segment unmasked, the first and last masked.
  With SPLIT blocks, block j of a segment folds its tiles j, j+SPLIT, ...
  into a partial, and `split_final` reduces each segment's SPLIT partials.
  Its bounds are clamped as the rows kernels' (`clamp_bound`) and, with
  NARROW (d_in plus two tiles at most 2**31), int32 whatever the offsets'
  dtype: int64 offsets then cost two 64-bit loads per block and no 64-bit
  tile index or position math (with it, the H100 ran 2^18 segments of
  U(1..4096) items 9% slower than with int32 offsets).

The association of every result depends only on the segment's bounds and
the compile-time shape (ITEMS, TILE, SPLIT), so results are bit-identical
run to run. Operators and accumulators as DeviceReduce (operators.py,
reduce_kernels.combine_known / before).
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import ahead, before, combine_known, fold_known

__all__ = ["rows_known", "rows_user", "rows_arg", "long_known", "split_final", "clamp_offsets"]

ZERO = ct.PaddingMode.ZERO
BIG = 9223372036854775807


@ct.function
def clamp_bound(v, size, NARROW):
    """Offsets v clamped to d_in ([0, size]), as int32 with NARROW (the host's
    promise that every index the kernel forms from them fits int32), else
    int64: so int64 offsets cost no 64-bit arithmetic after this."""
    v = ct.minimum(ct.maximum(v, 0), size)
    if NARROW:
        return ct.astype(v, ct.int32)
    else:
        return ct.astype(v, ct.int64)


@ct.function
def row_bounds(begins, ends, s, num_segments, size, NARROW):
    """(first item, item count) of segment s (a tile of segment ids; ids past
    num_segments count 0 items). Bounds are clamped to d_in ([0, size]): with
    NARROW (the host's promise, segmented_reduce._narrow) they are int32 and every
    index the kernel forms fits int32, whatever the offsets' dtype; else int64."""
    live = s < num_segments
    sc = ct.minimum(s, num_segments - 1)                 # a valid id: unmasked loads
    beg = clamp_bound(ct.gather(begins, sc, check_bounds=False), size, NARROW)
    end = clamp_bound(ct.gather(ends, sc, check_bounds=False), size, NARROW)
    return beg, ct.where(live & (end > beg), end - beg, 0)


@ct.function
def bounds_of_rows(begins, ends, first, row, num_segments, size, SEGS, ITEMS, NARROW, ROWWISE):
    """row_bounds of segments first + row (row: each element's row of the
    (SEGS, ITEMS) tile). ROWWISE: each row's bounds loaded and clamped once, in
    a (SEGS, 1) tile broadcast along the rows (staged through shared memory:
    one barrier), instead of by every element: for int64 offsets, whose 64-bit
    loads and clamps would otherwise be per item, and for a block of one row,
    whose every item would load the same two bounds."""
    if ROWWISE:
        ids = first + ct.reshape(ct.arange(SEGS, dtype=ct.int32), (SEGS, 1))
        beg, n = row_bounds(begins, ends, ids, num_segments, size, NARROW)
        if NARROW:      # both int32, below 2**31: one broadcast of the pair (one staging)
            both = ct.broadcast_to((ct.astype(beg, ct.int64) << 32) | ct.astype(n, ct.int64),
                                   (SEGS, ITEMS))
            return ct.astype(both >> 32, ct.int32), ct.astype(both & 0xFFFFFFFF, ct.int32)
        else:
            return ct.broadcast_to(beg, (SEGS, ITEMS)), ct.broadcast_to(n, (SEGS, ITEMS))
    else:
        return row_bounds(begins, ends, first + row, num_segments, size, NARROW)


@ct.kernel
def clamp_offsets(src, dst, size, TILE: ct.Constant[int]):
    """dst[i] = src[i] clamped to [0, size], as int32 (size, d_in's length, is
    below 2**31: NARROW): block b converts tile b. Exactly row_bounds' NARROW clamp, so
    a rows kernel given dst finds the bounds it would have computed from src
    (and clamps them again, a no-op). Items past dst's end are dropped."""
    b = ct.bid(0)
    v = ct.load(src, index=(b,), shape=(TILE,), padding_mode=ZERO)
    ct.store(dst, index=(b,), tile=clamp_bound(v, size, True))


@ct.function
def row_grid(SEGS, ITEMS):
    """Each element's row and column in the (SEGS, ITEMS) tile, computed in
    place (no broadcast between threads): a thread's elements of one row then
    load that row's bounds from the same address (L1 hits)."""
    e = ct.arange(SEGS * ITEMS)
    row = ct.astype(ct.astype(e, ct.uint32) // ITEMS, ct.int32)   # unsigned: a shift
    return ct.reshape(row, (SEGS, ITEMS)), ct.reshape(e & (ITEMS - 1), (SEGS, ITEMS))


@ct.function
def first_row(b, ROWS, NARROW):
    """The first segment id of block b, which reduces ROWS segments."""
    if NARROW:
        return b * ROWS
    else:
        return ct.astype(b, ct.int64) * ROWS


@ct.function
def fold_segments(x, beg, n, col, SEGS, ITEMS, ACC, KIND, ID):
    """Each row's segment folded (shape (SEGS,), without init): lane c folds
    items c, c+ITEMS, ... The first step does not wait for the block's longest
    segment (the loop bound), so its loads go out with the bounds."""
    ident = ct.full((SEGS, ITEMS), ID, ACC)
    m = col < n
    v = ct.astype(ct.gather(x, beg + col, mask=m, check_bounds=False), ACC)
    acc = ct.where(m, combine_known(ident, v, KIND), ident)
    for k in range(1, ct.cdiv(ct.max(n), ITEMS)):
        p = col + k * ITEMS
        mk = p < n
        v = ct.astype(ct.gather(x, beg + p, mask=mk, check_bounds=False), ACC)
        acc = ct.where(mk, combine_known(acc, v, KIND), acc)
    return fold_known(acc, 1, KIND, ID, False)


@ct.kernel
def rows_known(x, begins, ends, out, num_segments, init, SEGS: ct.Constant[int],
               ITEMS: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
               ID: ct.Constant, WAVES: ct.Constant[int], NARROW: ct.Constant[bool],
               ROWWISE: ct.Constant[bool]):
    """Block b reduces segments b*SEGS*WAVES ... in WAVES groups of SEGS, one
    group per step; each step but the last loads the next group's bounds with
    its items."""
    row, col = row_grid(SEGS, ITEMS)
    first = first_row(ct.bid(0), SEGS * WAVES, NARROW)
    f = first
    size = x.shape[0]
    beg, n = bounds_of_rows(begins, ends, f, row, num_segments, size, SEGS, ITEMS, NARROW,
                            ROWWISE)
    so = first + ct.arange(SEGS)
    for w in range(WAVES - 1):
        f = f + SEGS
        beg_next, n_next = bounds_of_rows(begins, ends, f, row, num_segments, size, SEGS, ITEMS,
                                          NARROW, ROWWISE)
        fold_group(x, out, beg, n, col, so, num_segments, init, SEGS, ITEMS, ACC, KIND, ID)
        so = so + SEGS
        beg = beg_next
        n = n_next
    fold_group(x, out, beg, n, col, so, num_segments, init, SEGS, ITEMS, ACC, KIND, ID)


@ct.function
def fold_group(x, out, beg, n, col, so, num_segments, init, SEGS, ITEMS, ACC, KIND, ID):
    """Reduce one group of SEGS segments (ids so) into out, init combined."""
    r = fold_segments(x, beg, n, col, SEGS, ITEMS, ACC, KIND, ID)
    r = combine_known(ct.full((SEGS,), init, ACC), r, KIND)
    ct.scatter(out, so, ct.astype(r, out.dtype), mask=so < num_segments)


@ct.kernel
def rows_user(x, begins, ends, out, num_segments, init, SEGS: ct.Constant[int],
              ITEMS: ct.Constant[int], ACC: ct.Constant, OP: ct.Constant,
              NARROW: ct.Constant[bool], ROWWISE: ct.Constant[bool]):
    """A user operator: no identity, so lanes carry (value, has-a-value)."""
    row, col = row_grid(SEGS, ITEMS)
    first = first_row(ct.bid(0), SEGS, NARROW)
    beg, n = bounds_of_rows(begins, ends, first, row, num_segments, x.shape[0], SEGS, ITEMS,
                            NARROW, ROWWISE)
    acc = ct.zeros((SEGS, ITEMS), ACC)
    ok = ct.full((SEGS, ITEMS), False, ct.bool_)
    for k in range(ct.cdiv(ct.max(n), ITEMS)):
        p = col + k * ITEMS
        m = p < n
        v = ct.astype(ct.gather(x, beg + p, mask=m, check_bounds=False), ACC)
        acc = ct.where(m & ok, ct.astype(OP(acc, v), ACC), ct.where(m, v, acc))
        ok = ok | m

    def pair(p, p_ok, q, q_ok):
        both = ct.astype(OP(p, q), ACC)
        return ct.where(p_ok & q_ok, both, ct.where(p_ok, p, q)), p_ok | q_ok
    r, r_ok = ct.reduce((acc, ok), 1, pair, (0, False))
    start = ct.full((SEGS,), init, ACC)
    r = ct.where(r_ok, ct.astype(OP(start, r), ACC), start)
    so = first + ct.arange(SEGS)
    ct.scatter(out, so, ct.astype(r, out.dtype), mask=so < num_segments)


@ct.kernel
def rows_arg(x, begins, ends, out_value, out_index, num_segments, empty,
             SEGS: ct.Constant[int], ITEMS: ct.Constant[int], ID: ct.Constant,
             MAX: ct.Constant[bool], W: ct.Constant, NARROW: ct.Constant[bool],
             ROWWISE: ct.Constant[bool]):
    """arg_min / arg_max per segment: the first best item and its offset in
    the segment (ties: the smallest offset; NaN last), compared in W
    (operators.work_dtype). Lanes keep the step k of their best item; its
    offset k*ITEMS + lane is formed once at the end. Empty segments: (empty,
    1), as CUB."""
    row, col = row_grid(SEGS, ITEMS)
    first = first_row(ct.bid(0), SEGS, NARROW)
    beg, n = bounds_of_rows(begins, ends, first, row, num_segments, x.shape[0], SEGS, ITEMS,
                            NARROW, ROWWISE)
    none = 2147483647                                   # "no item yet"
    acc = ct.full((SEGS, ITEMS), ID, W)
    step_of = ct.full((SEGS, ITEMS), none, ct.int32)
    for k in range(ct.cdiv(ct.max(n), ITEMS)):
        p = col + k * ITEMS
        m = p < n
        v = ct.astype(ct.gather(x, beg + p, mask=m, check_bounds=False), W)
        kt = ct.full((SEGS, ITEMS), k, ct.int32)
        # a lane's steps come in order, so a tie never displaces its earlier item; its
        # first item is always taken (ID comes last in the order)
        take = (ahead(v, acc, MAX) | (step_of == none)) & m
        acc = ct.where(take, v, acc)
        step_of = ct.where(take, kt, step_of)
    if NARROW:      # offsets within a segment below 2**31 - 1: int32, never `none`
        lane = ct.arange(ITEMS, dtype=ct.int32)[None, :]
        pos = ct.where(step_of == none, none, step_of * ITEMS + lane)
        unset = none
    else:
        lane = ct.astype(ct.arange(ITEMS), ct.int64)[None, :]
        pos = ct.where(step_of == none, BIG, ct.astype(step_of, ct.int64) * ITEMS + lane)
        unset = BIG

    def pick(v, i, w, j):
        first = before(v, i, w, j, MAX)
        return ct.where(first, v, w), ct.where(first, i, j)
    r, ri = ct.reduce((acc, pos), 1, pick, (ID, unset))
    so = first + ct.arange(SEGS)
    empty_row = ri == unset       # no lane took an item (each segment's first item is taken)
    r = ct.where(empty_row, ct.full((SEGS,), empty, W), r)
    ri = ct.where(empty_row, ct.full((SEGS,), 1, ri.dtype), ri)
    ct.scatter(out_value, so, ct.astype(r, out_value.dtype), mask=so < num_segments)
    ct.scatter(out_index, so, ct.astype(ri, out_index.dtype), mask=so < num_segments)


@ct.function
def masked_tile(x, t, beg, end, acc, TILE, ACC, KIND):
    """acc folded with tile t of x, items outside [beg, end) left out."""
    p = t * TILE + ct.arange(TILE)
    v = ct.astype(ct.load(x, index=(t,), shape=(TILE,), padding_mode=ZERO), ACC)
    return ct.where((p >= beg) & (p < end), combine_known(acc, v, KIND), acc)


@ct.kernel
def long_known(x, begins, ends, out, init, TILE: ct.Constant[int], ACC: ct.Constant,
               KIND: ct.Constant[str], ID: ct.Constant, SPLIT: ct.Constant[int],
               FINAL: ct.Constant[bool], NARROW: ct.Constant[bool]):
    """FINAL: block s reduces segment s and writes out[s] (init applied).
    Else block b folds its share (tiles j, j+SPLIT, ... of segment b // SPLIT,
    j = b % SPLIT) into the partial out[b] (no init). Bounds are clamped to
    d_in as in the rows kernels; with NARROW (d_in plus two tiles at most 2**31)
    they, the tile indices and the item positions are int32 whatever the
    offsets' dtype."""
    b = ct.bid(0)
    s = b // SPLIT
    size = x.shape[0]
    beg = clamp_bound(ct.load(begins, index=(s,), shape=(1,)), size, NARROW).item()
    end = clamp_bound(ct.load(ends, index=(s,), shape=(1,)), size, NARROW).item()
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
        r = combine_known(ct.full((1,), init, ACC), fold_known(acc, 0, KIND, ID, True), KIND)
        ct.store(out, index=(s,), tile=ct.astype(r, out.dtype))
    else:
        j = b - s * SPLIT
        first = beg // TILE + j
        last = ct.cdiv(end, TILE)
        if end > beg:
            for t in range(first, last, SPLIT):
                acc = masked_tile(x, t, beg, end, acc, TILE, ACC, KIND)
        ct.store(out, index=(b,), tile=fold_known(acc, 0, KIND, ID, True))


@ct.kernel
def split_final(partials, out, num_segments, init, SEGS: ct.Constant[int],
                SPLIT: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                ID: ct.Constant):
    """Each segment's SPLIT partials (consecutive in `partials`) reduced in
    order and combined with init."""
    b = ct.bid(0)
    s = b * SEGS + ct.arange(SEGS)
    p = ct.load(partials, index=(b,), shape=(SEGS * SPLIT,), padding_mode=ZERO)
    r = fold_known(ct.reshape(p, (SEGS, SPLIT)), 1, KIND, ID, False)
    r = combine_known(ct.full((SEGS,), init, ACC), r, KIND)
    ct.scatter(out, s, ct.astype(r, out.dtype), mask=s < num_segments)
