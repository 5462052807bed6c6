"""Registers and stack of the kernel in a cubin, read from the cubin itself.

ptxas's `-v` report in the NVRTC log says the same, but NVRTC 13.0 writes it
only for the first program a process compiles (measured on the lent H100
machine: every later log is empty), so a fit that depended on the log never
ran there. A cubin records both in its `.nv.info` section, as the attributes
EIATTR_REGCOUNT and EIATTR_MIN_STACK_SIZE of the kernel's symbol (what
`cuobjdump --dump-resource-usage` prints). Spilled registers live in the stack
frame, so a build that spills more has a larger stack.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

__all__ = ["Resources", "kernel_resources"]

_EIATTR_REGCOUNT = 0x2F
_EIATTR_MIN_STACK_SIZE = 0x12
_EIFMT_SVAL = 4                      # attribute with a sized payload; others take 4 bytes
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")


@dataclass(frozen=True)
class Resources:
    """A kernel's registers per thread and stack bytes per thread (spills included)."""

    registers: int
    stack_bytes: int

    def uses_more_stack_than(self, other: "Resources") -> bool:
        return self.stack_bytes > other.stack_bytes


def _c_string(data: bytes, offset: int) -> str:
    return data[offset:data.index(b"\0", offset)].decode()


def _sections(data: bytes) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, link) of each section of an ELF64 little-endian file."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", data, 0x3A)
    headers = [_SECTION.unpack_from(data, shoff + i * entsize) for i in range(count)]
    names_at = headers[names][4]
    return [(_c_string(data, names_at + h[0]), h[4], h[5], h[6]) for h in headers]


def _symbol_index(data: bytes, sections: list, name: str) -> Optional[int]:
    _, offset, size, link = next(s for s in sections if s[0] == ".symtab")
    strings = sections[link][1]
    for i in range(size // _SYMBOL.size):
        name_at = _SYMBOL.unpack_from(data, offset + i * _SYMBOL.size)[0]
        if _c_string(data, strings + name_at) == name:
            return i
    return None


def _symbol_attributes(data: bytes, offset: int, size: int) -> dict[tuple[int, int], int]:
    """(attribute, symbol index) -> value of the two-word attributes in one .nv.info section."""
    out, pos, end = {}, offset, offset + size
    while pos + 4 <= end:
        fmt, attr, length = data[pos], data[pos + 1], struct.unpack_from("<H", data, pos + 2)[0]
        if fmt != _EIFMT_SVAL:
            pos += 4
            continue
        if length == 8:
            symbol, value = struct.unpack_from("<II", data, pos + 4)
            out[(attr, symbol)] = value
        pos += 4 + length
    return out


def kernel_resources(cubin: bytes) -> Optional[Resources]:
    """The resources of the one kernel in `cubin`, or None when the cubin does
    not say (not an ELF64 cubin, no kernel, no register count)."""
    if cubin[:5] != b"\x7fELF\x02":
        return None
    try:
        sections = _sections(cubin)
        kernels = [s[0][len(".nv.info."):] for s in sections if s[0].startswith(".nv.info.")]
        if len(kernels) > 1:  # device functions kept apart (NVRTC -Ofc) have info too
            names = {s[0] for s in sections}
            kernels = [k for k in kernels if f".nv.constant0.{k}" in names]
        info = [s for s in sections if s[0] == ".nv.info"]
        if len(kernels) != 1 or len(info) != 1:
            return None
        symbol = _symbol_index(cubin, sections, kernels[0])
        attrs = _symbol_attributes(cubin, info[0][1], info[0][2])
    except (struct.error, ValueError, IndexError, StopIteration, UnicodeDecodeError):
        return None
    registers = attrs.get((_EIATTR_REGCOUNT, symbol))
    if symbol is None or registers is None:
        return None
    return Resources(registers, attrs.get((_EIATTR_MIN_STACK_SIZE, symbol), 0))
