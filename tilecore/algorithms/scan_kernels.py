"""DeviceScan's tile kernels (CUB's agents), in the public tile language. This
module holds the single-pass kernels (modes 0, 2, 3 and 4) and the load-ahead
driver they share (`scan_ahead`), and is where the host (scan.py) finds every
kernel; their parts live in scan_tiles (one tile: load, aggregate, scan,
store), scan_status (status words: publishing and reading aggregates and
prefixes; scan_init), scan_lookback (modes 2 and 4), scan_groups (mode 3),
scan_recompute (one launch for small inputs) and scan_twopass (mode 1,
reduce-then-scan).

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

Aggregates and prefixes are *parts* (ok, head, value), combined in order by
`join` (scan_tiles).

Drivers (the policy's `mode` chooses; `exact_mode` for exact operators: integer
add/mul/and/or/xor, min/max of any dtype and user operators on integers, whose
every association gives the same bits):

- `scan_lookback` (mode 2, exact operators only): the decoupled look-back of
  examples/lookback_scan.py (its docstring). Blocks take tile numbers from an
  atomic ticket counter, so a block only waits for tiles taken earlier by
  running blocks; except where a grid of at most the resident blocks loading
  ahead has a block for every tile (mid sizes): there block b holds tile b, as
  in CUB's scan (blocks start in index order, so a block waits only for
  blocks already started), and the counter, whose L2 home decided 10-17% of a 2^20 scan's speed
  (RESULTS, thirty-first session), is not touched. It folds whatever
  aggregates and prefixes it finds, so its association depends on timing: the
  policy refuses it for other operators.
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
  as soon as its group's aggregates are in), from one load of LANES groups'
  words, one of the group's G status words and two fixed-shape masked
  reductions (with LANES == G both are waited for by one readiness check, and
  a well-known operator's two masked tiles are combined lane by lane and
  folded once: groups_prefix_fused). A tile waits
  only for the aggregates before it, as in the decoupled look-back, never for
  another tile's prefix. The host doubles G until the groups fit in GROUPS
  (256) words, LANES = GROUPS; or, with the policy's group_sqrt, takes the
  smallest G whose square covers the tiles (LANES = G) while that is at most
  GROUPS. Deterministic: see below.
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

Tiles publish through status words (flags and a value of up to 32 bits in one
64-bit word, an 8-byte value split over it and a second word, or the value in
`vals`: scan_status), which `scan_init` clears (`scan_init_split` with the
second words), with the ticket counter, before a single-pass scan.
"""
from __future__ import annotations

import tilecore as ct

from .scan_groups import GROUPS, groups_rest, publish_ahead
from .scan_lookback import (from_newest_prefix, lookback_rest, lookback_start, prefix_lookback,
                            checked_window, window_masks, window_values, window_waits)
from .scan_recompute import scan_recompute
from .scan_status import (HEAD, MO, PREFIX, READY, flags_of, from_bits, load_words,
                          publish, publish_at, publish_prefix, read_words, scan_init,
                          scan_init_split, ticket)
from .scan_tiles import (fold_parts, join, join2, join_ok, op2, store_tile, tile_aggregate,
                         tile_finish, tile_load, tile_parts)
from .scan_twopass import scan_downsweep, scan_partials

__all__ = ["scan_init", "scan_init_split", "scan_fenwick", "scan_lookback", "scan_ordered",
           "scan_groups", "scan_recompute", "window_masks", "window_waits", "from_newest_prefix",
           "scan_partials", "scan_downsweep", "READY", "HEAD", "PREFIX", "GROUPS"]


