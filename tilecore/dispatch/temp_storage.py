"""Temporary-storage layout, implemented once for every algorithm (CUB's
`temporary_storage::layout` and `alias_temporaries`).

A layout has a fixed number of *slots*; each slot holds one or more
*aliases* (typed sub-buffers) that share its memory, so aliases of one slot
may only be used one after another in stream order, while different slots may
be used at the same time. Every slot starts on a 256-byte boundary and is as
large as its largest alias. The layout's size is what the two-phase API
returns for `temp_storage=None` (at least 1 byte, as in CUB); `map_to_buffer`
checks a buffer against it and gives each alias its byte offset.

    layout = Layout(2)
    partials = layout.slot(0).alias(float32, grid)
    counters = layout.slot(1).alias(int32, 4)
    needed = layout.size()               # bytes to ask for
    layout.map_to_buffer(nbytes)         # ValueError if nbytes < needed
    partials.offset, counters.offset     # byte offsets inside the buffer
"""
from __future__ import annotations

from typing import Optional

ALIGNMENT = 256

__all__ = ["ALIGNMENT", "Alias", "Slot", "Layout", "align_up", "check_size"]


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return -(-n // alignment) * alignment


def check_size(needed: int, nbytes: int, name: str = "temp_storage") -> None:
    """ValueError naming the argument, the bytes needed and those given when a
    buffer of `nbytes` is smaller than `needed`."""
    if nbytes < needed:
        raise ValueError(f'Invalid argument "{name}": the temporary storage is too small: '
                         f"expected at least {needed} bytes, got {nbytes} bytes (call with "
                         f"{name}=None to get the size)")


class Alias:
    """A typed sub-buffer of `count` elements of `dtype` (a tilecore DType)
    inside a slot; `offset` is its byte offset once the layout is mapped."""

    __slots__ = ("slot", "dtype", "count", "offset")

    def __init__(self, slot: "Slot", dtype, count: int) -> None:
        self.slot, self.dtype, self.count = slot, dtype, 0
        self.offset: Optional[int] = None
        self.grow(count)

    def grow(self, count: int) -> "Alias":
        """Make room for at least `count` elements (never shrinks)."""
        if count < 0:
            raise ValueError(f"an alias cannot hold {count} elements")
        self.count = max(self.count, int(count))
        return self

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"Alias({self.dtype.name}[{self.count}] at {self.offset})"


class Slot:
    """Memory shared by its aliases; as large as the largest one."""

    __slots__ = ("index", "aliases")

    def __init__(self, index: int) -> None:
        self.index = index
        self.aliases: list[Alias] = []

    def alias(self, dtype, count: int = 0) -> Alias:
        a = Alias(self, dtype, count)
        self.aliases.append(a)
        return a

    @property
    def nbytes(self) -> int:
        return max((a.nbytes for a in self.aliases), default=0)


class Layout:
    """`num_slots` slots laid out one after another, each 256-byte aligned."""

    __slots__ = ("slots",)

    def __init__(self, num_slots: int) -> None:
        self.slots = [Slot(i) for i in range(num_slots)]

    def slot(self, index: int) -> Slot:
        return self.slots[index]

    def offsets(self) -> list[int]:
        """Byte offset of each slot (empty slots take no room)."""
        out, pos = [], 0
        for s in self.slots:
            out.append(pos)
            pos += align_up(s.nbytes)
        return out

    def size(self) -> int:
        """Bytes the layout needs: at least 1 (CUB never asks for 0)."""
        return max(1, sum(align_up(s.nbytes) for s in self.slots))

    def map_to_buffer(self, nbytes: int, name: str = "temp_storage") -> None:
        """Give every alias its offset inside a buffer of `nbytes` bytes;
        ValueError naming the argument, the bytes needed and those given when
        the buffer is too small."""
        check_size(self.size(), nbytes, name)
        for s, off in zip(self.slots, self.offsets()):
            for a in s.aliases:
                a.offset = off
