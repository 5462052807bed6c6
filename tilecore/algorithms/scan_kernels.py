"""DeviceScan's tile kernels (CUB's agents), in the public tile language.

A scan cuts the input into tiles of TILE items. Every tile is handled in two
halves, so that both drivers below share them:

- `tile_parts` loads a tile and computes its *aggregate* (the operator folded
  over its items, in order) as a part (ok, head, value). For an exclusive scan
  with SHIFT it loads the items shifted by one (u[j] = x[j-1], lane 0 left for
  the prefix), so a tile only ever reads its own items: in-place scans are safe.
- `tile_finish` puts the tile's exclusive prefix (and init) into lane 0, scans
  the tile (`ct.scan`/`ct.cumsum`, associative and never commutative) and
  stores it (masked in the last, partial tile: nothing past num_items is
  written). `local_scan` + `finish_known` (modes 2, 3 and 4, not by key; user
  operators of tiles not shifted) instead scan the tile on its own while the
  look-back's first load is in flight, then apply init (+) prefix to every
  lane; an exclusive scan of unshifted items there is `ct.scan(...,
  exclusive=True)`, its lane 0 init (+) prefix itself.

A *part* is a tile's or a range's contribution as three 1-element tiles: ok
(0: empty, nothing to combine), head (by-key scans: a new key starts inside
the range) and value (the operator folded from the last head on). `join`
combines consecutive parts in order; it is associative and not commutative.

Drivers (the policy's `mode` chooses; `exact_mode` for exact operators: integer
add/mul/and/or/xor, min/max of any dtype and user operators on integers, whose
every association gives the same bits):

- `scan_lookback` (mode 2, exact operators only): the decoupled look-back of
  examples/lookback_scan.py (its docstring). Blocks take tile numbers from an
  atomic ticket counter, so a block only waits for tiles taken earlier by
  running blocks. It folds whatever aggregates and prefixes it finds, so its
  association depends on timing: the policy refuses it for other operators.
  With PIPE (the policy's load_ahead) a grid of about the resident blocks
  takes tiles until the input ends, each block loading its next tile and
  publishing that tile's aggregate before it looks back (`scan_ahead`).
- `scan_ordered` (mode 4, any operator): the decoupled look-back folded left
  to right (ct.reduce(sequential=True)) from the newest complete prefix in
  the window holding tile t-1: the left fold of the aggregates from any
  earlier inclusive prefix is the same bits (its docstring).
- `scan_groups` (mode 3, any operator): aligned groups of G tiles. Tile
  t = kG + j: exclusive(t) = fold(Ag(0 .. k-1)) (+) fold(A[kG .. t-1]), A the
  tiles' aggregates and Ag the groups' (published by each group's last tile
  as soon as its group's aggregates are in), from one load of the GROUPS group
  words, one of the group's G status words and two fixed-shape masked
  reductions (with G == GROUPS both are waited for by one readiness check, and
  a well-known operator's two masked tiles are combined lane by lane and
  folded once: groups_prefix_fused). A tile waits
  only for the aggregates before it, as in the decoupled look-back, never for
  another tile's prefix. The host doubles G until the groups fit in GROUPS
  words. Deterministic: see below.
- `scan_fenwick` (mode 0, any operator): tile m publishes tree[m], the fold of
  the tiles (m - lowbit(m+1), m] (a Fenwick tree over the tile aggregates): its
  Fenwick children's entries m-1, m-2, m-4, ... (recent tiles) followed by its
  aggregate, as soon as those children are ready: before, and independently
  of, its own prefix look-back, so an entry depends on entries at most
  log2(tiles) deep and no tile waits for a predecessor's whole look-back. Its
  exclusive prefix is the fold, in tile order, of the entries on m's Fenwick
  prefix path (one per set bit of m), one gather of at most log2(m) words.
- `scan_recompute` (inputs of at most the policy's one_launch_max_items, any
  mode, not by key, not in place): one launch and no status words; block t
  folds tiles 0 .. t-1 itself (quadratic re-reads, from L2 at these sizes).
- `scan_partials` + `scan_downsweep` (mode 1, reduce-then-scan, two kernels):
  block b folds its contiguous chunk of PER tiles into partial b; then block b
  folds partials 0..b-1 (one fixed-shape reduction) and scans its chunk tile
  by tile. Reads the input twice.

Determinism (modes 0, 1, 3, every operator, float sums included; mode 4: the
left fold, scan_ordered): every value a
tile publishes or uses is a fold whose operands (aggregates, Fenwick entries,
group aggregates) and association (Fenwick ranges; group boundaries and the
fixed tree of the G-lane reduction, in which masked lanes pass the other
operand through unchanged; the fixed-shape block reductions) are functions of
tile numbers only. A block that looks before a predecessor has published only
waits longer; it never folds something else. So the output is bit-identical
run to run whatever the timing. Mode 2's folds depend on timing, which an exact
operator cannot see.

Status words pack the flags (READY, HEAD: a key run starts in the range,
PREFIX: an inclusive prefix) in their high 32 bits and a value of up to 32
bits in their low bits, published by one relaxed 64-bit store and read by one
relaxed load or atomic (PACKED); wider values go to `vals` with plain stores,
published by a release store of the word and read after an acquire (modes 2
and 4 keep aggregates and prefixes in separate halves of `vals`, since a word
goes from aggregate to prefix).

`scan_init` clears the ticket counter and the status words before a
single-pass scan.
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import combine_known

__all__ = ["scan_init", "scan_fenwick", "scan_lookback", "scan_ordered", "scan_groups",
           "scan_recompute", "window_masks", "window_waits", "from_newest_prefix",
           "scan_partials", "scan_downsweep", "READY", "HEAD", "PREFIX"]

MO, MS = ct.MemoryOrder, ct.MemoryScope
ZERO = ct.PaddingMode.ZERO
READY, HEAD, PREFIX = 1, 2, 4
LB_NOT_READY, LB_FOUND, LB_LIVE = 1, 2, 4     # mode 2: a window's lanes folded (lb_combine)
GROUPS = 256        # mode 3: group words every tile loads (the host widens groups to fit)


# --- operators -----------------------------------------------------------------------------
@ct.function
def op2(a, b, KIND, OP, ACC):
    """a OP b in the accumulator type (a: the earlier items)."""
    if KIND == "user":
        return ct.astype(OP(a, b), ACC)
    else:
        return ct.astype(combine_known(a, b, KIND), ACC)


@ct.function
def join(ok_a, h_a, a, ok_b, h_b, b, KIND, OP, ACC, BY_KEY):
    """The part of range a followed by range b (either may be empty: ok == 0;
    an empty part has head 0)."""
    both = op2(a, b, KIND, OP, ACC)
    if BY_KEY:
        both = ct.where(h_b != 0, b, both)
    value = ct.where((ok_a != 0) & (ok_b != 0), both, ct.where(ok_b != 0, b, a))
    return ct.maximum(ok_a, ok_b), ct.maximum(h_a, h_b), value


@ct.function
def join2(a1, a2, a3, a4, a5, a6, b1, b2, b3, b4, b5, b6, KIND, OP, ACC, BY_KEY):
    """Two parts joined side by side: (a1..a3 then b1..b3, a4..a6 then b4..b6)."""
    o1, h1, v1 = join(a1, a2, a3, b1, b2, b3, KIND, OP, ACC, BY_KEY)
    o2, h2, v2 = join(a4, a5, a6, b4, b5, b6, KIND, OP, ACC, BY_KEY)
    return o1, h1, v1, o2, h2, v2


@ct.function
def join_ok(ok_a, a, ok_b, b, KIND, OP, ACC):
    """`join` of parts without heads (not by key): (ok, value) pairs."""
    value = ct.where((ok_a != 0) & (ok_b != 0), op2(a, b, KIND, OP, ACC),
                     ct.where(ok_b != 0, b, a))
    return ct.maximum(ok_a, ok_b), value


@ct.function
def fold_parts(ok, h, v, KIND, OP, ACC, BY_KEY):
    """The part of a tile of parts, folded in lane order (keepdims: (1,) tiles).
    Not by key every head is 0: a fold of (ok, value) pairs, which the
    backend folds without the whole-tile scan a fold of three tiles takes."""
    if BY_KEY:
        return ct.reduce((ok, h, v), 0,
                         lambda oa, ha, a, ob, hb, b: join(oa, ha, a, ob, hb, b, KIND, OP, ACC,
                                                           BY_KEY),
                         (0, 0, 0), keepdims=True)
    else:
        o, value = ct.reduce((ok, v), 0,
                             lambda oa, a, ob, b: join_ok(oa, a, ob, b, KIND, OP, ACC),
                             (0, 0), keepdims=True)
        return o, ct.zeros((1,), ct.int32), value


@ct.function
def fold_known(u, KIND, ID, ACC):
    """A well-known operator folded over a tile padded with its identity."""
    if KIND == "add":
        r = ct.sum(u, 0, keepdims=True)
    elif KIND == "min" and not ACC.is_float:
        r = ct.min(u, 0, keepdims=True)
    elif KIND == "max" and not ACC.is_float:
        r = ct.max(u, 0, keepdims=True)
    else:
        r = ct.reduce(u, 0, lambda p, q: combine_known(p, q, KIND), ID, keepdims=True)
    return ct.astype(r, ACC)


# --- one tile --------------------------------------------------------------------------------
@ct.function
def heads_at(keys, g, n, EQ, HAS_EQ):
    """1 where item g starts a run of equal keys (g == 0, or keys[g-1] differs),
    for the items g < n (0 elsewhere)."""
    ok = (g >= 0) & (g < n)
    k = ct.gather(keys, g, mask=ok)
    kp = ct.gather(keys, g - 1, mask=ok & (g >= 1))
    if HAS_EQ:
        same = EQ(kp, k)
    else:
        same = kp == k
    return ct.where(ok & ((g == 0) | ~same), 1, 0)


@ct.function
def load_items(x, y, g, mask, pad, ACC, IN_PLACE):
    if IN_PLACE:
        return ct.astype(ct.gather(y, g, mask=mask, padding_value=pad), ACC)
    else:
        return ct.astype(ct.gather(x, g, mask=mask, padding_value=pad), ACC)


@ct.function
def tile_index(t, n, TILE, WIDE):
    """The first item of tile t and the items' indices (int64 for 2**31+ items)."""
    if WIDE:
        base = ct.astype(t, ct.int64) * TILE
    else:
        base = t * TILE
    return base, base + ct.arange(TILE, dtype=ct.int32)


