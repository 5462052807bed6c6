"""DeviceReduce's tile kernels (CUB's agents), in the public tile language.

Every kernel reduces `n` items of `x` over a grid-stride partition: the input
is cut into tiles of TILE items, full tile k goes to block k % grid, and the
last, partial tile (if any) to block (n // TILE) % grid, which masks it. Each
block accumulates its tiles element-wise in registers (one accumulator tile,
no reduction inside the loop), reduces the accumulator tile once at the end,
and writes one partial (FINAL=False) or, as the only block, combines `init`
and writes the result in the output's dtype (FINAL=True). The partition and
the combination order depend only on (n, TILE, grid), so results are
bit-identical run to run.

- `reduce_known`: well-known operators (KIND: add, mul, min, max, and, or,
  xor), padded with the operator's identity ID; `reduce_known_fixed` is the
  same with `init` a Constant (sum, min and max, whose init CUB fixes), so
  that a cached call's launches take tilecore.launch's fast path.
- `reduce_user`: a user operator OP. No identity is known, so an accumulator
  lane starts from a block's first full tile, a partial tile is merged under
  its mask, and the final reduction combines (value, valid) pairs.
- `arg_reduce` / `arg_reduce_pairs`: arg_min / arg_max over the input, then
  over the blocks' (value, index) partials; ties go to the smallest index
  (EMPTY, the value written for no items, is a Constant).

Policies reach the kernels as Constants (TILE) and kernel options
(num_threads); `XFORM` (a function of one tile) is transform_reduce's
transform, applied to loaded items before they become accumulators.
"""
from __future__ import annotations

import tilecore as ct

__all__ = ["combine_known", "fold_known", "reduce_known", "reduce_known_fixed", "reduce_user",
           "arg_reduce", "arg_reduce_pairs"]

ZERO = ct.PaddingMode.ZERO


@ct.function
def combine_known(a, b, KIND):
    """a KIND b for a well-known operator; min/max of floats are fmin/fmax
    (a NaN operand is ignored), as CUB's cuda::minimum/maximum."""
    if KIND == "add":
        return a + b
    elif KIND == "mul":
        return a * b
    elif KIND == "and":
        return a & b
    elif KIND == "or":
        return a | b
    elif KIND == "xor":
        return a ^ b
    elif KIND == "min":
        if a.dtype.is_float:
            return ct.where((a < b) | ct.isnan(b), a, b)
        else:
            return ct.minimum(a, b)
    else:
        if a.dtype.is_float:
            return ct.where((a > b) | ct.isnan(b), a, b)
        else:
            return ct.maximum(a, b)


@ct.function
def fold_known(u, AXIS, KIND, ID, KEEPDIMS):
    """A well-known operator folded along AXIS over a tile padded with its identity
    ID: sums, integer min and max as built-in reductions, the rest (float min/max
    as fmin/fmax, mul, and, or, xor) through combine_known."""
    if KIND == "add":
        return ct.sum(u, AXIS, keepdims=KEEPDIMS)
    elif KIND == "min" and not u.dtype.is_float:
        return ct.min(u, AXIS, keepdims=KEEPDIMS)
    elif KIND == "max" and not u.dtype.is_float:
        return ct.max(u, AXIS, keepdims=KEEPDIMS)
    else:
        return ct.reduce(u, AXIS, lambda p, q: combine_known(p, q, KIND), ID,
                         keepdims=KEEPDIMS)


@ct.function
def full_tile(x, k, TILE):
    """Tile k of x, one the caller knows lies wholly inside x (a tile before the
    last, partial one): loaded unchecked, so that a loop's iteration carries no
    bounds test and no padding path (a bfloat16 arg_max's loop spent about 2
    instructions an item on them)."""
    return ct.load(x, index=(k,), shape=(TILE,), check_bounds=False)


