"""DeviceScan in one launch for small inputs (at most the policy's
one_launch_max_items, not by key, not in place): no status words; block t folds
tiles 0 .. t-1 itself (quadratic re-reads, from L2 at these sizes).
"""
from __future__ import annotations

import tilecore as ct

from .reduce_kernels import fold_known
from .scan_tiles import (finish_known, heads_at, join, local_scan, op2, tile_finish,
                         tile_index, tile_parts)

__all__ = ["scan_recompute", "recompute_plain", "recompute_by_key", "last_head_before"]


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
            p_val = fold_known(acc, 0, KIND, ID, True)
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
            p_val = fold_known(acc, 0, KIND, ID, True)
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
