"""The two-level look-back of DeviceScan's mode 3 (scan_kernels.py has the
design and the kernel): tile t = kG + j's exclusive prefix is fold(Ag(0 .. k-1))
(+) fold(A[kG .. t-1]), from LANES groups' words (GROUPS, or G) and its
group's G status words; a group's last tile publishes the group's aggregate
Ag(k).
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import combine_known, fold_known
from .scan_status import (HEAD, flags_of, load_needed, publish_aggregate, publish_at, ready_bits,
                          second_needed, word_values)
from .scan_tiles import fold_parts, join, join_ok, local_scan, op2, store_tile

__all__ = ["GROUPS", "group_values", "publish_group", "groups_prefix_fused", "groups_rest",
           "publish_ahead"]

GROUPS = 256        # mode 3: the most groups' words a tile loads (the host widens groups to fit)


@ct.function
def group_values(status, vals, k, words, need, GROUP, ACC, PACKED):
    """Status words [k*GROUP, (k+1)*GROUP) (a group's; called with GROUP = LANES and
    k = P // LANES, the groups'), the lanes in `need` (loaded as `words`) reloaded
    until they are published, and their values."""
    hi = second_needed(vals, k, GROUP, words, need, PACKED)
    while ct.min(ct.where(need, ready_bits(words, hi, PACKED), 1), 0,
                 keepdims=True).item() != 1:
        words = load_needed(status, k, GROUP, need, PACKED)
        hi = second_needed(vals, k, GROUP, words, need, PACKED)
    return words, word_values(words, hi, vals, k, GROUP, ACC, PACKED)


@ct.function
def publish_group(status, vals, P, k, v, hd, a_head, GROUP, KIND, OP, ID, ACC, BY_KEY,
                  PACKED):
    """Publish Ag(k), group k's aggregates v folded in order (heads hd; the
    group's last tile's own aggregate in the last lane), in status[P + k]
    (vals[P + k])."""
    if KIND != "user" and not BY_KEY:
        publish_at(status, P + k, vals, P + k, flags_of(a_head),
                   fold_known(v, 0, KIND, ID, True), ACC, PACKED)
    elif not BY_KEY:    # every lane holds an aggregate: a plain fold, no (ok, value) pairs
        publish_at(status, P + k, vals, P + k, flags_of(a_head),
                   ct.reduce(v, 0, lambda a, b: op2(a, b, KIND, OP, ACC), 0, keepdims=True),
                   ACC, PACKED)
    else:
        _, f_head, f_val = fold_parts(ct.full((GROUP,), 1, ct.int32), hd, v, KIND, OP, ACC,
                                      BY_KEY)
        publish_at(status, P + k, vals, P + k, flags_of(f_head), f_val, ACC, PACKED)


@ct.function
def groups_prefix_fused(status, vals, P, t, k, j, words, gwords, a_head, agg, GROUP, ACC, KIND,
                        OP, ID, PACKED, PUBLISH):
    """Tile t's exclusive prefix part in mode 3, not by key, when a group has as
    many tiles as the groups' words a tile loads (LANES == GROUP, groups_rest):
    the group's aggregates before it and the groups' before its group are waited
    for once (one readiness reduction, not two), then a well-known operator
    combines them lane by lane side by side and folds once (a fixed tree over the lanes, so the
    association depends on t alone), a user operator folds each in order as
    (ok, value) pairs and joins the two (carried through one reduction, the two
    folds ran slower: H200 2^27 3664 against 3773 GB/s). With PUBLISH a group's
    last tile first publishes its group's aggregate, which waits only for its
    own group."""
    lane = ct.arange(GROUP, dtype=ct.int32)
    need = lane < j
    gneed = lane < k
    if PUBLISH and j == GROUP - 1:
        words, v = group_values(status, vals, k, words, need, GROUP, ACC, PACKED)
        publish_group(status, vals, P, k, ct.where(lane == j, agg, v),
                      ct.zeros((GROUP,), ct.int32), a_head, GROUP, KIND, OP, ID, ACC, False,
                      PACKED)
    hi = second_needed(vals, k, GROUP, words, need, PACKED)
    ghi = second_needed(vals, P // GROUP, GROUP, gwords, gneed, PACKED)
    while ct.min(ct.where(need, ready_bits(words, hi, PACKED), 1)
                 & ct.where(gneed, ready_bits(gwords, ghi, PACKED), 1), 0,
                 keepdims=True).item() != 1:
        words = load_needed(status, k, GROUP, need, PACKED)
        gwords = load_needed(status, P // GROUP, GROUP, gneed, PACKED)
        hi = second_needed(vals, k, GROUP, words, need, PACKED)
        ghi = second_needed(vals, P // GROUP, GROUP, gwords, gneed, PACKED)
    v = word_values(words, hi, vals, k, GROUP, ACC, PACKED)
    gv = word_values(gwords, ghi, vals, P // GROUP, GROUP, ACC, PACKED)
    if KIND == "user":
        zero = ct.zeros((GROUP,), ct.int32)
        g_ok, _, g_val = fold_parts(ct.where(gneed, 1, 0), zero, gv, KIND, OP, ACC, False)
        e_ok, _, e_val = fold_parts(ct.where(need, 1, 0), zero, v, KIND, OP, ACC, False)
        p_ok, p_val = join_ok(g_ok, g_val, e_ok, e_val, KIND, OP, ACC)
        return p_ok, ct.zeros((1,), ct.int32), p_val
    both = combine_known(ct.where(gneed, gv, ID), ct.where(need, v, ID), KIND)
    return (ct.where(t > 0, ct.full((1,), 1, ct.int32), 0), ct.zeros((1,), ct.int32),
            fold_known(both, 0, KIND, ID, True))


@ct.function
def groups_rest(y, n, init, status, vals, P, t, u, hu, h, a_head, agg, TILE, GROUP, LANES, ACC,
                KIND, OP, ID, SHIFT, EXCL, INV, HAS_INIT, BY_KEY, PACKED, WIDE, SINGLE, OVERLAP,
                PUBLISH):
    """Tile t of mode 3 after its load (and its aggregate's publication): find
    its exclusive prefix fold(Ag(0 .. k-1)) (+) fold(A[kG .. t-1]) and store the
    scanned tile; with PUBLISH a group's last tile publishes Ag(k) on the way
    (without, its block did when it loaded the tile: scan_ahead). A tile loads
    LANES groups' words (GROUPS, or GROUP when the host made as many groups as
    a group has tiles at most: the fused prefix, not by key)."""
    p_ok = ct.zeros((1,), ct.int32)
    p_head = ct.zeros((1,), ct.int32)
    p_val = agg
    k = t // GROUP
    j = t - k * GROUP
    words = ct.zeros((GROUP,), ct.int64)
    gwords = ct.zeros((LANES,), ct.int64)
    lane = ct.arange(GROUP, dtype=ct.int32)
    glane = ct.arange(LANES, dtype=ct.int32)
    if not SINGLE:        # the lanes before tile t's, in flight while the tile is scanned
        words = load_needed(status, k, GROUP, lane < j, PACKED)
    z = u
    if OVERLAP:
        z = local_scan(u, KIND, OP, ID, ACC, EXCL and not SHIFT and not INV)
    if not SINGLE:
        gwords = load_needed(status, P // LANES, LANES, glane < k, PACKED)
        if not BY_KEY and GROUP == LANES:
            p_ok, p_head, p_val = groups_prefix_fused(status, vals, P, t, k, j, words,
                                                      gwords, a_head, agg, GROUP, ACC,
                                                      KIND, OP, ID, PACKED, PUBLISH)
        else:
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
                e_val = fold_known(ct.where(need, v, ID), 0, KIND, ID, True)
            else:
                e_ok, e_head, e_val = fold_parts(ct.where(need, 1, 0), ct.where(need, hd, 0),
                                                 v, KIND, OP, ACC, BY_KEY)
            gneed = glane < k
            gwords, gv = group_values(status, vals, P // LANES, gwords, gneed, LANES, ACC,
                                      PACKED)
            if known:
                g_ok = ct.where(k > 0, ct.full((1,), 1, ct.int32), 0)
                g_head = ct.zeros((1,), ct.int32)
                g_val = fold_known(ct.where(gneed, gv, ID), 0, KIND, ID, True)
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
            words, v = group_values(status, vals, k, load_needed(status, k, GROUP, lane < j,
                                                                 PACKED),
                                    lane < j, GROUP, ACC, PACKED)
            own = lane == j
            hd = ct.where(own, a_head, ct.astype(((words >> 32) & HEAD) >> 1, ct.int32))
            publish_group(status, vals, P, k, ct.where(own, agg, v), hd, a_head, GROUP, KIND,
                          OP, ID, ACC, BY_KEY, PACKED)
