"""One tile of DeviceScan (scan_kernels.py has the design): the operators and
*parts* every mode folds, a tile's load and aggregate (`tile_parts`), its scan
from a known prefix (`tile_finish`), the overlapped finish (`local_scan` while
the look-back's first load is in flight, then `finish_known` applies init (+)
prefix), and its store (`store_items`: masked in the last, partial tile).

A *part* is a tile's or a range's contribution as three 1-element tiles: ok
(0: empty, nothing to combine), head (by-key scans: a new key starts inside
the range) and value (the operator folded from the last head on). `join`
combines consecutive parts in order; it is associative and not commutative.
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import combine_known, fold_known

__all__ = ["ZERO", "op2", "join", "join2", "join_ok", "fold_parts", "heads_at",
           "load_items", "tile_index", "tile_parts", "tile_load", "tile_aggregate", "tile_finish",
           "store_items", "local_scan", "finish_known", "store_tile"]

ZERO = ct.PaddingMode.ZERO


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
    u, hu, h, shifted, x_last, h_last = tile_load(x, keys, y, n, t, TILE, ACC, KIND, ID, EQ,
                                                  HAS_EQ, EXCL, BY_KEY, IN_PLACE, WIDE)
    ok, head, agg = tile_aggregate(u, hu, shifted, x_last, h_last, KIND, OP, ID, ACC, EXCL,
                                   BY_KEY)
    return u, hu, h, ok, head, agg


@ct.function
def tile_load(x, keys, y, n, t, TILE, ACC, KIND, ID, EQ, HAS_EQ, EXCL, BY_KEY, IN_PLACE, WIDE):
    """tile_parts' loads: (u, hu, h, shifted, x_last, h_last), the last two the
    tile's last item and its head (exclusive scans' aggregates need them). A
    caller may issue other work between these loads and tile_aggregate, which
    waits for them."""
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
    if not (BY_KEY and EXCL):
        h_last = ct.zeros((1,), ct.int32)
    return u, hu, h, shifted, x_last, h_last


@ct.function
def tile_aggregate(u, hu, shifted, x_last, h_last, KIND, OP, ID, ACC, EXCL, BY_KEY):
    """tile_parts' aggregate part (ok, head, agg) of the items tile_load loaded."""
    if KIND != "user" and not BY_KEY:
        agg = fold_known(u, 0, KIND, ID, True)
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
    return ok, head, agg


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
