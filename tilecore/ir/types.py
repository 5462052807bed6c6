"""IR value types: tiles (scalars are 0-d tiles) and global arrays."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..language import dtypes as D
from ..language.dtypes import DType

__all__ = ["TileType", "ArrayType", "scalar"]


@dataclass(frozen=True)
class TileType:
    """An immutable tile of `dtype` with a compile-time `shape` (() = scalar)."""

    dtype: DType
    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype.name
        return f"tile<{self.dtype.name}, {'x'.join(map(str, self.shape))}>"


@dataclass(frozen=True)
class ArrayType:
    """A global array kernel parameter: element dtype and rank; its shape and
    strides are runtime values of `index_dtype`: int32, or int64 for an array
    with a dimension or a stride of 2**31 or more (a specialization of its own,
    so that ordinary arrays keep 32-bit index arithmetic)."""

    dtype: DType
    ndim: int
    index_dtype: DType = D.int32

    def __str__(self) -> str:
        wide = ", int64 index" if self.index_dtype is D.int64 else ""
        return f"array<{self.dtype.name}, {self.ndim}d{wide}>"


def scalar(dtype: DType) -> TileType:
    return TileType(dtype, ())