@ct.kernel
def scan_fenwick(x, keys, y, n, init, counter, status, vals, TILE: ct.Constant[int],
                 ACC: ct.Constant, KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant,
                 EQ: ct.Constant, HAS_EQ: ct.Constant[bool], EXCL: ct.Constant[bool],
                 HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                 IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[int],
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


@ct.kernel
def scan_lookback(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                  WINDOW: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                  OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant, HAS_EQ: ct.Constant[bool],
                  SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                  HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                  IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[int],
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
        # (LANES, the groups' words of mode 3, is not read here: WINDOW stands in)
        scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, WINDOW, WINDOW, ACC,
                   KIND, OP, ID, EQ, HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE,
                   PACKED, WIDE, OVERLAP, 2)
    else:
        t, u, hu, h, a_head, agg, w, words, z = lookback_start(
            x, keys, y, n, counter, status, vals, P, TILE, WINDOW, ACC, KIND, OP, ID, EQ,
            HAS_EQ, SHIFT, EXCL, INV, BY_KEY, IN_PLACE, PACKED, WIDE, SINGLE, OVERLAP)
        p_ok, p_head, p_val = prefix_lookback(t, w, words, status, vals, P, a_head, agg, WINDOW,
                                              ACC, KIND, OP, ID, BY_KEY, PACKED, SINGLE)
        store_tile(y, n, t, u, hu, h, z, p_ok, p_head, p_val, init, TILE, KIND, OP, ACC, EXCL,
                   INV, HAS_INIT, BY_KEY, WIDE, OVERLAP)


@ct.kernel
def scan_ordered(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                 WINDOW: ct.Constant[int], ACC: ct.Constant, KIND: ct.Constant[str],
                 OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant, HAS_EQ: ct.Constant[bool],
                 SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool], INV: ct.Constant[bool],
                 HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                 IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[int],
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
        words, hi = checked_window(words, vals, P, w, WINDOW, PACKED)
        masks = window_masks(words, lane, t, WINDOW)
        while (t > 0) & window_waits(masks).item():
            words, hi = checked_window(load_words(status, w, WINDOW, PACKED), vals, P, w,
                                       WINDOW, PACKED)
            masks = window_masks(words, lane, t, WINDOW)
        if t > 0:
            v = window_values(words, hi, vals, P, w, WINDOW, ACC, PACKED)
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


@ct.function
def scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, SIZE, LANES, ACC, KIND, OP,
               ID, EQ, HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE, PACKED, WIDE,
               OVERLAP, MODE):
    """The PIPE of scan_lookback (MODE 2, SIZE: its window) and scan_groups (MODE
    3, SIZE: its group, LANES: the groups' words a tile loads), as
    examples/lookback_scan.py: a grid of about the resident blocks, each taking
    tiles by ticket until its ticket runs past the tiles (each block takes
    exactly one such ticket, which ends it). A block loads its next tile and
    publishes what that tile publishes (begin_ahead) before it finds the prefix
    of the tile it holds and stores it (lookback_rest, groups_rest): memory
    stays busy while it waits, and its predecessors have long published their
    aggregates by the time it looks (one tile a block moves in waves behind the
    slowest load before it). The ticket of the tile after next is drawn while
    the next one's loads are in flight (mode 2; mode 3 once it is published:
    see below), and that tile is prefetched into L2 at once (prefetch_tile; the
    second tile is not: all blocks prefetching it at the start delay the first
    loads, H200 2^24 int32 -4%). No aggregate waits for a
    look-back (mode 3: a group's aggregate waits only for the group's tile
    aggregates), and a look-back waits only for what smaller tiles publish,
    taken by running blocks: no deadlock, resident or not. With a block for
    every tile, block b holds tile b and takes no ticket (a block then waits for
    blocks of smaller index, which start first). Mode 3 folds what it
    folds without PIPE, in the same association: the same bits. (Never SINGLE:
    the host loads ahead only over several tiles.) The kernel is launched for
    early start behind scan_init: tile bid, the block's likely first, is
    prefetched into L2 while scan_init clears the status words (an L2 prefetch
    reads nothing stale), then the block waits for it to finish."""
    prefetch_tile(x, keys, y, ct.astype(ct.bid(0), counter.dtype), TILE, BY_KEY, IN_PLACE)
    ct.grid_dependency_control_wait()
    tiles = (n - 1) // TILE + 1
    every = ct.num_blocks(0) >= tiles
    # mode 2 draws a block's next ticket while a tile's loads are in flight (begin_ahead);
    # mode 3 draws it before the block's first load, then after each tile is published:
    # drawn during the loads it ran at 83.1% of the copy instead of 93.5% (H200 float32
    # 2^27): a group's last tile waits in publish_ahead, and a ticket held through that
    # wait holds up every tile after it (drawn early everywhere but there, it ran as this
    # order: float32 2^24 87.8 / 2^27 93.1% against 86.9 / 93.5%, H200, .gpu/m3draw37.py)
    draw = ~every & (MODE == 2)
    if every:
        # a block for every tile: the block's own index is its tile and no counter is
        # touched (module docstring)
        t = ct.astype(ct.bid(0), counter.dtype)
        t_next = ct.astype(tiles, counter.dtype)
    else:
        t = ticket(counter, False)
        t_next = t
        if MODE != 2 and t < tiles:
            t_next = ticket(counter, False)     # the next tile's ticket, drawn a tile early
    u, hu, h, a_head, agg, drawn = begin_ahead(
        x, keys, y, n, t, tiles, counter, draw, status, vals, P, ct.zeros((TILE,), ACC),
        ct.zeros((TILE,), ct.int32), ct.zeros((TILE,), ct.int32), ct.zeros((1,), ct.int32),
        ct.full((1,), ID, ACC), TILE, SIZE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY,
        IN_PLACE, PACKED, WIDE, MODE)
    if MODE == 2:
        t_next = drawn
    while t < tiles:
        # the next tile first: loaded, and what it publishes published, before this one's
        # prefix (a past-the-end ticket keeps this tile's parts: unused)
        u_next, hu_next, h_next, head_next, agg_next, t_after = begin_ahead(
            x, keys, y, n, t_next, tiles, counter, draw, status, vals, P, u, hu, h, a_head,
            agg, TILE, SIZE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, PACKED,
            WIDE, MODE)
        if MODE != 2:
            t_after = t_next
            if t_next < tiles:
                t_after = ticket(counter, False)
        if t_after < tiles:
            prefetch_tile(x, keys, y, t_after, TILE, BY_KEY, IN_PLACE)
        if MODE == 2:
            lookback_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, SIZE, ACC,
                          KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE,
                          OVERLAP)
        else:
            groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, SIZE,
                        LANES, ACC, KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED,
                        WIDE, False, OVERLAP, False)
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
def begin_ahead(x, keys, y, n, t, tiles, counter, draw, status, vals, P, u, hu, h, a_head, agg,
                TILE, SIZE, ACC, KIND, OP, ID, EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, PACKED, WIDE,
                MODE):
    """Tile t of a block that loads ahead (scan_ahead): a tile of the input
    (t < tiles) is loaded (tile_load), the block's next ticket drawn when `draw`
    while the loads are in flight (its atomic round trip and broadcast then cost
    no time of their own: a block drew them one after the other, on every
    tile's path; H200 int32 sums 2^24 87.0 -> 89.5-89.9% of the same-bytes copy,
    2^27 94.9 -> 97.0-97.3%), and what the tile publishes published at once
    (tile_aggregate, publish_ahead). Returns the tile's parts and the ticket
    drawn (else `tiles`). The ticket past the tiles that ends the block loads
    nothing and draws nothing (no index past the input is formed: 32-bit offsets
    stay below num_items): it returns the parts given (u, hu, h, a_head, agg) as
    they are and itself."""
    drawn = t
    if t < tiles:
        u, hu, h, shifted, x_last, h_last = tile_load(x, keys, y, n, t, TILE, ACC, KIND, ID,
                                                      EQ, HAS_EQ, SHIFT, BY_KEY, IN_PLACE, WIDE)
        drawn = ct.astype(tiles, counter.dtype)
        if draw:
            drawn = ticket(counter, False)
        a_ok, a_head, agg = tile_aggregate(u, hu, shifted, x_last, h_last, KIND, OP, ID, ACC,
                                           SHIFT, BY_KEY)
        publish_ahead(status, vals, P, t, a_head, agg, SIZE, ACC, KIND, OP, ID, BY_KEY, PACKED,
                      MODE)
    return u, hu, h, a_head, agg, drawn


