"""Rules for global-memory ops: tile-space load/store and gather/scatter.

Within one tile the coordinates along each axis are consecutive (steps only
move the tile's origin), so the in-bounds part of a tile is a box: a basic
slice of the array, transposed by `order` into tile axes. Loads fill the rest
with the padding value; stores write through the slice, which also works for
strided and non-contiguous array views. A tile wholly outside the array is an
empty box: its load is all padding and its store writes nothing, as on the GPU.
A prefetch (an L2 hint) does nothing here.

Gather, scatter and the atomics with attr raw=True (Array.get_raw_memory())
address the memory the array's elements span, by element offset from its
base pointer; an enabled offset outside it raises TileRuntimeError (undefined
behaviour on the GPU).
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from ..errors import OutOfBoundsTileWarning, TileRuntimeError
from ..ir.core import Op
from ..language.dtypes import DType
from ..language.enums import PaddingMode
from .context import BlockContext
from ..language.rounding import cast

__all__ = ["RULES", "padding_value", "addressed", "split_mask", "OutOfBoundsTileWarning"]


_FLOAT_PAD = {PaddingMode.UNDETERMINED: np.nan, PaddingMode.ZERO: 0.0,
              PaddingMode.NEG_ZERO: -0.0, PaddingMode.NAN: np.nan,
              PaddingMode.POS_INF: np.inf, PaddingMode.NEG_INF: -np.inf}


def padding_value(mode: Optional[PaddingMode], dtype: DType) -> np.ndarray:
    """The 0-d array an out-of-bounds element of a load reads. Modes a dtype
    cannot represent map to its nearest sensible value: integers and bool take
    0/False for ZERO and NEG_ZERO, their min for NEG_INF, their max (True)
    otherwise, which makes UNDETERMINED the dtype's max as the IR says."""
    mode = PaddingMode.UNDETERMINED if mode is None else mode
    if dtype.is_float:
        return cast(np.array(_FLOAT_PAD[mode]), dtype)
    if mode in (PaddingMode.ZERO, PaddingMode.NEG_ZERO):
        value = 0
    elif mode is PaddingMode.NEG_INF:
        value = dtype.min
    else:
        value = dtype.max
    return np.array(value, dtype=dtype.numpy_dtype)


def _tile_box(ctx: BlockContext, op: Op, arr: np.ndarray, index: list) -> Optional[tuple]:
    """(array slices, tile slices, order) for the in-bounds part of the
    addressed tile; order defaults to the identity and steps to the shape.

    None when no element of the tile lies inside the array: as on the GPU, a
    load of it reads only padding and a store of it writes nothing (grids that
    overshoot the data are common), with a warning in strict bounds mode.
    Raises TileRuntimeError for a tile wholly or partly out of bounds although
    check_bounds=False promised it inside (undefined behaviour on the GPU)."""
    shape = tuple(op.attrs["shape"])
    order = tuple(op.attrs.get("order") or range(len(shape)))
    steps = tuple(op.attrs.get("steps") or shape)
    tile_index = tuple(int(i) for i in index)
    arr_slices: list = [slice(None)] * arr.ndim
    tile_slices = []
    partial = outside = False
    for k, extent in enumerate(shape):
        start = tile_index[k] * steps[k]
        lo, hi = max(start, 0), min(start + extent, arr.shape[order[k]])
        outside |= lo >= hi
        partial |= hi - lo < extent
        arr_slices[order[k]] = slice(lo, hi)
        tile_slices.append(slice(lo - start, hi - start))
    if partial and not op.attrs.get("check_bounds", True):
        what = "entirely" if outside else "partly"
        raise TileRuntimeError(
            f"{_describe(ctx, op, arr, tile_index, shape, what)}, but check_bounds=False "
            f"promised it in bounds (block {ctx.bid})", loc=op.loc)
    if outside:
        if ctx.bounds.first_outside(op):
            _warn_outside(ctx, op, arr, tile_index, shape)
        return None
    # (..., ): a view of a 0-d array too, where arr[()] would be a copy (a NumPy scalar)
    return (*arr_slices, Ellipsis), (*tile_slices, Ellipsis), order


