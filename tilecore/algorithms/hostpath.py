"""The cached host path of the device-scope algorithms: per-library accessors.

A repeated call of an algorithm with arguments of the same types and dtypes
(a *call signature*) skips argument ingestion (`arrays.describe`), planning
and layout: the algorithm keeps, per signature, what the first call proved
(dtypes supported, operator, accumulator, plan) and re-checks only what can
differ between calls with that signature: each array's rank and size, that
a PyTorch tensor is on the GPU, the device (when the process sees more than
one GPU), the temporary storage's size and contiguity, and the count. Any
check that fails sends the call down the general path, which raises the
error or handles the unusual case (and nothing is written).

`lib_of(obj)` gives the accessors of an array type the cached path knows
(NumPy, CuPy, PyTorch, tilecore's DeviceArray), or None (then every call
takes the general path: still correct, just slower). Each accessor is one
small method with the library's cheapest reads, so a check costs a method
call and two or three attribute reads.

`epoch()` changes when what plans depend on changes (policy overrides,
TILECORE_TUNING_DIR, TILECORE_ARCH); a signature remembers the epoch it was made in.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Optional

import numpy as np

from ..dispatch import overrides
from ..runtime import DeviceArray

__all__ = ["Lib", "lib_of", "epoch", "one_device", "library_stream"]


class Lib(ABC):
    """Accessors for one array type. `vec(a)`: the size of a 1-d array usable
    on this library's side (a PyTorch tensor: on the GPU), else -1.
    `temp(a)`: the bytes of a contiguous writable buffer, else -1. `ptr(a)`:
    the device pointer. `device(a)`: the device ordinal."""
    host = False
    name = ""

    @abstractmethod
    def vec(self, a) -> int: ...

    @abstractmethod
    def temp(self, a) -> int: ...

    @abstractmethod
    def ptr(self, a) -> int: ...

    @abstractmethod
    def device(self, a) -> int: ...


class _Numpy(Lib):
    host = True
    name = "numpy"

    def vec(self, a) -> int:
        return a.size if a.ndim == 1 else -1

    def temp(self, a) -> int:
        f = a.flags
        return a.nbytes if f.c_contiguous and f.writeable else -1

    def ptr(self, a) -> int:
        return a.ctypes.data   # the host address: the interpreter path never passes it on

    def device(self, a) -> int:
        return -1


class _Cupy(Lib):
    name = "cupy"

    def vec(self, a) -> int:
        return a.size if a.ndim == 1 else -1

    def temp(self, a) -> int:
        return a.nbytes if a.flags.c_contiguous else -1

    def ptr(self, a) -> int:
        return a.data.ptr

    def device(self, a) -> int:
        return a.device.id


class _Torch(Lib):
    name = "torch"

    def vec(self, a) -> int:
        return a.numel() if a.ndim == 1 and a.is_cuda else -1

    def temp(self, a) -> int:
        return a.nbytes if a.is_cuda and a.is_contiguous() else -1

    def ptr(self, a) -> int:
        return a.data_ptr()

    def device(self, a) -> int:
        return a.get_device()


class _Described(Lib):
    """tilecore.runtime.DeviceArray (raw device memory described by the caller)."""
    name = "tilecore"

    def vec(self, a) -> int:
        shape = a.shape
        return shape[0] if len(shape) == 1 else -1

    def temp(self, a) -> int:
        if a.readonly or any(s != 1 for s in a.strides):  # the general path decides
            return -1
        return a.size * a.dtype.itemsize

    def ptr(self, a) -> int:
        return a.ptr

    def device(self, a) -> int:
        return a.device_id


_NUMPY, _CUPY, _TORCH, _DESCRIBED = _Numpy(), _Cupy(), _Torch(), _Described()
_libs: dict[type, Optional[Lib]] = {np.ndarray: _NUMPY, DeviceArray: _DESCRIBED}


def lib_of(obj: Any) -> Optional[Lib]:
    """The accessors for `obj`'s type (decided once per type), or None."""
    cls = type(obj)
    try:
        return _libs[cls]
    except KeyError:
        pass
    lib: Optional[Lib] = None
    root = cls.__module__.split(".")[0]
    if root == "cupy" and cls.__name__ == "ndarray":
        lib = _CUPY
    elif root == "torch" and any(c.__name__ == "Tensor" for c in cls.__mro__):
        lib = _TORCH
    _libs[cls] = lib
    return lib


# -- what plans depend on ------------------------------------------------------------------------

_ENV = getattr(os.environ, "_data", None)
_KEYS = ("TILECORE_TUNING_DIR", "TILECORE_ARCH")  # ARCH: the interpreter's stand-in target
_ENCODED = tuple(map(os.environ.encodekey, _KEYS)) if _ENV is not None else ()
_generation = overrides._generation  # a one-element list, changed by override_policy


def epoch() -> tuple:
    """A value that changes when plans must be rebuilt: the policy overrides'
    generation and the raw TILECORE_TUNING_DIR and TILECORE_ARCH (read from
    os.environ's own dict: 0.05 us each, where os.environ.get decodes)."""
    if _ENV is None:  # os.environ replaced by a plain mapping
        return (_generation[0], *map(os.environ.get, _KEYS))
    get = _ENV.get
    return _generation[0], get(_ENCODED[0]), get(_ENCODED[1])


_one_device: list = []


def one_device() -> bool:
    """Whether the process sees exactly one GPU (then every device array is on
    it and the cached path skips device checks, as tilecore.launch's does)."""
    if not _one_device:
        from ..runtime import device_count
        _one_device.append(device_count() == 1)
    return _one_device[0]


# -- the library's current stream (the convenience layer) ---------------------------------------

def library_stream(lib: Lib):
    """A function giving the raw handle of the current stream of `lib` for an
    array (None for NumPy: the interpreter has no streams)."""
    if lib is _CUPY:
        import cupy
        current = cupy.cuda.get_current_stream

        def cupy_stream(x) -> int:
            return current().ptr
        return cupy_stream
    if lib is _TORCH:
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:  # the handle as an int, without a Stream object
            def torch_raw_stream(x) -> int:
                return raw(x.get_device())
            return torch_raw_stream
        current_stream = torch.cuda.current_stream

        def torch_stream(x) -> int:
            return current_stream(x.device).cuda_stream
        return torch_stream
    return None
