"""The look-backs of DeviceScan's modes 2 and 4 (scan_kernels.py has the
design and the kernels): a tile's first window of status words, issued before
its own scan; mode 2's decoupled look-back (exact operators: it folds whatever
aggregates and prefixes it finds, newest first); and mode 4's ordered one (the
left fold from the newest complete prefix in the window holding tile t-1).
"""
from __future__ import annotations

import tilecore as ct

from .scan_status import (HEAD, PREFIX, READY, from_bits, join_split, load_words,
                          publish_aggregate, publish_prefix, ready_bits, ticket)
from .scan_tiles import local_scan, op2, store_tile, tile_parts

__all__ = ["LB_NOT_READY", "LB_FOUND", "LB_LIVE", "lookback_start", "first_window",
           "checked_window", "window_values", "lb_combine", "prefix_lookback", "lookback_rest",
           "window_masks", "window_waits", "from_newest_prefix"]

LB_NOT_READY, LB_FOUND, LB_LIVE = 1, 2, 4     # mode 2: a window's lanes folded (lb_combine)


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
def checked_window(words, vals, P, w, WINDOW, PACKED):
    """(words, hi) of window w (modes 2 and 4): with PACKED 2 its second words, of the
    state each word shows (a prefix's in vals' second half, an aggregate's in its
    first), and READY cleared where one lags, so that the look-back's own readiness
    test reads that lane again; otherwise (words, words)."""
    if PACKED == 2:
        hi = ct.where(((words >> 32) & PREFIX) != 0,
                      load_words(vals, P // WINDOW + w, WINDOW, PACKED),
                      load_words(vals, w, WINDOW, PACKED))
        return ct.where(ready_bits(words, hi, PACKED) != 0, words, words & ~(READY << 32)), hi
    else:
        return words, words


@ct.function
def window_values(words, hi, vals, P, w, WINDOW, ACC, PACKED):
    """The values of window w's status words (modes 2 and 4; hi: checked_window's):
    beside the flags (PACKED 1), split over the words and hi (PACKED 2), else in
    vals: prefixes in its second half, aggregates in its first."""
    if PACKED == 1:
        return from_bits(words, ACC)
    elif PACKED == 2:
        return join_split(words, hi, ACC)
    else:
        prefixes = ct.load(vals, (P // WINDOW + w,), (WINDOW,))
        return ct.where(((words >> 32) & PREFIX) != 0, prefixes, ct.load(vals, (w,), (WINDOW,)))


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
            words, hi = checked_window(words, vals, P, w, WINDOW, PACKED)
            f = words >> 32
            v = window_values(words, hi, vals, P, w, WINDOW, ACC, PACKED)
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