def _describe(ctx: BlockContext, op: Op, arr: np.ndarray, tile_index: tuple, shape: tuple,
              what: str) -> str:
    name = ctx.array_names.get(op.operands[0], repr(op.operands[0]))
    return (f'{op.name}(): tile {tile_index} of shape {shape} is {what} out of bounds of '
            f'array "{name}" with shape {arr.shape}')


def _warn_outside(ctx: BlockContext, op: Op, arr: np.ndarray, tile_index: tuple,
                  shape: tuple) -> None:
    """Strict bounds mode: report the op's first tile wholly outside its array
    in this launch, attributed to the kernel line."""
    effect = "reads only padding" if op.name == "load" else "writes nothing"
    message = (f"{_describe(ctx, op, arr, tile_index, shape, 'entirely')} (block {ctx.bid}): "
               f"the {op.name} {effect}; reported for the first such tile of this {op.name} "
               f"in the launch ({op.loc})")
    warnings.warn_explicit(message, OutOfBoundsTileWarning, op.loc.filename, op.loc.line)


def _load(ctx: BlockContext, op: Op, args: list) -> tuple:
    arr, index = args[0], args[1:]
    box = _tile_box(ctx, op, arr, index)
    dtype = op.result.type.dtype
    out = np.full(tuple(op.attrs["shape"]),
                  padding_value(op.attrs.get("padding"), dtype), dtype=arr.dtype)
    if box is not None:
        arr_slices, tile_slices, order = box
        out[tile_slices] = arr[arr_slices].transpose(order)
    return (out,)


def _prefetch(ctx: BlockContext, op: Op, args: list) -> tuple:
    """A hint with no observable effect: nothing to do (the index operands are
    integer scalars, as a load's; a tile outside the array is no error)."""
    for i in args[1:]:
        int(i)
    return ()


def _store(ctx: BlockContext, op: Op, args: list) -> tuple:
    arr, tile, index = args[0], args[1], args[2:]
    box = _tile_box(ctx, op, arr, index)
    if box is not None:
        arr_slices, tile_slices, order = box
        arr[arr_slices].transpose(order)[...] = tile[tile_slices]
    ctx.writes += 1
    return ()


def _valid_elements(ctx: BlockContext, op: Op, arr: np.ndarray, indices: list,
                    mask: Optional[np.ndarray]) -> np.ndarray:
    """Bool tile: the element is enabled by the mask and in bounds on every axis.
    With check_bounds=False an enabled out-of-bounds index is a kernel bug and
    raises, so the interpreter shows it."""
    inb = np.ones(np.shape(indices[0]), dtype=np.bool_)
    for axis, idx in enumerate(indices):
        inb &= (idx >= 0) & (idx < arr.shape[axis])
    enabled = np.ones_like(inb) if mask is None else np.asarray(mask, dtype=np.bool_)
    if not op.attrs.get("check_bounds", True) and np.any(enabled & ~inb):
        bad = tuple(int(np.asarray(i)[enabled & ~inb].flat[0]) for i in indices)
        name = ctx.array_names.get(op.operands[0], repr(op.operands[0]))
        raise TileRuntimeError(
            f'{op.name}(): index {bad} is out of bounds of array "{name}" with shape '
            f"{arr.shape}, but check_bounds=False promised in bounds (block {ctx.bid})",
            loc=op.loc)
    return enabled & inb


