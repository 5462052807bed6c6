"""Kernel parameter packing: dtype -> struct code, and a persistent buffer
laid out like the kernel's C parameter list.

A kernel signature is described by a `struct` format in native-aligned mode
('@'), one code per kernel parameter (e.g. '@Qiiqq' for a pointer, two ints
and two long longs). `ParamBuffer` owns a buffer with that layout plus the
`void*[]` array of per-parameter addresses that cuLaunchKernel's
kernelParams expects; both are built once, so a launch only re-packs values.
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any

import numpy as np

from ..language import dtypes as dt
from ..language.dtypes import DType

__all__ = ["POINTER_CODE", "struct_code", "scalar_bits", "param_offsets", "ParamBuffer"]

POINTER_CODE = "Q"  # a device pointer (CUdeviceptr, 64-bit)

# Floats whose C++ type has no struct equivalent travel as their raw bits.
_STRUCT_CODES: dict[DType, str] = {
    dt.bool_: "?",
    dt.uint8: "B", dt.uint16: "H", dt.uint32: "I", dt.uint64: "Q",
    dt.int8: "b", dt.int16: "h", dt.int32: "i", dt.int64: "q",
    dt.float16: "H", dt.bfloat16: "H",
    dt.float32: "f", dt.float64: "d",
    dt.tfloat32: "f",  # a 32-bit float container; the tensor cores drop the low mantissa bits
    dt.float8_e4m3fn: "B", dt.float8_e5m2: "B", dt.float8_e8m0fnu: "B",
    dt.float4_e2m1fn: "B",  # one value in the low nibble of a byte
}
_BITS_VIEW = {1: np.uint8, 2: np.uint16}
_ALLOWED_CODES = frozenset("?bBhHiIqQfd")


def struct_code(dtype: DType) -> str:
    """The `struct` code a scalar kernel parameter of `dtype` is packed with.
    16-bit and smaller floats use an unsigned integer code: pack them with
    `scalar_bits`."""
    return _STRUCT_CODES[dtype]


def scalar_bits(dtype: DType, value: Any) -> int:
    """Raw bit pattern of `value` rounded to a float dtype stored as bits
    (float16, bfloat16, fp8, fp4), as an unsigned int for `struct`."""
    if not dtype.is_float or dtype.itemsize not in _BITS_VIEW:
        raise TypeError(f"scalar_bits() expects a float dtype of at most 16 bits, got {dtype}")
    with np.errstate(over="ignore"):
        arr = np.array(value, dtype=dtype.numpy_dtype)
    return int(arr.view(_BITS_VIEW[dtype.itemsize]))


def param_offsets(param_format: str) -> tuple[int, ...]:
    """Byte offset of each parameter of a native-aligned struct format:
    the size of the prefix ending with that item, minus the item's size."""
    if not param_format.startswith("@"):
        raise ValueError(f"Invalid parameter format {param_format!r}: must start with '@' "
                         f"(native alignment, as the C compiler lays out the parameters)")
    codes = param_format[1:]
    bad = sorted(set(codes) - _ALLOWED_CODES)
    if bad:
        raise ValueError(f"Invalid parameter format {param_format!r}: unsupported codes "
                         f"{''.join(bad)!r}; expected one of {''.join(sorted(_ALLOWED_CODES))!r}, "
                         f"one per parameter")
    return tuple(struct.calcsize("@" + codes[:i + 1]) - struct.calcsize(codes[i])
                 for i in range(len(codes)))


class ParamBuffer:
    """Persistent storage for one kernel's parameters.

    `pack(values)` writes the values at their C offsets; `kernel_params` is
    the address of the `void*[]` array pointing at each parameter, valid as
    long as this object lives."""

    def __init__(self, param_format: str):
        self.format = param_format
        self.offsets = param_offsets(param_format)
        self.size = struct.calcsize(param_format)
        # A bytearray packs fastest; c_char.from_buffer pins it and gives its address.
        # Over-allocate so the parameters can start on an 8-byte boundary.
        self._storage = bytearray(self.size + 8)
        self._pin = ctypes.c_char.from_buffer(self._storage)
        raw = ctypes.addressof(self._pin)
        self._start = -raw % 8
        base = raw + self._start
        self._pointers = (ctypes.c_void_p * max(len(self.offsets), 1))(
            *[base + off for off in self.offsets])
        self.kernel_params = ctypes.addressof(self._pointers) if self.offsets else 0
        self._pack_into = struct.Struct(param_format).pack_into

    def pack(self, values: tuple) -> None:
        """Write `values`, one per parameter, into the buffer."""
        self._pack_into(self._storage, self._start, *values)

    def raw(self) -> bytes:
        """The packed bytes (for tests and debugging)."""
        return bytes(self._storage[self._start:self._start + self.size])
