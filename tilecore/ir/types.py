"""IR value types: tiles (scalars are 0-d tiles) and global arrays."""
from __future__ import annotations

import math
from dataclasses import dataclass

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
    strides are runtime values."""

    dtype: DType
    ndim: int

    def __str__(self) -> str:
        return f"array<{self.dtype.name}, {self.ndim}d>"


def scalar(dtype: DType) -> TileType:
    return TileType(dtype, ())