@ct.kernel
def scan_groups(x, keys, y, n, init, counter, status, vals, P, TILE: ct.Constant[int],
                GROUP: ct.Constant[int], LANES: ct.Constant[int], ACC: ct.Constant,
                KIND: ct.Constant[str], OP: ct.Constant, ID: ct.Constant, EQ: ct.Constant,
                HAS_EQ: ct.Constant[bool], SHIFT: ct.Constant[bool], EXCL: ct.Constant[bool],
                INV: ct.Constant[bool], HAS_INIT: ct.Constant[bool], BY_KEY: ct.Constant[bool],
                IN_PLACE: ct.Constant[bool], PACKED: ct.Constant[int],
                WIDE: ct.Constant[bool], SINGLE: ct.Constant[bool], PIPE: ct.Constant[bool]):
    """Mode 3: the single-pass scan with a two-level look-back (module
    docstring). Tile t = k*GROUP + j publishes its aggregate A[t] in status[t]
    (vals[t]); the group's last tile publishes the group's aggregate
    Ag(k) = fold(A[kG .. kG+G-1]) in status[P + k] (vals[P + k]) as soon as its
    group's aggregates are in, waiting for nothing else. Tile t's exclusive
    prefix is fold(Ag(0 .. k-1)) (+) fold(A[kG .. t-1]): one load of LANES
    groups' words and one of the group's GROUP words, each folded by one
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
        scan_ahead(x, keys, y, n, init, counter, status, vals, P, TILE, GROUP, LANES, ACC,
                   KIND, OP, ID, EQ, HAS_EQ, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, IN_PLACE,
                   PACKED, WIDE, OVERLAP, 3)
    else:
        t = ticket(counter, SINGLE)
        u, hu, h, a_ok, a_head, agg = tile_parts(x, keys, y, n, t, TILE, ACC, KIND, OP, ID, EQ,
                                                 HAS_EQ, SHIFT, BY_KEY, IN_PLACE, WIDE)
        if not SINGLE:
            if t - (t // GROUP) * GROUP != GROUP - 1:   # a group's last aggregate: read by
                publish_at(status, t, vals, t, flags_of(a_head), agg, ACC, PACKED)   # nobody
        groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, GROUP, LANES,
                    ACC, KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, SINGLE,
                    OVERLAP, True)