@ct.function
def tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, EXCL, BY_KEY, IN_PLACE,
               WIDE):
    """Load tile t. Returns (u, hu, h, ok, head, agg): u the items the scan
    starts from (exclusive: shifted by one, lane 0 free), hu their heads, h the
    heads of the tile's own items (by-key), and the tile's aggregate part.
    The last tile's aggregate may include padding: no tile after it reads it."""
    base, g = tile_index(t, n, TILE, WIDE)
    lane = ct.arange(TILE, dtype=ct.int32)
    if KIND == "user":
        pad = 0
    else:
        pad = ID
    if EXCL:
        shifted = (lane >= 1) & (g <= n)
        u = load_items(x, y, g - 1, shifted, pad, ACC, IN_PLACE)
        last = ct.full((1,), 0, g.dtype) + (base + ct.minimum(n - base, TILE) - 1)
        x_last = load_items(x, y, last, last < n, pad, ACC, IN_PLACE)
    else:
        if IN_PLACE:
            u = ct.astype(ct.load(y, (t,), (TILE,), padding_mode=ZERO), ACC)
        else:
            u = ct.astype(ct.load(x, (t,), (TILE,), padding_mode=ZERO), ACC)
        shifted = lane >= 0
        last = g
        x_last = u
    if BY_KEY:
        h = heads_at(keys, g, n, EQ, HAS_EQ)
        if EXCL:
            hu = ct.where(shifted, heads_at(keys, g - 1, n, EQ, HAS_EQ), 0)
            h_last = heads_at(keys, last, n, EQ, HAS_EQ)
        else:
            hu = h
    else:
        h = ct.zeros((TILE,), ct.int32)
        hu = h
    if KIND != "user" and not BY_KEY:
        agg = fold_known(u, KIND, ID, ACC)
        ok = ct.full((1,), 1, ct.int32)
        head = ct.zeros((1,), ct.int32)
        if EXCL:
            agg = op2(agg, x_last, KIND, OP, ACC)
    elif not BY_KEY and not EXCL:
        # a user operator over an unshifted tile: every lane is an item (the last
        # tile's padding only reaches its own aggregate, which nobody reads), so
        # the plain fold serves; its identity argument is never used (tilecore's
        # fold and scan combine items only: frontend/scan.py, scan.cuh)
        agg = ct.reduce(u, 0, lambda a, b: op2(a, b, KIND, OP, ACC), 0, keepdims=True)
        ok = ct.full((1,), 1, ct.int32)
        head = ct.zeros((1,), ct.int32)
    else:
        ok, head, agg = fold_parts(ct.where(shifted, 1, 0), hu, u, KIND, OP, ACC, BY_KEY)
        if EXCL:
            one = ct.full((1,), 1, ct.int32)
            if BY_KEY:
                ok, head, agg = join(ok, head, agg, one, h_last, x_last, KIND, OP, ACC, BY_KEY)
            else:
                ok, head, agg = join(ok, head, agg, one, ct.zeros((1,), ct.int32), x_last,
                                     KIND, OP, ACC, BY_KEY)
    return u, hu, h, ok, head, agg


@ct.function
def tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                HAS_INIT, BY_KEY, WIDE):
    """Scan tile t from its items u (heads hu) and its exclusive prefix part p
    (init not yet applied), and store it."""
    base, g = tile_index(t, n, TILE, WIDE)
    first = ct.arange(TILE, dtype=ct.int32) == 0
    start = ct.full((1,), init, ACC)
    if BY_KEY:
        if EXCL:   # lane 0 holds the prefix (any head: the tile's first item decides)
            u = ct.where(first, ct.where(p_ok != 0, p_val, u), u)
            hu = ct.where(first, ct.where(p_ok != 0, p_head, 1), hu)
        else:
            u = ct.where(first & (p_ok != 0) & (hu == 0), op2(p_val, u, KIND, OP, ACC), u)
        hz, z = ct.scan((hu, u), 0,
                        lambda ha, a, hb, b: (ct.maximum(ha, hb),
                                              ct.where(hb != 0, b, op2(a, b, KIND, OP, ACC))),
                        (0, 0))
        if EXCL:
            z = ct.where(h != 0, start, op2(start, z, KIND, OP, ACC))
    else:
        if HAS_INIT:
            p_ok, p_head, p_val = join(ct.full((1,), 1, ct.int32), ct.zeros((1,), ct.int32),
                                       start, p_ok, p_head, p_val, KIND, OP, ACC, BY_KEY)
        if EXCL:
            u = ct.where(first, p_val, u)
        else:
            u = ct.where(first & (p_ok != 0), op2(p_val, u, KIND, OP, ACC), u)
        if KIND == "add":
            z = ct.astype(ct.cumsum(u, 0), ACC)
        else:
            z = ct.scan(u, 0, lambda a, b: op2(a, b, KIND, OP, ACC), 0)
    out = ct.astype(z, y.dtype)
    store_items(y, t, out, n, base, g, TILE)


@ct.function
def store_items(y, t, out, n, base, g, TILE):
    """Store tile t (items base + g, global indices g) of y, writing nothing at or
    past item n (y may be longer than the items scanned). (base <= n - TILE, not
    base + TILE <= n: below 2**31 items the offsets are int32, and the last
    tile's base + TILE may pass 2**31 - 1.)"""
    if base <= n - TILE:
        ct.store(y, (t,), out)
    else:
        y.get_raw_memory().store_offset(g, out, mask=g < n)


# --- status words ------------------------------------------------------------------------------
@ct.function
def to_bits(v, ACC):
    """The bits of a (1,) value of at most 32 bits, zero-extended to int64."""
    if ACC.itemsize == 4:
        b = ct.bitcast(v, ct.uint32)
    elif ACC.itemsize == 2:
        b = ct.bitcast(v, ct.uint16)
    else:
        b = ct.bitcast(v, ct.uint8)
    return ct.astype(b, ct.int64)