def _raw_memory(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """(the memory arr's elements span as a 1-d array of its dtype, the
    position of arr's base pointer in it): offsets from the base pointer may
    be negative where a stride is."""
    if arr.size == 0:
        return arr.reshape(-1), 0
    steps = [s // arr.itemsize for s in arr.strides]
    low = sum((n - 1) * s for n, s in zip(arr.shape, steps) if s < 0)
    high = sum((n - 1) * s for n, s in zip(arr.shape, steps) if s > 0)
    first = arr[tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                      for n, s in zip(arr.shape, steps))]  # the lowest address
    # strided as unsigned integers of the same width, then viewed back: some NumPy
    # versions cannot build an array from the interface of an ml_dtypes dtype ('<f1')
    bits = first.view(np.dtype(f"u{arr.itemsize}"))
    span = np.lib.stride_tricks.as_strided(bits, shape=(high - low + 1,),
                                           strides=(arr.itemsize,)).view(arr.dtype)
    return span, -low


def _raw_name(op: Op) -> str:
    """The RawArrayMemory method a raw op comes from, for messages."""
    if op.name == "atomic_rmw":
        return f"RawArrayMemory.atomic_{op.attrs['fn']}_offset"
    return {"gather": "RawArrayMemory.load_offset", "scatter": "RawArrayMemory.store_offset",
            "atomic_cas": "RawArrayMemory.atomic_cas_offset"}[op.name]


def addressed(ctx: BlockContext, op: Op, arr: np.ndarray, indices: list,
              mask: Optional[np.ndarray]) -> tuple[np.ndarray, list, np.ndarray]:
    """(array, indices, valid) that a gather, scatter or atomic indexes: `arr`
    at `indices`, or for a raw op the memory arr spans at the offset
    (indices[0]) moved to it; valid: enabled by the mask and in bounds."""
    if not op.attrs.get("raw"):
        return arr, indices, _valid_elements(ctx, op, arr, indices, mask)
    span, origin = _raw_memory(arr)
    offsets = np.asarray(indices[0], dtype=np.int64)
    with np.errstate(over="ignore"):
        at = offsets + origin
    inside = (at >= 0) & (at < span.size)  # an offset near 2**63 wraps below 0
    enabled = np.ones_like(inside) if mask is None else np.asarray(mask, dtype=np.bool_)
    if np.any(enabled & ~inside):
        bad = int(offsets[enabled & ~inside].flat[0])
        name = ctx.array_names.get(op.operands[0], repr(op.operands[0]))
        reach = (f"offsets {-origin} to {span.size - 1 - origin} reach its elements"
                 if span.size else "it has no elements")
        raise TileRuntimeError(
            f'{_raw_name(op)}(): offset {bad} is outside the memory of array "{name}" with '
            f"shape {arr.shape} ({reach}): undefined behaviour on the GPU (block {ctx.bid})",
            loc=op.loc)
    return span, [at], enabled & inside


def split_mask(op: Op, rest: list) -> tuple[list, Optional[np.ndarray]]:
    if op.attrs.get("has_mask", False):
        return rest[:-1], rest[-1]
    return rest, None


def _safe_index(indices: list, valid: np.ndarray) -> tuple:
    """Indices with disabled elements pointed at 0 (always in bounds when read)."""
    return tuple(np.where(valid, i, 0) for i in indices)


def _gather(ctx: BlockContext, op: Op, args: list) -> tuple:
    pad = args[1]
    indices, mask = split_mask(op, args[2:])
    arr, indices, valid = addressed(ctx, op, args[0], indices, mask)
    if arr.size == 0:
        return (np.full(valid.shape, pad, dtype=arr.dtype),)
    values = arr[_safe_index(indices, valid)]
    return (np.where(valid, values, pad).astype(arr.dtype, copy=False),)


def _scatter(ctx: BlockContext, op: Op, args: list) -> tuple:
    values = args[1]
    indices, mask = split_mask(op, args[2:])
    arr, indices, valid = addressed(ctx, op, args[0], indices, mask)
    arr[tuple(np.asarray(i)[valid] for i in indices)] = np.asarray(values)[valid]
    ctx.writes += 1
    return ()


RULES = {"load": _load, "prefetch": _prefetch, "store": _store, "gather": _gather, "scatter": _scatter}
