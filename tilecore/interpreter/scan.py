"""Rules for scan and fold: ops whose region is a combining function.

The region computes on 0-d values with element-wise ops only (ir/ops.py), so
it runs here on whole arrays at once: `combine` evaluates it on the arrays of
all left operands and all right operands of one step. A scan takes log2(n)
such steps (Hillis-Steele: step d combines each element with the running
value d places before it, the earlier one on the left); a fold halves the
axis at each step, combining neighbours in order, or (sequential) runs along
it left to right. Neither uses the identity (an exclusive scan only puts it
first) or assumes commutativity.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Block, Op
from .context import BlockContext

__all__ = ["RULES", "combine"]


def combine(ctx: BlockContext, region: Block, lhs: list, rhs: list) -> list[np.ndarray]:
    """The region's results for the element-wise pairs (lhs[i], rhs[i]). Its
    ops run inside the scan or fold rule, so with NumPy's floating-point error
    reports off (`BlockContext.run_block`)."""
    env = {arg: np.asarray(v) for arg, v in zip(region.args, list(lhs) + list(rhs))}
    for op in region.ops:
        args = [env[v] for v in op.operands]
        if op.name == "yield":
            return args
        if op.name in ("reshape", "broadcast"):  # of one-element values: the value itself
            out = args
        else:
            out = ctx.rules[op.name](ctx, op, args)
        for res, value in zip(op.results, out):
            env[res] = np.asarray(value)
    raise AssertionError("a combining region ends with yield")


def _broadcast(v: np.ndarray, shape: tuple) -> np.ndarray:
    """`v` broadcast to `shape`; `v` itself when it has that shape (most
    combining results do: only a result that ignores the operands is smaller)."""
    return v if v.shape == shape else np.broadcast_to(v, shape)


def _last(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """`x` with `axis` moved last, reversed along it if `reverse`."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    return x[..., ::-1] if reverse else x


def _scan(ctx: BlockContext, op: Op, args: list) -> tuple:
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    ys = [_last(a, axis, reverse) for a in args]
    n = ys[0].shape[-1]
    d = 1
    while d < n:
        later = [y[..., d:] for y in ys]
        new = combine(ctx, op.regions[0], [y[..., :-d] for y in ys], later)
        ys = [np.concatenate((y[..., :d], _broadcast(v, t.shape)), axis=-1)
              for y, v, t in zip(ys, new, later)]
        d *= 2
    if op.attrs.get("exclusive"):   # shifted by one: the first element the identity
        ys = [np.concatenate((np.full(y.shape[:-1] + (1,), i, y.dtype), y[..., :-1]), axis=-1)
              for y, i in zip(ys, op.attrs["identities"])]
    return tuple(np.ascontiguousarray(np.moveaxis(y[..., ::-1] if reverse else y, -1, axis))
                 for y in ys)


def _fold(ctx: BlockContext, op: Op, args: list) -> tuple:
    axis = op.attrs["axis"]
    ys = [_last(a, axis, False) for a in args]
    if op.attrs.get("sequential"):   # left to right: element j joins the running value
        acc = [y[..., :1] for y in ys]
        for j in range(1, ys[0].shape[-1]):
            acc = [_broadcast(v, a.shape) for v, a in
                   zip(combine(ctx, op.regions[0], acc, [y[..., j:j + 1] for y in ys]), acc)]
        ys = acc
    while ys[0].shape[-1] > 1:
        first = [y[..., 0::2] for y in ys]
        new = combine(ctx, op.regions[0], first, [y[..., 1::2] for y in ys])
        ys = [_broadcast(v, f.shape) for v, f in zip(new, first)]
    if op.attrs["keepdims"]:
        return tuple(np.ascontiguousarray(np.moveaxis(y, -1, axis)) for y in ys)
    return tuple(np.array(y[..., 0]) for y in ys)  # (ascontiguousarray makes 0-d 1-d)


RULES = {"scan": _scan, "fold": _fold}