@ct.function
def from_bits(w, ACC):
    """The value in the low bits of status words w."""
    low = ct.astype(w & 0xFFFFFFFF, ct.uint32)
    if ACC.itemsize == 4:
        return ct.bitcast(low, ACC)
    elif ACC.itemsize == 2:
        return ct.bitcast(ct.astype(low, ct.uint16), ACC)
    else:
        return ct.bitcast(ct.astype(low, ct.uint8), ACC)


@ct.function
def publish(status, vals, m, head, v, ACC, PACKED):
    """Publish tree[m] = (head, v) with the READY flag."""
    flags = ct.astype(head, ct.int64) * HEAD + READY
    if PACKED:
        ct.store(status, (m,), (flags << 32) | to_bits(v, ACC), memory_order=MO.RELAXED,
                 memory_scope=MS.DEVICE)
    else:
        ct.store(vals, (m,), v)
        ct.store(status, (m,), flags << 32, memory_order=MO.RELEASE, memory_scope=MS.DEVICE)


@ct.function
def read_words(raw, pos, mask, zero, PACKED):
    """The status words at `pos` (masked lanes: 0), read by atomics: relaxed for
    packed words, acquire when the values are in `vals`."""
    if PACKED:
        return raw.atomic_or_offset(pos, zero, mask=mask, memory_order=MO.RELAXED,
                                    memory_scope=MS.DEVICE)
    else:
        return raw.atomic_or_offset(pos, zero, mask=mask, memory_order=MO.ACQUIRE,
                                    memory_scope=MS.DEVICE)


@ct.kernel
def scan_init(counter, status, TILE: ct.Constant[int]):
    """Clear the ticket counter and every tile's status word before a scan."""
    ct.store(status, (ct.bid(0),), ct.zeros((TILE,), ct.int64))
    if ct.bid(0) == 0:
        ct.store(counter, (0,), ct.zeros((1,), counter.dtype))


@ct.kernel
def scan_fenwick(x, keys, y, n, init, counter, status, vals, TILE: ct.Constant[int],
                 ACC: ct.Constant, KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant,
                 EQ: ct.Constant, HAS_EQ: ct.Constant[bool], EXCL: ct.Constant[bool],
                 HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                 IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[bool],
                 BITS: ct.Constant[int], WIDE: ct.Constant[bool], SINGLE: ct.Constant[bool]):
    """The single-pass scan (module docstring). SINGLE: one tile, one block, no
    ticket and no status words."""
    if SINGLE:
        t = ct.zeros((), counter.dtype)
    else:
        t = ct.atomic_add(counter, 0, 1, memory_order=MO.RELAXED)
    u, hu, h, a_ok, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ,
                                             HAS_EQ, EXCL, BY_KEY, IN_PLACE, WIDE)
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = agg
    if not SINGLE:
        m = ct.astype(t, ct.int64)
        if m % 2 == 0:          # no Fenwick children: tree[m] is the aggregate
            publish(status, vals, m, a_head, agg, ACC, PACKED)
        if m > 0:
            # lane l stands for bit b = BITS-1-l of m: lanes in tile order
            b = ct.astype(BITS - 1 - ct.arange(BITS, dtype=ct.int32), ct.int64)
            live = ((m >> b) & 1) == 1
            pos = ((m >> b) << b) - 1                # the entry covering bit b's range
            low = (m + 1) & -(m + 1)
            child = live & ((low >> b) > 1)          # ranges inside (m - lowbit(m+1), m)
            raw = status.get_raw_memory()
            zero = ct.zeros((BITS,), ct.int64)
            words = zero
            if m % 2 == 1:
                # tree[m] needs only its children's entries (recent tiles, whose own
                # entries need only theirs: O(log) deep): publish it before, and
                # independently of, the rest of this tile's look-back, so no tile
                # waits for a predecessor's whole look-back (no serial chain).
                while True:
                    words = read_words(raw, pos, child, zero, PACKED)
                    ready = ct.where(child, (words >> 32) & READY, 1)
                    if ct.min(ready, 0, keepdims=True).item() == 1:
                        break
                if PACKED:
                    cv = from_bits(words, ACC)
                else:
                    cv = ct.gather(vals, pos, mask=child)
                ch = ct.where(child, ct.astype(((words >> 32) & HEAD) >> 1, ct.int32), 0)
                c_ok, c_head, c_val = fold_parts(ct.where(child, 1, 0), ch, cv, KIND, OP, ACC,
                                                 BY_KEY)
                one = ct.full((1,), 1, ct.int32)
                _, t_head, t_val = join(c_ok, c_head, c_val, one, a_head, agg, KIND, OP,
                                        ACC, BY_KEY)
                publish(status, vals, m, t_head, t_val, ACC, PACKED)
            while True:
                words = read_words(raw, pos, live, zero, PACKED)
                ready = ct.where(live, (words >> 32) & READY, 1)
                if ct.min(ready, 0, keepdims=True).item() == 1:
                    break
            if PACKED:
                v = from_bits(words, ACC)
            else:
                v = ct.gather(vals, pos, mask=live)
            hd = ct.where(live, ct.astype(((words >> 32) & HEAD) >> 1, ct.int32), 0)
            c = ct.where(child, 1, 0)
            o = ct.where(live & ~child, 1, 0)
            lo_ok, lo_head, lo_val, hi_ok, hi_head, hi_val = ct.reduce(
                (c, ct.where(child, hd, 0), v, o, ct.where(child, 0, hd), v), 0,
                lambda c1, c2, c3, c4, c5, c6, d1, d2, d3, d4, d5, d6:
                    join2(c1, c2, c3, c4, c5, c6, d1, d2, d3, d4, d5, d6, KIND, OP, ACC,
                          BY_KEY),
                (0, 0, 0, 0, 0, 0), keepdims=True)
            p_ok, p_head, p_val = join(hi_ok, hi_head, hi_val, lo_ok, lo_head, lo_val, KIND,
                                       OP, ACC, BY_KEY)
    tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                HAS_INIT, BY_KEY, WIDE)


# --- the overlapped finish of well-known operators ----------------------------------------------
@ct.function
def local_scan(u, KIND, OP, ID, ACC, EXCLUSIVE):
    """The tile's own scan, without any prefix (computed while the look-back's
    first loads are in flight): inclusive, or with EXCLUSIVE (an exclusive scan
    from its unshifted items: in the kernels, EXCL and neither SHIFT nor INV)
    exclusive, lane 0 left for the prefix (ct.scan's exclusive extension: ID is
    never combined, so a user operator's stand-in serves)."""
    if EXCLUSIVE:
        return ct.scan(u, 0, lambda a, b: op2(a, b, KIND, OP, ACC), ID, exclusive=True)
    elif KIND == "add":
        return ct.astype(ct.cumsum(u, 0), ACC)
    else:
        return ct.scan(u, 0, lambda a, b: op2(a, b, KIND, OP, ACC), 0)


@ct.function
def finish_known(y, n, t, u, z, p_ok, p_val, init, TILE, KIND, OP, ACC, EXCL, HAS_INIT, INV,
                 WIDE):
    """Store tile t from its local scan z with the prefix p = init (+) exclusive
    prefix applied to every lane. z is inclusive, or for an exclusive scan either
    the inclusive scan of the items shifted by one or the exclusive scan of the
    items (lane 0 a well-known operator's identity, or a user operator's stand-in,
    replaced by p itself). INV: an exclusive integer add/xor scan from the
    unshifted items, as inclusive minus the item (exact)."""
    base, g = tile_index(t, n, TILE, WIDE)
    if HAS_INIT:
        start = ct.full((1,), init, ACC)
        p_val = ct.where(p_ok != 0, op2(start, p_val, KIND, OP, ACC), start)
        p_ok = ct.full((1,), 1, ct.int32)
    out = ct.where(p_ok != 0, op2(p_val, z, KIND, OP, ACC), z)
    if INV:
        if KIND == "add":
            out = out - u
        else:
            out = out ^ u
    elif EXCL and KIND == "user":   # (an exclusive scan has an init: p is complete)
        out = ct.where(ct.arange(TILE, dtype=ct.int32) == 0, p_val, out)
    out = ct.astype(out, y.dtype)
    store_items(y, t, out, n, base, g, TILE)