@ct.function
def items(t, ACC, XFORM, HAS_XFORM):
    """Loaded items as accumulator values (transformed first, if asked)."""
    if HAS_XFORM:
        return ct.astype(XFORM(t), ACC)
    else:
        return ct.astype(t, ACC)


@ct.function
def known(x, out, n, init, TILE, ACC, KIND, ID, XFORM, HAS_XFORM, FINAL):
    """The body of reduce_known and reduce_known_fixed."""
    b = ct.bid(0)
    g = ct.num_blocks(0)
    full = n // TILE
    acc = ct.full((TILE,), ID, ACC)
    mine = (full - b + g - 1) // g
    # One tile an iteration, not software-pipelined: a carried narrow tile is held one
    # item a register (H200, NVRTC 13: the pipelined int8 sum took 106 registers, 2
    # blocks an SM, 2135 GB/s at 2^27; this loop at 16 items a thread, 47 registers,
    # 5 blocks an SM, 3765; a pipelined bfloat16 sum 115 registers against 64).
    # Narrow integers load their full tiles unchecked (the measured form); the others
    # keep the checked load (unchecked, the sm_80 float32 sum spilled 8 bytes).
    for i in range(mine):
        if x.dtype.itemsize < 4 and not x.dtype.is_float:
            t = items(full_tile(x, b + i * g, TILE), ACC, XFORM, HAS_XFORM)
        else:
            t = items(ct.load(x, index=(b + i * g,), shape=(TILE,)), ACC, XFORM, HAS_XFORM)
        acc = combine_known(acc, t, KIND)
    rem = n - full * TILE
    if rem > 0:
        if b == full % g:
            t = items(ct.load(x, index=(full,), shape=(TILE,), padding_mode=ZERO), ACC, XFORM,
                      HAS_XFORM)
            acc = ct.where(ct.arange(TILE) < rem, combine_known(acc, t, KIND), acc)
    r = fold_known(acc, 0, KIND, ID, True)
    if FINAL:
        r = combine_known(ct.full((1,), init, ACC), r, KIND)
        ct.store(out, index=(0,), tile=ct.astype(r, out.dtype))
    else:
        ct.store(out, index=(b,), tile=r)


@ct.kernel
def reduce_known(x, out, n, init, TILE: ct.Constant[int], ACC: ct.Constant,
                 KIND: ct.Constant[str], ID: ct.Constant, XFORM: ct.Constant,
                 HAS_XFORM: ct.Constant[bool], FINAL: ct.Constant[bool]):
    known(x, out, n, init, TILE, ACC, KIND, ID, XFORM, HAS_XFORM, FINAL)


@ct.kernel
def reduce_known_fixed(x, out, n, INIT: ct.Constant, TILE: ct.Constant[int], ACC: ct.Constant,
                       KIND: ct.Constant[str], ID: ct.Constant, XFORM: ct.Constant,
                       HAS_XFORM: ct.Constant[bool], FINAL: ct.Constant[bool]):
    """reduce_known with a compile-time init (sum, min, max: CUB fixes it), so that
    every run-time argument is an array or `n` and the launch takes the cached
    fast path (a NumPy scalar init, or a 64-bit or 16-bit one, does not)."""
    known(x, out, n, INIT, TILE, ACC, KIND, ID, XFORM, HAS_XFORM, FINAL)


