"""Rules for ops that make or rearrange values without arithmetic: constant,
grid and array queries, iota, broadcast, reshape, permute.

Tiles are immutable, so broadcast/reshape/permute may return NumPy views of
their operand; no rule ever writes into a tile.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Op
from .context import BlockContext
from ..language.rounding import cast

__all__ = ["RULES"]


def _constant(ctx: BlockContext, op: Op, args: list) -> tuple:
    dtype = op.result.type.dtype
    value = op.attrs["value"]
    if dtype.is_integer:
        return (np.array(value, dtype=dtype.numpy_dtype),)
    return (cast(np.array(value), dtype),)


def _int32(value: int) -> np.ndarray:
    return np.array(value, dtype=np.int32)


def _bid(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (_int32(ctx.bid[op.attrs["axis"]]),)


def _num_blocks(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (_int32(ctx.grid[op.attrs["axis"]]),)


def _index_value(op: Op, value: int) -> np.ndarray:
    """An array's dim or stride in its index dtype (the op's result dtype); the
    launch specialized the array as wide wherever int32 cannot hold it."""
    return np.array(value, dtype=op.result.type.dtype.numpy_dtype)


def _array_dim(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (_index_value(op, args[0].shape[op.attrs["axis"]]),)


def _array_stride(ctx: BlockContext, op: Op, args: list) -> tuple:
    arr = args[0]
    return (_index_value(op, arr.strides[op.attrs["axis"]] // arr.itemsize),)


def _iota(ctx: BlockContext, op: Op, args: list) -> tuple:
    (n,) = op.attrs["shape"]
    return (np.arange(n).astype(op.attrs["dtype"].numpy_dtype),)


def _broadcast(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.broadcast_to(args[0], tuple(op.attrs["shape"])),)


def _reshape(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.reshape(args[0], tuple(op.attrs["shape"])),)


def _permute(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.transpose(args[0], tuple(op.attrs["axes"])),)


RULES = {"constant": _constant, "bid": _bid, "num_blocks": _num_blocks,
         "array_dim": _array_dim, "array_stride": _array_stride, "iota": _iota,
         "broadcast": _broadcast, "reshape": _reshape, "permute": _permute}
