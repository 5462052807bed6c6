"""Rules for atomics: atomic_rmw and atomic_cas.

Blocks run one after another, and within a block the elements of an atomic
apply one at a time in row-major order, each reading the value the previous
ones left: repeated indices all apply, and each element returns the value it
saw. (On the GPU the order among the elements, and among blocks, is
unspecified; results that do not depend on it agree.) Memory order and scope
change nothing here: execution is sequential, so every order is honoured.

For speed the elements are applied in rounds: round r applies the r-th
occurrence of every address at once (the addresses of one round are distinct),
which is the row-major sequence for each address.

An atomic that changed memory counts as a write for the spin-wait check
(interpreter/spin.py); one that left every element as it was (a failed
compare-and-swap, an add of zero) does not.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.core import Op
from .context import BlockContext
from .memory import addressed, split_mask
from ..language.rounding import cast, compute_dtype

__all__ = ["RULES"]


def _float_add(dtype):
    def add(old: np.ndarray, update: np.ndarray) -> np.ndarray:
        c = compute_dtype(dtype)
        return cast(old.astype(c) + update.astype(c), dtype)
    return add


def _combine(op: Op) -> Callable:
    """new = f(old, *operands) for one element of `op`."""
    if op.name == "atomic_cas":
        return lambda old, expected, desired: np.where(_bits(old) == _bits(expected), desired,
                                                       old)
    fn = op.attrs["fn"]
    dtype = op.operands[0].type.dtype
    if fn == "add":
        return _float_add(dtype) if dtype.is_float else np.add
    return {"max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor, "xchg": lambda old, update: update}[fn]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _occurrence(addresses: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have its address."""
    order = np.argsort(addresses, kind="stable")
    ordered = addresses[order]
    pos = np.arange(addresses.size)
    first = np.ones(addresses.size, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    rank = np.empty_like(pos)
    rank[order] = pos - np.maximum.accumulate(np.where(first, pos, 0))
    return rank


def _apply(ctx: BlockContext, op: Op, arr: np.ndarray, operands: list, rest: list,
           outside: np.ndarray) -> np.ndarray:
    """Apply `op` element by element at the indices (and mask) `rest`; the old
    values (`outside` where an element is masked off or out of bounds)."""
    indices, mask = split_mask(op, rest)
    arr, indices, valid = addressed(ctx, op, arr, indices, mask)
    shape = valid.shape
    out = np.array(np.broadcast_to(outside, shape), dtype=arr.dtype)
    sel = np.flatnonzero(valid)
    if sel.size == 0:
        return out
    idx = tuple(np.broadcast_to(i, shape).reshape(-1)[sel] for i in indices)
    vals = [np.broadcast_to(v, shape).reshape(-1)[sel] for v in operands]
    rank = _occurrence(np.ravel_multi_index(idx, arr.shape))
    combine = _combine(op)
    old = np.empty(sel.size, dtype=arr.dtype)
    changed = False
    with np.errstate(all="ignore"):  # integer adds wrap
        for r in range(int(rank.max()) + 1):
            now = rank == r
            where = tuple(i[now] for i in idx)
            before = arr[where]
            after = np.asarray(combine(before, *(v[now] for v in vals))).astype(arr.dtype)
            changed = changed or bool(np.any(_bits(before) != _bits(after)))
            arr[where] = after
            old[now] = before
    if changed:
        ctx.writes += 1
    out.reshape(-1)[sel] = old
    return out


def _atomic_rmw(ctx: BlockContext, op: Op, args: list) -> tuple:
    arr, update, rest = args[0], args[1], args[2:]
    zero = np.zeros((), dtype=arr.dtype)
    return (_apply(ctx, op, arr, [update], rest, zero),)


def _atomic_cas(ctx: BlockContext, op: Op, args: list) -> tuple:
    arr, expected, desired, rest = args[0], args[1], args[2], args[3:]
    return (_apply(ctx, op, arr, [expected, desired], rest, expected),)


RULES = {"atomic_rmw": _atomic_rmw, "atomic_cas": _atomic_cas}
