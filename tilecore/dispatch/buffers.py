"""The caller's temporary storage as bytes, and typed views of it.

`temp_storage` may be any array of at least the requested size, of any dtype
(its bytes are used): a NumPy array for the interpreter, or a device array
(CuPy, PyTorch, DLPack, __cuda_array_interface__, tilecore DeviceArray) for
the GPU. It must be contiguous. `ByteBuffer.view(alias)` is the typed array an
algorithm's kernels read and write: a NumPy view, or a `DeviceArray` at the
alias's byte offset (no allocation, no copy, no synchronization).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .temp_storage import Alias

__all__ = ["ByteBuffer", "host_buffer", "device_buffer"]


class ByteBuffer(NamedTuple):
    nbytes: int
    host: Any          # the uint8 NumPy view (interpreter), else None
    ptr: int           # device pointer (GPU), else 0
    device_id: int

    def view(self, alias: Alias):
        """The typed array of `alias` (offset set by Layout.map_to_buffer)."""
        off, count = alias.offset, alias.count
        if self.host is not None:
            return self.host[off:off + count * alias.dtype.itemsize].view(alias.dtype.numpy_dtype)
        from ..runtime import DeviceArray
        return DeviceArray(self.ptr + off, (count,), (1,), alias.dtype, self.device_id)


def _contiguous(shape, strides) -> bool:
    expect = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def host_buffer(obj: np.ndarray, name: str = "temp_storage") -> ByteBuffer:
    if not (obj.flags.c_contiguous and obj.flags.writeable):
        raise ValueError(f'Invalid argument "{name}": expected a writable C-contiguous array, '
                         f"got one with strides {obj.strides}"
                         + ("" if obj.flags.writeable else " that is read-only"))
    return ByteBuffer(obj.nbytes, obj.reshape(-1).view(np.uint8), 0, -1)


def device_buffer(fields: tuple, name: str = "temp_storage") -> ByteBuffer:
    """From the (ptr, shape, strides, dtype, device_id[, readonly]) fields of
    a device array (tilecore.runtime.arrays.array_fields)."""
    ptr, shape, strides, dtype, device = fields[:5]
    if not _contiguous(tuple(shape), tuple(strides)):
        raise ValueError(f'Invalid argument "{name}": expected a contiguous array, got strides '
                         f"{tuple(strides)} (in elements) for shape {tuple(shape)}")
    if len(fields) > 5 and fields[5]:
        raise ValueError(f'Invalid argument "{name}": the array is read-only')
    return ByteBuffer(math.prod(shape) * dtype.itemsize, None, ptr, device)
