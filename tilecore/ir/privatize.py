"""Which atomics a block may apply to a private copy of a small window of an
array (in shared memory), adding the copy into the array once, when the block
ends: the histogram pattern, where every element of a large input updates one
of a few hundred bins and global atomics on so few addresses would serialize.

An atomic_rmw qualifies when the result is the same as applying each update
to the array directly, whatever other blocks do:
- its fn is add, and, or, xor, max or min (associative and commutative: the
  order and grouping of updates do not change the array's final value), on a
  32-bit integer array (64-bit for add);
- its old values are unused, and no other op of the kernel reads or writes
  that array (a prefetch of it does neither): no thread of the kernel can
  observe an intermediate value, so
  its memory order, which only matters through such an observation, cannot
  be seen (the scope SYS, where the host may watch, is excluded);
- the array is 1-D, the access is not raw, and the index tile's values lie
  in a window [lo, hi] of at most MAX_WINDOW elements known at compile time
  (ir/value_range.py): a uint8 sample, `x & 255`, `x % 100`, ...
Updates whose index falls outside the array are dropped as before (the
backend keeps the bounds check).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..language.enums import MemoryScope
from .core import Function, Op
from .types import ArrayType
from .value_range import value_ranges

__all__ = ["Private", "private_atomics", "MAX_WINDOW"]

MAX_WINDOW = 4096          # elements of one private copy (16 KB of int32)
_FNS = frozenset({"add", "and", "or", "xor", "max", "min"})


@dataclass(frozen=True)
class Private:
    """A private window: array elements [lo, lo + size) of the op's array."""

    lo: int
    size: int


def _qualifies(op: Op) -> bool:
    arr = op.operands[0].type
    bits = arr.dtype.itemsize * 8
    return (op.attrs.get("fn") in _FNS and not arr.dtype.is_float and arr.ndim == 1
            and (bits == 32 or (bits == 64 and op.attrs["fn"] == "add"))
            and not op.attrs.get("raw") and op.attrs["memory_scope"] is not MemoryScope.SYS)


def private_atomics(fn: Function) -> dict[int, Private]:
    """id(op) -> its private window, for every atomic_rmw of `fn` that qualifies
    (module docstring). All qualifying atomics on one array share one window."""
    used = {v.id for op in fn.walk() for v in op.operands}
    by_array: dict[int, list[Op]] = {}
    for op in fn.walk():   # the ops that access each array (its shape, an L2 hint: no access)
        if op.operands and isinstance(op.operands[0].type, ArrayType) and \
                op.name not in ("array_dim", "array_stride", "prefetch"):
            by_array.setdefault(op.operands[0].id, []).append(op)
    ranges = None
    out: dict[int, Private] = {}
    for ops in by_array.values():
        if not all(op.name == "atomic_rmw" and _qualifies(op) and op.result.id not in used
                   for op in ops) or len({op.attrs["fn"] for op in ops}) != 1:
            continue
        ranges = ranges if ranges is not None else value_ranges(fn)
        windows = [ranges.get(op.operands[2].id) for op in ops]
        if None in windows:
            continue
        lo, hi = min(w[0] for w in windows), max(w[1] for w in windows)
        lo = max(lo, 0)   # negative indices are out of bounds: dropped
        if hi < lo or hi - lo + 1 > MAX_WINDOW:
            continue
        for op in ops:
            out[id(op)] = Private(lo, hi - lo + 1)
    return out