@ct.kernel
def reduce_user(x, out, n, init, TILE: ct.Constant[int], ACC: ct.Constant, OP: ct.Constant,
                XFORM: ct.Constant, HAS_XFORM: ct.Constant[bool], FINAL: ct.Constant[bool]):
    b = ct.bid(0)
    g = ct.num_blocks(0)
    full = n // TILE
    mine = (full - b + g - 1) // g
    if mine > 0:
        acc = items(full_tile(x, b, TILE), ACC, XFORM, HAS_XFORM)
        ok = ct.full((TILE,), True, ct.bool_)
    else:
        acc = ct.zeros((TILE,), ACC)
        ok = ct.full((TILE,), False, ct.bool_)
    for i in range(1, mine):
        t = items(full_tile(x, b + i * g, TILE), ACC, XFORM, HAS_XFORM)
        acc = ct.astype(OP(acc, t), ACC)
    rem = n - full * TILE
    if rem > 0:
        if b == full % g:
            t = items(ct.load(x, index=(full,), shape=(TILE,), padding_mode=ZERO), ACC, XFORM,
                      HAS_XFORM)
            valid = ct.arange(TILE) < rem
            acc = ct.where(ok & valid, ct.astype(OP(acc, t), ACC), ct.where(valid, t, acc))
            ok = ok | valid

    def pair(p, p_ok, q, q_ok):
        both = ct.astype(OP(p, q), ACC)
        return ct.where(p_ok & q_ok, both, ct.where(p_ok, p, q)), p_ok | q_ok
    r, r_ok = ct.reduce((acc, ok), 0, pair, (0, False), keepdims=True)
    if FINAL:
        start = ct.full((1,), init, ACC)
        r = ct.where(r_ok, ct.astype(OP(start, r), ACC), start)
        ct.store(out, index=(0,), tile=ct.astype(r, out.dtype))
    else:
        ct.store(out, index=(b,), tile=r)


@ct.function
def ahead(v, w, MAX):
    """Whether value v comes strictly before w in arg_min (MAX: arg_max) order:
    the smaller (larger) value, NaN last."""
    if v.dtype.is_float:
        # v > w, or w is NaN and v is not, in two compares: not (v <= w) is also
        # true when either is NaN, and v == v rules out a NaN v
        if MAX:
            return (v == v) & ~(v <= w)
        else:
            return (v == v) & ~(v >= w)
    elif MAX:
        return v > w
    else:
        return v < w


@ct.function
def before(v, i, w, j, MAX):
    """Whether (value v, index i) comes before (w, j) in arg_min (MAX: arg_max)
    order: the smaller (larger) value, NaN last, ties to the smaller index."""
    if v.dtype.is_float:
        same = (v == w) | (ct.isnan(v) & ct.isnan(w))
    else:
        same = v == w
    return ahead(v, w, MAX) | (same & (i < j))


@ct.function
def keep_ahead(t, k, acc, round_of, TILE, MAX):
    """The lanes' (value, round) after round k's items t: an item strictly ahead
    of its lane's value (ahead) takes its place; a tie keeps the earlier."""
    take = ahead(t, acc, MAX)
    return ct.where(take, t, acc), ct.where(take, ct.full((TILE,), k, round_of.dtype), round_of)


NO_INDEX = 9223372036854775807      # a lane's index when it holds no item
NO_ROUND = 2147483647               # a lane's round when it holds no item: after every round


@ct.function
def arg_store(v, i, out_value, out_index, n, empty, FINAL):
    """Write the (value, index) scalars: the only block's result (with CUB's
    empty-input outputs), or this block's partial."""
    r = ct.full((1,), v, out_value.dtype)
    ri = ct.full((1,), i, ct.int64)
    if FINAL:
        r = ct.where(n == 0, ct.full((1,), empty, out_value.dtype), r)
        ri = ct.where(n == 0, ct.full((1,), 1, ct.int64), ri)
        ct.store(out_index, index=(0,), tile=ct.astype(ri, out_index.dtype))
        ct.store(out_value, index=(0,), tile=r)
    else:
        ct.store(out_value, index=(ct.bid(0),), tile=r)
        ct.store(out_index, index=(ct.bid(0),), tile=ri)


@ct.function
def arg_finish(acc, idx, out_value, out_index, n, empty, ID, MAX, FINAL):
    """The lanes' (value, index) pairs folded in arg order (the final pass's, and
    8-byte values' first pass, whose values arg_pick's 32-bit reductions cannot
    take), written by arg_store."""
    def pick(v, i, w, j):
        first = before(v, i, w, j, MAX)
        return ct.where(first, v, w), ct.where(first, i, j)
    r, ri = ct.reduce((acc, idx), 0, pick, (ID, NO_INDEX))
    arg_store(ct.astype(r, out_value.dtype), ri, out_value, out_index, n, empty, FINAL)


