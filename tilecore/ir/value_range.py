"""Bounds on the values of integer tiles, known at compile time.

`value_ranges(fn)` maps each integer tile value to an interval [lo, hi] that
holds every element of it in every run: from its dtype (a uint8 tile lies in
[0, 255]), from constants and `arange`, and through the ops that keep or
narrow intervals (conversions that do not wrap, +, -, *, & with a
non-negative operand, % by a positive constant, >> by a constant, minimum,
maximum, where). Any result that could wrap gets its dtype's whole range.
The backend uses it to see that an atomic's indices fall in a small window
(tilecore/ir/privatize.py).
"""
from __future__ import annotations

from typing import Optional

from ..language.dtypes import DType
from .core import Function, Op, Value

__all__ = ["Interval", "value_ranges", "dtype_range"]

Interval = tuple[int, int]


def dtype_range(dtype: DType) -> Optional[Interval]:
    """Every value of an integer or bool dtype; None for floats."""
    if dtype.name == "bool_":
        return (0, 1)
    if dtype.is_float:
        return None
    bits = dtype.bits
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.signed else (0, (1 << bits) - 1)


def _fit(r: Optional[Interval], dtype: DType) -> Optional[Interval]:
    """`r` if every value in it is representable in `dtype` (nothing wraps),
    else the dtype's whole range."""
    whole = dtype_range(dtype)
    if r is None or whole is None:
        return whole
    return r if whole[0] <= r[0] and r[1] <= whole[1] else whole


def _binary(fn: str, a: Interval, b: Interval) -> Optional[Interval]:
    if fn == "add":
        return (a[0] + b[0], a[1] + b[1])
    if fn == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if fn == "mul":
        ends = [x * y for x in a for y in b]
        return (min(ends), max(ends))
    if fn in ("minimum", "maximum"):
        pick = min if fn == "minimum" else max
        return (pick(a[0], b[0]), pick(a[1], b[1]))
    if fn == "bitand":
        nonneg = [r[1] for r in (a, b) if r[0] >= 0]
        return (0, min(nonneg)) if nonneg else None
    if fn == "mod" and b[0] == b[1] and b[0] > 0:   # Python's %: the divisor's sign
        return (0, b[0] - 1)
    if fn == "rshift" and b[0] == b[1] and 0 <= b[0] < 64 and a[0] >= 0:
        return (a[0] >> b[0], a[1] >> b[0])
    return None


def _op_range(op: Op, ranges: dict[int, Interval]) -> Optional[Interval]:
    """The interval of `op`'s single result, given those of its operands."""
    dtype = op.result.type.dtype
    args = [ranges.get(v.id) for v in op.operands]
    name = op.name
    if name == "constant":
        value = op.attrs["value"]
        return (int(value), int(value)) if not dtype.is_float else None
    if name == "iota":
        return (0, max(op.result.type.shape[0] - 1, 0))
    if name in ("broadcast", "reshape", "permute"):
        return args[0]
    if name == "astype":
        return _fit(args[0] if not op.operands[0].type.dtype.is_float else None, dtype)
    if name == "binary" and None not in args:
        return _fit(_binary(op.attrs["fn"], args[0], args[1]), dtype)
    if name == "where" and args[1] is not None and args[2] is not None:
        return (min(args[1][0], args[2][0]), max(args[1][1], args[2][1]))
    return dtype_range(dtype)


def value_ranges(fn: Function) -> dict[int, Interval]:
    """Value id -> the interval of every integer (or bool) tile value defined by
    a single-result op of `fn`. Block arguments (loop-carried values) and
    parameters get their dtype's range."""
    ranges: dict[int, Interval] = {}
    for p in fn.params:
        _set_dtype_range(ranges, p.value)
    for op in fn.walk():
        for region in op.regions:
            for arg in region.args:
                _set_dtype_range(ranges, arg)
        if len(op.results) == 1 and hasattr(op.result.type, "shape"):
            r = _op_range(op, ranges)
            if r is not None:
                ranges[op.result.id] = r
        else:
            for v in op.results:
                _set_dtype_range(ranges, v)
    return ranges


def _set_dtype_range(ranges: dict[int, Interval], v: Value) -> None:
    dtype = getattr(v.type, "dtype", None)
    r = dtype_range(dtype) if dtype is not None and hasattr(v.type, "shape") else None
    if r is not None:
        ranges[v.id] = r