@ct.function
def store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL, INV,
               HAS_INIT, BY_KEY, WIDE, OVERLAP):
    """The single-pass modes' last step for tile t, given its exclusive prefix part
    p: with OVERLAP the local scan z gets init (+) p (finish_known), else the
    items u are scanned from p (tile_finish); then the tile is stored."""
    if OVERLAP:
        finish_known(y, n, t, u, z, p_ok, p_val, init, TILE, KIND, OP, ACC, EXCL, HAS_INIT,
                     INV, WIDE)
    else:
        tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                    HAS_INIT, BY_KEY, WIDE)


@ct.function
def ticket(counter, SINGLE):
    if SINGLE:
        return ct.zeros((), counter.dtype)
    else:
        return ct.atomic_add(counter, 0, 1, memory_order=MO.RELAXED)


@ct.function
def publish_at(status, s_idx, vals, v_idx, flags, v, ACC, PACKED):
    """status[s_idx] = flags (a (1,) int64 tile) with value v: packed beside the
    flags (one relaxed store), or in vals[v_idx] published by a release store."""
    if PACKED:
        ct.store(status, (s_idx,), (flags << 32) | to_bits(v, ACC), memory_order=MO.RELAXED,
                 memory_scope=MS.DEVICE)
    else:
        ct.store(vals, (v_idx,), v)
        ct.store(status, (s_idx,), flags << 32, memory_order=MO.RELEASE, memory_scope=MS.DEVICE)


@ct.function
def load_words(status, idx, size, PACKED):
    """status words [idx*size, (idx+1)*size): relaxed (packed) or acquire loads."""
    if PACKED:
        return ct.load(status, (idx,), (size,), padding_mode=ZERO, memory_order=MO.RELAXED,
                       memory_scope=MS.DEVICE)
    else:
        return ct.load(status, (idx,), (size,), padding_mode=ZERO, memory_order=MO.ACQUIRE,
                       memory_scope=MS.DEVICE)


@ct.function
def flags_of(head):
    return ct.astype(head, ct.int64) * HEAD + READY


@ct.function
def publish_aggregate(status, vals, P, t, a_head, agg, ACC, PACKED):
    """A look-back tile's first word (modes 2 and 4): its aggregate; tile 0's is
    its inclusive prefix."""
    if t == 0:
        publish_at(status, t, vals, P + t, ct.full((1,), READY | PREFIX, ct.int64), agg,
                   ACC, PACKED)
    else:
        publish_at(status, t, vals, t, flags_of(a_head), agg, ACC, PACKED)


@ct.function
def publish_prefix(status, vals, P, t, excl, a_head, agg, KIND, OP, ACC, BY_KEY, PACKED):
    """Publish tile t's inclusive prefix (excl, then its aggregate) in its word
    (modes 2 and 4); returns its exclusive prefix part (ok, head, value): item 0
    starts a run, so every prefix holds a head."""
    one = ct.full((1,), 1, ct.int32)
    _, _, incl = join(one, one, excl, one, a_head, agg, KIND, OP, ACC, BY_KEY)
    publish_at(status, t, vals, P + t, ct.full((1,), READY | PREFIX, ct.int64), incl, ACC,
               PACKED)
    return one, one, excl


@ct.function
def lookback_start(x, keys, y, n, counter, status, vals, P, TILE, WINDOW, ACC, KIND, OP, ID,
                   EQ, HAS_EQ, SHIFT, EXCL, INV, BY_KEY, IN_PLACE, PACKED, WIDE, SINGLE,
                   OVERLAP):
    """What a look-back tile (modes 2 and 4) does before it looks: take its ticket t,
    load the tile (tile_parts), publish its aggregate, then first_window."""
    t = ticket(counter, SINGLE)
    u, hu, h, _, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ,
                                          HAS_EQ, SHIFT, BY_KEY, IN_PLACE, WIDE)
    if not SINGLE:
        publish_aggregate(status, vals, P, t, a_head, agg, ACC, PACKED)
    w, words, z = first_window(status, t, u, TILE, WINDOW, ACC, KIND, OP, ID, SHIFT, EXCL, INV,
                               PACKED, SINGLE, OVERLAP)
    return t, u, hu, h, a_head, agg, w, words, z


@ct.function
def first_window(status, t, u, TILE, WINDOW, ACC, KIND, OP, ID, SHIFT, EXCL, INV, PACKED,
                 SINGLE, OVERLAP):
    """Issue the load of the window holding tile t-1 (w, words) and, with OVERLAP,
    scan tile u on its own while that load is in flight (z; else z is u, unused)."""
    w = t
    words = ct.zeros((WINDOW,), ct.int64)
    if not SINGLE:
        w = ct.maximum(t - 1, 0) // WINDOW
        words = load_words(status, w, WINDOW, PACKED)
    z = u
    if OVERLAP:
        z = local_scan(u, KIND, OP, ID, ACC, EXCL and not SHIFT and not INV)
    return w, words, z


@ct.function
def window_values(words, vals, P, w, WINDOW, ACC, PACKED):
    """The values of window w's status words (modes 2 and 4): beside the flags
    (PACKED), else in vals: prefixes in its second half, aggregates in its first."""
    if PACKED:
        return from_bits(words, ACC)
    else:
        prefixes = ct.load(vals, (P // WINDOW + w,), (WINDOW,))
        return ct.where(((words >> 32) & PREFIX) != 0, prefixes, ct.load(vals, (w,), (WINDOW,)))


# --- decoupled look-back (exact operators) ----------------------------------------------------
@ct.function
def lb_combine(f_a, a, f_b, b, KIND, OP, ACC):
    """(flags, value) of consecutive window lanes a then b. Flags (LB_*) combine by
    OR: some lane not ready, a complete prefix found, some lane live. The value
    runs from the newest complete prefix on; a range with no live lane passes
    the other through (a user operator has no identity to pad with)."""
    take_b = ((f_b & LB_FOUND) != 0) | ((f_a & LB_LIVE) == 0)
    return (f_a | f_b,
            ct.where((f_b & LB_LIVE) == 0, a, ct.where(take_b, b, op2(a, b, KIND, OP, ACC))))


@ct.function
def prefix_lookback(t, w, words, status, vals, P, a_head, agg, WINDOW, ACC, KIND, OP, ID,
                    BY_KEY, PACKED, SINGLE):
    """Mode 2's look-back for tile t from its first window (w, words: the window
    holding tile t-1, already in flight): fold windows of status words, newest
    first, with one reduction each until a complete prefix (PREFIX, or an
    aggregate with a HEAD); publish the tile's inclusive prefix and return its
    exclusive prefix part (ok, head, value)."""
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = ct.full((1,), ID, ACC)
    end = t
    if not SINGLE:
        excl = ct.full((1,), ID, ACC)
        e_ok = ct.zeros((1,), ct.int32)
        while end > 0:
            lane = w * WINDOW + ct.arange(WINDOW, dtype=ct.int32)
            live = lane < end
            f = words >> 32
            v = window_values(words, vals, P, w, WINDOW, ACC, PACKED)
            lf = ct.where(live, ct.where((f & READY) != 0, LB_LIVE, LB_LIVE | LB_NOT_READY)
                          | ct.where((f & (PREFIX | HEAD)) != 0, LB_FOUND, 0), 0)
            flags, part = ct.reduce(
                (ct.astype(lf, ct.int32), ct.where(live, v, ID)), 0,
                lambda f1, v1, f2, v2: lb_combine(f1, v1, f2, v2, KIND, OP, ACC),
                (0, ID), keepdims=True)
            fl = flags.item()
            if (fl & LB_NOT_READY) == 0:
                # the part (a window's live lanes: never empty) before what is folded so
                # far; a user operator has no identity, so its first part is taken as is
                if KIND == "user":
                    excl = ct.where(e_ok != 0, op2(part, excl, KIND, OP, ACC), part)
                    e_ok = ct.full((1,), 1, ct.int32)
                else:
                    excl = op2(part, excl, KIND, OP, ACC)
                end = ct.where((fl & LB_FOUND) != 0, 0, w * WINDOW)
            if end > 0:   # a window not yet ready, or no complete prefix in it: look again
                w = (end - 1) // WINDOW
                words = load_words(status, w, WINDOW, PACKED)
        if t > 0:
            p_ok, p_head, p_val = publish_prefix(status, vals, P, t, excl, a_head, agg, KIND,
                                                 OP, ACC, BY_KEY, PACKED)
    return p_ok, p_head, p_val


@ct.function
def lookback_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, WINDOW, ACC, KIND,
                  OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, OVERLAP):
    """Tile t of a mode-2 block that loads ahead (scan_ahead), after its load and
    its aggregate's publication: issue the load of the window holding tile t-1,
    scan the tile while it is in flight (OVERLAP), look back, publish the
    tile's inclusive prefix and store the scanned tile."""
    w, words, z = first_window(status, t, u, TILE, WINDOW, ACC, KIND, OP, ID, SHIFT, EXCL, INV,
                               PACKED, False, OVERLAP)
    p_ok, p_head, p_val = prefix_lookback(t, w, words, status, vals, P, a_head, agg, WINDOW,
                                          ACC, KIND, OP, ID, BY_KEY, PACKED, False)
    store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
               INV, HAS_INIT, BY_KEY, WIDE, OVERLAP)