@ct.function
def arg_pick(acc, pos, valid, MAX):
    """The first lane in arg order of values of at most 4 bytes: (value, its
    block-local int32 position, none). Two built-in 32-bit reductions (the
    extreme number, then the first position holding it; NaN only when no lane
    holds a number) instead of a fold of (value, int64 index) pairs, which
    combines both at every step, or a 64-bit key built for every lane: all
    blocks end together, so each block's pick is on the kernel's critical path
    (H200 arg_max against the sum, same run: bfloat16 2^24 74.4 -> 79.0%, 2^27
    93.9 -> 94.9%; float32 2^24 89.3 -> 92.2%). Positions stay below 2^31
    (reduce._MAX_BLOCK_ITEMS). A zero or NaN returns the chosen lane's own bits
    (the sign of a zero, a NaN's payload)."""
    BIG = NO_ROUND                     # int32's largest: past every position
    if acc.dtype.is_float:
        num = valid & (acc == acc)
        if MAX:
            best = ct.max(ct.where(num, acc, float("-inf")))
        else:
            best = ct.min(ct.where(num, acc, float("inf")))
        p = ct.min(ct.where(num & (acc == best), pos, BIG))
        v = best
        exact = best == 0
        if p == BIG:                   # no number: the first NaN, or no item
            p = ct.min(ct.where(valid, pos, BIG))
            exact = True
        if exact:                      # the chosen lane's own zero sign or NaN
            own = ct.bitcast(acc, ct.int32)
            v = ct.bitcast(ct.sum(ct.where(valid & (pos == p), own, 0)), acc.dtype)
    else:
        if MAX:
            best = ct.max(ct.where(valid, acc, acc.dtype.min))
        else:
            best = ct.min(ct.where(valid, acc, acc.dtype.max))
        p = ct.min(ct.where(valid & (acc == best), pos, BIG))
        v = best
    return v, p, p == BIG


