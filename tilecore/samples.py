"""Sample tile kernels: the ones the tour (`python -m tilecore`) runs, also
used by the benchmarks, so that what is measured is what users see."""
from __future__ import annotations

import tilecore as ct

__all__ = ["vec_add", "softmax_rows", "gather_reverse", "tile_sum"]


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(bid,), tile=ta + tb)


@ct.kernel
def softmax_rows(x, y, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N), padding_mode=ct.PaddingMode.NEG_INF)
    t = t.astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(row, 0), tile=(e / ct.sum(e, axis=1, keepdims=True)).astype(y.dtype))


@ct.kernel
def gather_reverse(src, dst, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    idx = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    n = src.shape[0]
    vals = ct.gather(src, n - 1 - idx, padding_value=-1.0)
    ct.scatter(dst, idx, vals)


@ct.kernel
def tile_sum(arr, out, TILE: ct.Constant[int]):
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for k in range(ct.num_tiles(arr, 0, (TILE,))):
        acc += ct.load(arr, index=(k,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(0,), tile=ct.sum(acc, axis=0, keepdims=True))
