"""DeviceScan's reduce-then-scan (mode 1, two kernels): block b folds its
contiguous chunk of PER tiles into partial b (`scan_partials`); then block b
folds partials 0..b-1 (one fixed-shape reduction) and scans its chunk tile by
tile (`scan_downsweep`). Reads the input twice.
"""
from __future__ import annotations

import tilecore as ct

from .scan_tiles import ZERO, fold_parts, join, tile_finish, tile_parts

__all__ = ["scan_partials", "scan_downsweep"]


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