@ct.kernel
def scan_lookback(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                  WINDOW: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                  OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant, HAS_EQ: ct.Constant[bool],
                  SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                  HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                  IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[bool],
                  WIDE: ct.Constant[bool], SINGLE: ct.Constant[bool], PIPE: ct.Constant[bool]):
    """Mode 2: the single-pass scan with a decoupled look-back (Merrill and
    Garland; examples/lookback_scan.py), for exact operators only (module
    docstring). Tile t publishes its aggregate at once (flags READY, HEAD when a
    key run starts in it), looks back a WINDOW of status words at a time (the
    first load in flight while the tile is scanned), folds them with one
    reduction until it meets a complete prefix (PREFIX, or an aggregate with a
    HEAD), and publishes its inclusive prefix. Wide values: aggregates in
    vals[t], prefixes in vals[P + t]. One tile a block; with PIPE (the policy's
    load_ahead), blocks take tiles until the input ends, loading the next before
    looking back (scan_ahead)."""
    # the tile's own scan overlaps the look-back as in scan_groups (user operators too,
    # when their tile is not shifted)
    OVERLAP = not BY_KEY and (KIND != "user" or not SHIFT)
    if PIPE and not SINGLE:
        scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, WINDOW, ACC, KIND, OP,
                   ID, EQ, HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE, PACKED, WIDE,
                   OVERLAP, 2)
    else:
        t, u, hu, h, a_head, agg, w, words, z = lookback_start(
            x, keys, y, n, counter, status, vals, P, TILE, WINDOW, ACC, KIND, OP, ID, EQ,
            HAS_EQ, SHIFT, EXCL, INV, BY_KEY, IN_PLACE, PACKED, WIDE, SINGLE, OVERLAP)
        p_ok, p_head, p_val = prefix_lookback(t, w, words, status, vals, P, a_head, agg, WINDOW,
                                              ACC, KIND, OP, ID, BY_KEY, PACKED, SINGLE)
        store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                   INV, HAS_INIT, BY_KEY, WIDE, OVERLAP)


# --- ordered look-back (any operator) -----------------------------------------------------------
@ct.function
def window_masks(words, lane, t, WINDOW):
    """One int64: bit j (low half) set where window lane j (tile `lane`, before
    t) holds a complete prefix (PREFIX, or an aggregate with a HEAD), bit 32 + j
    where it is not yet ready. Its low half exceeds its high half exactly when
    some complete prefix has every lane after it ready (the two sets of bits are
    disjoint: the larger holds the highest bit)."""
    f = words >> 32
    live = lane < t
    bit = ct.full((WINDOW,), 1, ct.int64) << ct.arange(WINDOW, dtype=ct.int64)
    ready = (f & READY) != 0
    complete = live & ready & ((f & (PREFIX | HEAD)) != 0)
    waiting = live & ~ready
    return ct.sum(ct.where(complete, bit, 0) + ct.where(waiting, bit << 32, 0), 0,
                  keepdims=True)


@ct.function
def window_waits(masks):
    """Whether a window's masks (window_masks) show no complete prefix with every
    lane after it ready: the look-back must read the window again."""
    return (masks & 0xFFFFFFFF) <= ((masks >> 32) & 0xFFFFFFFF)


@ct.function
def from_newest_prefix(masks, lane, t, WINDOW):
    """1 on the window's lanes from its newest complete prefix (the highest bit
    of the masks' low half) up to tile t-1, else 0."""
    bit = ct.full((WINDOW,), 1, ct.int64) << ct.arange(WINDOW, dtype=ct.int64)
    return ct.where((lane < t) & (bit > ((masks & 0xFFFFFFFF) >> 1)), 1, 0)


@ct.kernel
def scan_ordered(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                 WINDOW: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                 OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant, HAS_EQ: ct.Constant[bool],
                 SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                 HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                 IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[bool],
                 WIDE: ct.Constant[bool], SINGLE: ct.Constant[bool]):
    """Mode 4: the decoupled look-back, deterministic for every operator. Tile
    t's exclusive prefix is the left fold (((A[0] (+) A[1]) (+) A[2]) ...) (+)
    A[t-1] of the tiles' aggregates, and so is I[p] (+) A[p+1] (+) ... (+) A[t-1]
    folded left to right from ANY earlier tile p's inclusive prefix I[p] (itself
    that left fold through p; by key, from any aggregate holding a head). So the
    tile publishes its aggregate at once (WINDOW <= 32), reads the aligned window
    of status words holding tile t-1 (the first load in flight while the tile is
    scanned) until some complete prefix in it has every later word ready, and
    folds from the newest such prefix with ct.reduce(sequential=True). Which
    prefix it finds depends on timing; the prefix it computes does not. Wide
    values: aggregates in vals[t], prefixes in vals[P + t], as in mode 2."""
    OVERLAP = not BY_KEY and (KIND != "user" or not SHIFT)
    t, u, hu, h, a_head, agg, w, words, z = lookback_start(
        x, keys, y, n, counter, status, vals, P, TILE, WINDOW, ACC, KIND, OP, ID, EQ, HAS_EQ,
        SHIFT, EXCL, INV, BY_KEY, IN_PLACE, PACKED, WIDE, SINGLE, OVERLAP)
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = ct.full((1,), ID, ACC)
    if not SINGLE:
        lane = w * WINDOW + ct.arange(WINDOW, dtype=ct.int32)
        masks = window_masks(words, lane, t, WINDOW)
        while (t > 0) & window_waits(masks).item():
            words = load_words(status, w, WINDOW, PACKED)
            masks = window_masks(words, lane, t, WINDOW)
        if t > 0:
            v = window_values(words, vals, P, w, WINDOW, ACC, PACKED)
            ok = from_newest_prefix(masks, lane, t, WINDOW)   # folded left to right
            if BY_KEY:
                hd = ct.astype(((words >> 32) & HEAD) >> 1, ct.int32)
                _, _, excl = ct.reduce(
                    (ok, ct.where(ok != 0, hd, 0), v), 0,
                    lambda oa, ha, a, ob, hb, b: join(oa, ha, a, ob, hb, b, KIND, OP, ACC,
                                                      BY_KEY),
                    (0, 0, 0), keepdims=True, sequential=True)
            elif KIND != "user":
                # lanes before the prefix hold an exact identity (float sums: -0.0, which
                # leaves every x, -0.0 included, as it is): one combine a lane
                pad = -0.0 if KIND == "add" and ACC.is_float else ID
                excl = ct.reduce(ct.where(ok != 0, v, pad), 0,
                                 lambda a, b: op2(a, b, KIND, OP, ACC), pad, keepdims=True,
                                 sequential=True)
            else:
                _, excl = ct.reduce((ok, v), 0,
                                    lambda oa, a, ob, b: join_ok(oa, a, ob, b, KIND, OP, ACC),
                                    (0, 0), keepdims=True, sequential=True)
            p_ok, p_head, p_val = publish_prefix(status, vals, P, t, excl, a_head, agg, KIND,
                                                 OP, ACC, BY_KEY, PACKED)
    store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL, INV,
               HAS_INIT, BY_KEY, WIDE, OVERLAP)


