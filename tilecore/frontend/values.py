"""What a Python expression in tile code evaluates to at compile time.

Either an IR `Value` (a tile, scalar or array known only at run time), or a
compile-time object: a `Const` (number, dtype, enum, string, module,
function, ...), a `TupleVal`, a `TiledView`, a `RawMemory`, a `BoundMethod`, or an
`Undefined` marker for names that exist on only some control-flow paths.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from ..ir.core import Value
from ..language.dtypes import DType

__all__ = ["Const", "TupleVal", "TiledView", "RawMemory", "BoundMethod", "Undefined",
           "FrontVal", "is_number"]


@dataclass(frozen=True)
class Const:
    """A compile-time object. Numbers with dtype None are loosely typed
    (infinite-precision ints, float64 floats); with a dtype they are strictly
    typed constants, already wrapped/rounded to that dtype."""

    value: Any
    dtype: Optional[DType] = None

    @property
    def is_number(self) -> bool:
        return is_number(self.value)


def is_number(v: Any) -> bool:
    import numpy as np
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


@dataclass(frozen=True)
class TupleVal:
    items: tuple["FrontVal", ...]


@dataclass(frozen=True)
class TiledView:
    """`Array.tiled_view(...)`: an array with a fixed tile shape, padding and steps."""

    array: Value
    tile_shape: tuple[int, ...]
    padding: Any
    steps: tuple[int, ...]


@dataclass(frozen=True)
class RawMemory:
    """`Array.get_raw_memory()` (cuTile's RawArrayMemory): the array's memory
    addressed by element offsets from its base pointer."""

    array: Value


@dataclass(frozen=True)
class BoundMethod:
    """`obj.method` before the call: resolved by the method table."""

    obj: "FrontVal"
    name: str


@dataclass(frozen=True)
class Undefined:
    """A name bound on some control-flow paths only."""

    name: str
    reason: str


FrontVal = Union[Value, Const, TupleVal, TiledView, RawMemory, BoundMethod, Undefined]
