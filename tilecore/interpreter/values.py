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
    """The op's value, made on its first run in the launch and then shared
    (read-only, as every tile is) by all the runs of the launch's blocks."""
    value = ctx.constants.get(op)
    if value is None:
        value = ctx.constants[op] = _make_constant(op)
    return (value,)


def _make_constant(op: Op) -> np.ndarray:
    dtype = op.result.type.dtype
    value = op.attrs["value"]
    if dtype.is_integer:
        out = np.array(value, dtype=dtype.numpy_dtype)
    else:
        out = np.asarray(cast(np.array(value), dtype))  # bool's `!= 0` gives a NumPy scalar
    out.flags.writeable = False
    return out


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
    return (_broadcast_to(args[0], tuple(op.attrs["shape"])),)


def _broadcast_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    """`np.broadcast_to(x, shape)`: for a 0-d `x` (a scalar made a tile, the
    common case) the same read-only view with all strides 0, built directly,
    as NumPy's general version costs several times more than the op."""
    if x.ndim:
        return np.broadcast_to(x, shape)
    view = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
    view.flags.writeable = False
    return view


def _reshape(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.reshape(args[0], tuple(op.attrs["shape"])),)


def _permute(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.transpose(args[0], tuple(op.attrs["axes"])),)


RULES = {"constant": _constant, "bid": _bid, "num_blocks": _num_blocks,
         "array_dim": _array_dim, "array_stride": _array_stride, "iota": _iota,
         "broadcast": _broadcast, "reshape": _reshape, "permute": _permute}