# --- two-level look-back over aligned groups (any operator) ------------------------------------
@ct.function
def group_values(status, vals, k, words, need, GROUP, ACC, PACKED):
    """Group k's status words, reloaded until the lanes in `need` are published,
    and their values."""
    while ct.min(ct.where(need, (words >> 32) & READY, 1), 0, keepdims=True).item() != 1:
        words = load_words(status, k, GROUP, PACKED)
    if PACKED:
        v = from_bits(words, ACC)
    else:
        v = ct.load(vals, (k,), (GROUP,))
    return words, v


@ct.function
def publish_group(status, vals, P, k, v, hd, a_head, GROUP, KIND, OP, ID, ACC, BY_KEY,
                  PACKED):
    """Publish Ag(k), group k's aggregates v folded in order (heads hd; the
    group's last tile's own aggregate in the last lane), in status[P + k]
    (vals[P + k])."""
    if KIND != "user" and not BY_KEY:
        publish_at(status, P + k, vals, P + k, flags_of(a_head), fold_known(v, KIND, ID, ACC),
                   ACC, PACKED)
    else:
        _, f_head, f_val = fold_parts(ct.full((GROUP,), 1, ct.int32), hd, v, KIND, OP, ACC,
                                      BY_KEY)
        publish_at(status, P + k, vals, P + k, flags_of(f_head), f_val, ACC, PACKED)