@ct.kernel
def arg_reduce(x, out_value, out_index, n, EMPTY: ct.Constant, TILE: ct.Constant[int],
               ID: ct.Constant, MAX: ct.Constant[bool], FINAL: ct.Constant[bool],
               W: ct.Constant):
    """arg_min / arg_max of n items (first pass, or the only block when FINAL),
    compared in W (operators.work_dtype: the value type, or float32 for
    narrower floats). Lanes keep the block-local round (0: the block's first
    tile) of their best item; its index is computed once at the end. A block's
    lanes start from its first tile, and its later tiles come later in the
    input, so in the loop a tie keeps the lane's item: only a strictly better
    value is taken (no index compare per item). A block's items are numbered in
    int32 (the host's grid keeps them below 2^31)."""
    b = ct.bid(0)
    g = ct.num_blocks(0)
    full = n // TILE
    mine = (full - b + g - 1) // g
    if mine > 0:
        acc = ct.astype(full_tile(x, b, TILE), W)
        round_of = ct.zeros((TILE,), ct.int32)
    else:
        acc = ct.full((TILE,), ID, W)
        round_of = ct.full((TILE,), NO_ROUND, ct.int32)
    if x.dtype.itemsize >= 4:
        # software-pipelined: the next tile's loads are issued before this tile's
        # compares, so a warp keeps them in flight while it computes (the last
        # iteration re-loads its own tile, which is cached, instead of a new one).
        # Not narrower items: a carried 2-byte tile is held one item a register
        # (bfloat16 at 16 items a thread: 80 registers, 3 blocks an SM, 64% of the
        # sum's bandwidth; the plain loop 64 registers, 87%; H200, NVRTC 13)
        last = b + (mine - 1) * g
        t_next = ct.load(x, index=(ct.minimum(b + g, last),), shape=(TILE,))
        for i in range(1, mine):
            k = b + i * g
            t = ct.astype(t_next, W)
            t_next = full_tile(x, ct.minimum(k + g, last), TILE)
            acc, round_of = keep_ahead(t, i, acc, round_of, TILE, MAX)
    else:
        # four tiles an iteration, their loads issued first: a 2-byte tile of 16 items is
        # 32 bytes a thread, too few in flight for one at a time (bfloat16 arg_max at 2^27:
        # 89.4% of the sum's bandwidth one a time, 93.7% four, 3 blocks an SM; H200)
        rounds = ct.maximum(mine - 1, 0) // 4
        for j in range(rounds):
            i = 1 + 4 * j
            k = b + i * g
            t0 = ct.astype(full_tile(x, k, TILE), W)
            t1 = ct.astype(full_tile(x, k + g, TILE), W)
            t2 = ct.astype(full_tile(x, k + 2 * g, TILE), W)
            t3 = ct.astype(full_tile(x, k + 3 * g, TILE), W)
            acc, round_of = keep_ahead(t0, i, acc, round_of, TILE, MAX)
            acc, round_of = keep_ahead(t1, i + 1, acc, round_of, TILE, MAX)
            acc, round_of = keep_ahead(t2, i + 2, acc, round_of, TILE, MAX)
            acc, round_of = keep_ahead(t3, i + 3, acc, round_of, TILE, MAX)
        for i in range(1 + 4 * rounds, mine):
            acc, round_of = keep_ahead(ct.astype(full_tile(x, b + i * g, TILE), W), i, acc,
                                       round_of, TILE, MAX)
    rem = n - full * TILE
    if rem > 0:
        if b == full % g:
            t = ct.astype(ct.load(x, index=(full,), shape=(TILE,), padding_mode=ZERO), W)
            rt = ct.full((TILE,), (full - b) // g, ct.int32)
            take = before(t, rt, acc, round_of, MAX) & (ct.arange(TILE) < rem)
            acc = ct.where(take, t, acc)
            round_of = ct.where(take, rt, round_of)
    valid = round_of != NO_ROUND
    lane = ct.arange(TILE)
    if W.itemsize <= 4:
        pos = round_of * TILE + lane
        v, p, missing = arg_pick(acc, pos, valid, MAX)
        p = ct.astype(p, ct.int64)
        i = (b + (p // TILE) * g) * TILE + p % TILE
        if missing:
            i = NO_INDEX
        arg_store(ct.astype(v, out_value.dtype), i, out_value, out_index, n, EMPTY, FINAL)
    else:
        idx = ct.where(valid, (b + ct.astype(round_of, ct.int64) * g) * TILE + lane, NO_INDEX)
        arg_finish(acc, idx, out_value, out_index, n, EMPTY, ID, MAX, FINAL)


@ct.kernel
def arg_reduce_pairs(values, indices, out_value, out_index, n, EMPTY: ct.Constant,
                     TILE: ct.Constant[int], ID: ct.Constant, MAX: ct.Constant[bool]):
    """The second pass: one block reduces the n (value, index) partials."""
    acc = ct.full((TILE,), ID, values.dtype)
    idx = ct.full((TILE,), NO_INDEX, ct.int64)
    for k in range(ct.cdiv(n, TILE)):
        valid = ct.arange(TILE) < n - k * TILE
        v = ct.load(values, index=(k,), shape=(TILE,), padding_mode=ZERO)
        i = ct.load(indices, index=(k,), shape=(TILE,), padding_mode=ZERO)
        take = before(v, i, acc, idx, MAX) & valid
        acc = ct.where(take, v, acc)
        idx = ct.where(take, i, idx)
    arg_finish(acc, idx, out_value, out_index, n, EMPTY, ID, MAX, True)