@ct.function
def groups_prefix_fused(status, vals, P, t, k, j, words, gwords, a_head, agg, GROUP, ACC, KIND,
                        OP, ID, PACKED, PUBLISH):
    """Tile t's exclusive prefix part in mode 3, not by key, when a group has as
    many tiles as the group words (GROUP == GROUPS): the group's aggregates
    before it and the groups' before its group are waited for once (one
    readiness reduction, not two), then a well-known operator combines them lane
    by lane side by side and folds once (a fixed tree over the lanes, so the
    association depends on t alone), a user operator folds each in order as
    (ok, value) pairs and joins the two (carried through one reduction, the two
    folds ran slower: H200 2^27 3664 against 3773 GB/s). With PUBLISH a group's
    last tile first publishes its group's aggregate, which waits only for its
    own group."""
    lane = ct.arange(GROUPS, dtype=ct.int32)
    need = lane < j
    gneed = lane < k
    if PUBLISH and j == GROUP - 1:
        words, v = group_values(status, vals, k, words, need, GROUP, ACC, PACKED)
        publish_group(status, vals, P, k, ct.where(lane == j, agg, v),
                      ct.zeros((GROUP,), ct.int32), a_head, GROUP, KIND, OP, ID, ACC, False,
                      PACKED)
    while ct.min(ct.where(need, (words >> 32) & READY, 1)
                 & ct.where(gneed, (gwords >> 32) & READY, 1), 0, keepdims=True).item() != 1:
        words = load_words(status, k, GROUP, PACKED)
        gwords = load_words(status, P // GROUPS, GROUPS, PACKED)
    if PACKED:
        v = from_bits(words, ACC)
        gv = from_bits(gwords, ACC)
    else:
        v = ct.load(vals, (k,), (GROUP,))
        gv = ct.load(vals, (P // GROUPS,), (GROUPS,))
    if KIND == "user":
        zero = ct.zeros((GROUPS,), ct.int32)
        g_ok, _, g_val = fold_parts(ct.where(gneed, 1, 0), zero, gv, KIND, OP, ACC, False)
        e_ok, _, e_val = fold_parts(ct.where(need, 1, 0), zero, v, KIND, OP, ACC, False)
        p_ok, p_val = join_ok(g_ok, g_val, e_ok, e_val, KIND, OP, ACC)
        return p_ok, ct.zeros((1,), ct.int32), p_val
    both = combine_known(ct.where(gneed, gv, ID), ct.where(need, v, ID), KIND)
    return (ct.where(t > 0, ct.full((1,), 1, ct.int32), 0), ct.zeros((1,), ct.int32),
            fold_known(both, KIND, ID, ACC))


@ct.function
def groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, GROUP, ACC, KIND,
                OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, SINGLE, OVERLAP,
                PUBLISH):
    """Tile t of mode 3 after its load (and its aggregate's publication): find
    its exclusive prefix fold(Ag(0 .. k-1)) (+) fold(A[kG .. t-1]) and store the
    scanned tile; with PUBLISH a group's last tile publishes Ag(k) on the way
    (without, its block did when it loaded the tile: scan_ahead)."""
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = agg
    k = t // GROUP
    j = t - k * GROUP
    words = ct.zeros((GROUP,), ct.int64)
    gwords = ct.zeros((GROUPS,), ct.int64)
    if not SINGLE:
        words = load_words(status, k, GROUP, PACKED)     # in flight while the tile is scanned
    z = u
    if OVERLAP:
        z = local_scan(u, KIND, OP, ID, ACC, EXCL and not SHIFT and not INV)
    if not SINGLE:
        gwords = load_words(status, P // GROUPS, GROUPS, PACKED)
        if not BY_KEY and GROUP == GROUPS:
            p_ok, p_head, p_val = groups_prefix_fused(status, vals, P, t, k, j, words,
                                                      gwords, a_head, agg, GROUP, ACC,
                                                      KIND, OP, ID, PACKED, PUBLISH)
        else:
            lane = ct.arange(GROUP, dtype=ct.int32)
            last = j == GROUP - 1
            need = lane < j
            words, v = group_values(status, vals, k, words, need, GROUP, ACC, PACKED)
            own = lane == j
            v = ct.where(own, agg, v)
            known = KIND != "user" and not BY_KEY
            hd = ct.zeros((GROUP,), ct.int32)
            if not known:
                hd = ct.where(own, a_head, ct.astype(((words >> 32) & HEAD) >> 1, ct.int32))
            if PUBLISH and last:   # the whole group (this tile's aggregate in the last lane)
                publish_group(status, vals, P, k, v, hd, a_head, GROUP, KIND, OP, ID, ACC,
                              BY_KEY, PACKED)
            if known:
                # well-known operators not by key: masked lanes hold the identity (a fixed
                # tree over the lanes either way, so the association depends on j alone)
                e_ok = ct.where(j > 0, ct.full((1,), 1, ct.int32), 0)
                e_head = ct.zeros((1,), ct.int32)
                e_val = fold_known(ct.where(need, v, ID), KIND, ID, ACC)
            else:
                e_ok, e_head, e_val = fold_parts(ct.where(need, 1, 0), ct.where(need, hd, 0),
                                                 v, KIND, OP, ACC, BY_KEY)
            glane = ct.arange(GROUPS, dtype=ct.int32)
            gneed = glane < k
            while ct.min(ct.where(gneed, (gwords >> 32) & READY, 1), 0,
                         keepdims=True).item() != 1:
                gwords = load_words(status, P // GROUPS, GROUPS, PACKED)
            if PACKED:
                gv = from_bits(gwords, ACC)
            else:
                gv = ct.load(vals, (P // GROUPS,), (GROUPS,))
            if known:
                g_ok = ct.where(k > 0, ct.full((1,), 1, ct.int32), 0)
                g_head = ct.zeros((1,), ct.int32)
                g_val = fold_known(ct.where(gneed, gv, ID), KIND, ID, ACC)
            else:
                gh = ct.where(gneed, ct.astype(((gwords >> 32) & HEAD) >> 1, ct.int32), 0)
                g_ok, g_head, g_val = fold_parts(ct.where(gneed, 1, 0), gh, gv, KIND, OP, ACC,
                                                 BY_KEY)
            p_ok, p_head, p_val = join(g_ok, g_head, g_val, e_ok, e_head, e_val, KIND, OP, ACC,
                                       BY_KEY)
    store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL, INV,
               HAS_INIT, BY_KEY, WIDE, OVERLAP)


@ct.function
def publish_ahead(status, vals, P, t, a_head, agg, GROUP, ACC, KIND, OP, ID, BY_KEY, PACKED,
                  MODE):
    """What tile t of a block that loads ahead (scan_ahead) publishes as soon as it
    is loaded: its aggregate, or in mode 3 for a group's last tile the group's
    aggregate, once the group's other aggregates are in (published by blocks as
    they load them: this waits for nothing else)."""
    if MODE == 2:
        publish_aggregate(status, vals, P, t, a_head, agg, ACC, PACKED)
    else:
        k = t // GROUP
        j = t - k * GROUP
        if j != GROUP - 1:
            publish_at(status, t, vals, t, flags_of(a_head), agg, ACC, PACKED)
        else:
            lane = ct.arange(GROUP, dtype=ct.int32)
            words, v = group_values(status, vals, k, load_words(status, k, GROUP, PACKED),
                                    lane < j, GROUP, ACC, PACKED)
            own = lane == j
            hd = ct.where(own, a_head, ct.astype(((words >> 32) & HEAD) >> 1, ct.int32))
            publish_group(status, vals, P, k, ct.where(own, agg, v), hd, a_head, GROUP, KIND,
                          OP, ID, ACC, BY_KEY, PACKED)


# --- blocks that load ahead (modes 2 and 3) -----------------------------------------------------
@ct.function
def scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, SIZE, ACC, KIND, OP, ID, EQ,
               HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE, PACKED, WIDE, OVERLAP, MODE):
    """The PIPE of scan_lookback (MODE 2, SIZE: its window) and scan_groups (MODE
    3, SIZE: its group), as examples/lookback_scan.py: a grid of about the
    resident blocks, each taking tiles by ticket until its ticket runs past the
    tiles (each block takes exactly one such ticket, which ends it). A block
    loads its next tile and publishes what that tile publishes (begin_ahead)
    before it finds the prefix of the tile it holds and stores it
    (lookback_rest, groups_rest): memory stays busy while it waits, and its
    predecessors have long published their aggregates by the time it looks
    (one tile a block moves in waves behind the slowest load before it). The
    ticket of the tile after next is drawn while the next one loads, and that
    tile is prefetched into L2 at once (prefetch_tile; the second tile is not:
    all blocks prefetching it at the start delay the first loads, H200 2^24
    int32 -4%). No aggregate waits for a look-back (mode 3: a group's aggregate
    waits only for the group's tile aggregates), and a look-back waits only for
    what smaller tiles publish, taken by running blocks: no deadlock, resident
    or not. Mode 3 folds what it folds without PIPE, in the same association:
    the same bits. (Never SINGLE: the host loads ahead only over several
    tiles.)"""
    tiles = (n - 1) // TILE + 1
    t = ticket(counter, False)
    t_next = t
    if t < tiles:
        t_next = ticket(counter, False)     # the next tile's ticket, drawn a tile early
    u, hu, h, a_head, agg = begin_ahead(
        x, keys, y, n, t, tiles, status, vals, P, ct.zeros((TILE,), ACC),
        ct.zeros((TILE,), ct.int32), ct.zeros((TILE,), ct.int32), ct.zeros((1,), ct.int32),
        ct.full((1,), ID, ACC), TILE, SIZE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY,
        IN_PLACE, PACKED, WIDE, MODE)
    while t < tiles:
        # the next tile first: loaded, and what it publishes published, before this one's
        # prefix (a past-the-end ticket keeps this tile's parts: unused)
        u_next, hu_next, h_next, head_next, agg_next = begin_ahead(
            x, keys, y, n, t_next, tiles, status, vals, P, u, hu, h, a_head, agg, TILE, SIZE,
            ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, PACKED, WIDE, MODE)
        t_after = t_next
        if t_next < tiles:
            t_after = ticket(counter, False)  # in flight with the next tile's load
            prefetch_tile(x, keys, y, t_after, TILE, BY_KEY, IN_PLACE)
        if MODE == 2:
            lookback_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, SIZE, ACC,
                          KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE,
                          OVERLAP)
        else:
            groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, SIZE, ACC,
                        KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, False,
                        OVERLAP, False)
        t = t_next
        t_next = t_after
        u = u_next
        hu = hu_next
        h = h_next
        a_head = head_next
        agg = agg_next


@ct.function
def prefetch_tile(x, keys, y, t, TILE, BY_KEY, IN_PLACE):
    """Bring tile t, which scan_ahead loads a tile from now, into L2 (a tile
    past the end: nothing): its load then waits on L2, not on memory, and the
    block holds no more registers for it (H200, 2^27: the sample 86 -> 95% of
    the copy, DeviceScan's int32 sum 85 -> 93%)."""
    if IN_PLACE:
        ct.prefetch(y, (t,), (TILE,))
    else:
        ct.prefetch(x, (t,), (TILE,))
    if BY_KEY:
        ct.prefetch(keys, (t,), (TILE,))


@ct.function
def begin_ahead(x, keys, y, n, t, tiles, status, vals, P, u, hu, h, a_head, agg, TILE, SIZE, ACC,
                KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, PACKED, WIDE, MODE):
    """Tile t of a block that loads ahead (scan_ahead): a tile of the input
    (t < tiles) is loaded (tile_parts) and what it publishes published at once
    (publish_ahead); the ticket past the tiles that ends the block loads nothing
    (no index past the input is formed: 32-bit offsets stay below num_items) and
    returns the parts given (u, hu, h, a_head, agg) as they are."""
    if t < tiles:
        u, hu, h, a_ok, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID,
                                                 EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, WIDE)
        publish_ahead(status, vals, P, t, a_head, agg, SIZE, ACC, KIND, OP, ID, BY_KEY, PACKED,
                      MODE)
    return u, hu, h, a_head, agg


@ct.kernel
def scan_groups(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                GROUP: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant, HAS_EQ: ct.Constant[bool],
                SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[bool],
                WIDE: ct.Constant[bool], SINGLE: ct.Constant[bool], PIPE: ct.Constant[bool]):
    """Mode 3: the single-pass scan with a two-level look-back (module
    docstring). Tile t = k*GROUP + j publishes its aggregate A[t] in status[t]
    (vals[t]); the group's last tile publishes the group's aggregate
    Ag(k) = fold(A[kG .. kG+G-1]) in status[P + k] (vals[P + k]) as soon as its
    group's aggregates are in, waiting for nothing else. Tile t's exclusive
    prefix is fold(Ag(0 .. k-1)) (+) fold(A[kG .. t-1]): one load of GROUPS
    group words and one of the group's GROUP words, each folded by one
    fixed-shape masked reduction. No tile waits for another tile's prefix (no
    chain): only for the aggregates before it, as in the decoupled look-back.
    With PIPE (the policy's load_ahead), blocks take tiles until the input
    ends, loading the next (and publishing its aggregate, or its group's)
    before they look back for the one they hold (scan_ahead)."""
    # the tile's own scan overlaps the look-back (prefix applied to every lane after it)
    # for well-known operators and, unshifted, for user ones: not by key, where heads cut
    # the prefix off, nor for a shifted user tile, whose free lane 0 has no identity to hold
    OVERLAP = not BY_KEY and (KIND != "user" or not SHIFT)
    if PIPE and not SINGLE:
        scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, GROUP, ACC, KIND, OP,
                   ID, EQ, HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE, PACKED, WIDE,
                   OVERLAP, 3)
    else:
        t = ticket(counter, SINGLE)
        u, hu, h, a_ok, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ,
                                                 HAS_EQ, SHIFT, BY_KEY, IN_PLACE, WIDE)
        if not SINGLE:
            if t - (t // GROUP) * GROUP != GROUP - 1:   # a group's last aggregate: read by
                publish_at(status, t, vals, t, flags_of(a_head), agg, ACC, PACKED)   # nobody
        groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, GROUP, ACC,
                    KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, SINGLE,
                    OVERLAP, True)


# --- one launch for small inputs ----------------------------------------------------------------
@ct.kernel
def scan_recompute(x, keys, y, n, init, TILE: ct.Constant[int], ACC: ct.Constant,
                   KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant,
                   HAS_EQ: ct.Constant[bool], SHIFT: ct.Constant[bool],
                   EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                   HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                   WIDE: ct.Constant[bool]):
    """A scan in one launch without temporary storage, for small inputs (not in
    place: a block re-reads items earlier blocks would overwrite): block t
    folds the items before its tile, tiles 0 .. t-1, itself, then scans its
    tile as scan_groups (by key: scan_downsweep) does with that prefix.
    Nothing to clear before it and nothing to wait for; the re-reads (tiles *
    (tiles - 1) / 2 tiles) come from L2 at the sizes the policy sends here.
    Deterministic: a well-known (commutative) operator accumulates the tiles
    lane-wise and folds the lanes once, a user operator (or any by key) folds
    each tile in order and the tiles in order, both functions of t and TILE
    alone."""
    t = ct.bid(0)
    if BY_KEY:
        recompute_by_key(x, keys, y, n, init, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, EXCL,
                         HAS_INIT, WIDE)
    else:
        recompute_plain(x, keys, y, n, init, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT,
                        EXCL, INV, HAS_INIT, WIDE)


@ct.function
def recompute_plain(x, keys, y, n, init, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, EXCL,
                    INV, HAS_INIT, WIDE):
    """scan_recompute's block t without keys."""
    p_val = ct.zeros((1,), ACC)
    if t > 0:           # (block 0 skips the fold's reduction and barriers)
        if KIND != "user":
            acc = ct.full((TILE,), ID, ACC)
            for i in range(t):
                acc = op2(acc, ct.astype(ct.load(x, (i,), (TILE,)), ACC), KIND, OP, ACC)
            p_val = fold_known(acc, KIND, ID, ACC)
        else:
            for i in range(t):
                a = ct.reduce(ct.astype(ct.load(x, (i,), (TILE,)), ACC), 0,
                              lambda a, b: op2(a, b, KIND, OP, ACC), 0, keepdims=True)
                if i == 0:
                    p_val = a
                else:
                    p_val = op2(p_val, a, KIND, OP, ACC)
    p_ok = ct.where(t > 0, ct.full((1,), 1, ct.int32), 0)
    p_head = ct.zeros((1,), ct.int32)
    u, hu, h, _, _, _ = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT,
                                   False, False, WIDE)
    if KIND != "user" or not SHIFT:
        z = local_scan(u, KIND, OP, ID, ACC, EXCL and not SHIFT and not INV)
        finish_known(y, n, t, u, z, p_ok, p_val, init, TILE, KIND, OP, ACC, EXCL, HAS_INIT,
                     INV, WIDE)
    else:
        tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                    HAS_INIT, False, WIDE)


@ct.function
def recompute_by_key(x, keys, y, n, init, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, EXCL,
                     HAS_INIT, WIDE):
    """scan_recompute's block t by key. Its prefix part is the fold of the items
    from the last run head before the tile (item 0 is one) to the tile's
    start (last_head_before), and the tiles from the head's on are folded: a
    block re-reads one or two tiles when runs are shorter than a tile, every
    earlier tile twice when a run spans them all. A well-known operator folds
    those items lane-wise (items before the head masked to the identity),
    a user operator joins the tiles' parts (scan_partials') in order."""
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = ct.zeros((1,), ACC)
    if t > 0:
        last = last_head_before(keys, n, t, TILE, EQ, HAS_EQ, WIDE)
        if KIND != "user":
            acc = ct.full((TILE,), ID, ACC)
            for i in range(last // TILE, t):
                _, g = tile_index(i, n, TILE, WIDE)
                v = ct.astype(ct.load(x, (i,), (TILE,)), ACC)
                acc = op2(acc, ct.where(g >= last, v, ID), KIND, OP, ACC)
            p_val = fold_known(acc, KIND, ID, ACC)
        else:
            for i in range(last // TILE, t):
                _, _, _, a_ok, a_head, agg = tile_parts(x, keys, y, n, i, TILE, ACC, KIND, OP,
                                                        ID, EQ, HAS_EQ, False, True, False, WIDE)
                p_ok, p_head, p_val = join(p_ok, p_head, p_val, a_ok, a_head, agg, KIND, OP,
                                           ACC, True)
        p_ok = ct.full((1,), 1, ct.int32)
        p_head = ct.full((1,), 1, ct.int32)
    u, hu, h, _, _, _ = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ, HAS_EQ, EXCL,
                                   True, False, WIDE)
    tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                HAS_INIT, True, WIDE)


@ct.function
def last_head_before(keys, n, t, TILE, EQ, HAS_EQ, WIDE):
    """The index of the last run head in tiles 0 .. t-1 (t > 0): in tile t - 1
    when it has one (a block reduction), else the lane-wise latest head of
    tiles 0 .. t-2 (loads and compares only, one reduction at the end; item 0
    is always a head)."""
    _, g = tile_index(t - 1, n, TILE, WIDE)
    last = ct.max(ct.where(heads_at(keys, g, n, EQ, HAS_EQ) != 0, g, -1), 0)
    if last < 0:
        lanes = ct.where(g < 0, g, -1)
        for i in range(t - 1):
            _, g = tile_index(i, n, TILE, WIDE)
            lanes = ct.maximum(lanes, ct.where(heads_at(keys, g, n, EQ, HAS_EQ) != 0, g, -1))
        last = ct.max(lanes, 0)
    return last


# --- reduce-then-scan -------------------------------------------------------------------------
@ct.kernel
def scan_partials(x, keys, y, n, status, vals, TILE: ct.Constant[int], PER: ct.Constant[int],
                  ACC: ct.Constant, KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant,
                  EQ: ct.Constant, HAS_EQ: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                  IN_PLACE: ct.Constant[bool], WIDE: ct.Constant[bool]):
    """Partial b: the part of tiles [b*PER, (b+1)*PER) (status: its head flag,
    vals: its value)."""
    b = ct.bid(0)
    tiles = ct.cdiv(n, TILE)
    first = b * PER
    count = ct.minimum(tiles - first, PER)
    ok = ct.zeros((1,), ct.int32)
    head = ct.zeros((1,), ct.int32)
    val = ct.zeros((1,), ACC)
    for i in range(count):
        _, _, _, a_ok, a_head, agg = tile_parts(x, keys, y, n, first + i, TILE, ACC, KIND, OP,
                                                ID, EQ, HAS_EQ, False, BY_KEY, IN_PLACE, WIDE)
        ok, head, val = join(ok, head, val, a_ok, a_head, agg, KIND, OP, ACC, BY_KEY)
    ct.store(status, (b,), ct.astype(head, ct.int64))
    ct.store(vals, (b,), val)


@ct.kernel
def scan_downsweep(x, keys, y, n, init, status, vals, TILE: ct.Constant[int],
                   PER: ct.Constant[int], GT: ct.Constant[int], ACC: ct.Constant,
                   KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant,
                   HAS_EQ: ct.Constant[bool], EXCL: ct.Constant[bool],
                   HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                   IN_PLACE: ct.Constant[bool], WIDE: ct.Constant[bool]):
    """Block b: fold partials 0..b-1 (GT lanes, a power of two >= the grid),
    then scan tiles [b*PER, (b+1)*PER) in order."""
    b = ct.bid(0)
    lane = ct.arange(GT, dtype=ct.int32)
    before = lane < b
    heads = ct.astype(ct.load(status, (0,), (GT,), padding_mode=ZERO), ct.int32)
    values = ct.load(vals, (0,), (GT,), padding_mode=ZERO)
    p_ok, p_head, p_val = fold_parts(ct.where(before, 1, 0), ct.where(before, heads, 0), values,
                                     KIND, OP, ACC, BY_KEY)
    tiles = ct.cdiv(n, TILE)
    first = b * PER
    for i in range(ct.minimum(tiles - first, PER)):
        t = first + i
        u, hu, h, a_ok, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ,
                                                 HAS_EQ, EXCL, BY_KEY, IN_PLACE, WIDE)
        tile_finish(y, n, t, u, hu, h, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                    HAS_INIT, BY_KEY, WIDE)
        p_ok, p_head, p_val = join(p_ok, p_head, p_val, a_ok, a_head, agg, KIND, OP, ACC,
                                   BY_KEY)
