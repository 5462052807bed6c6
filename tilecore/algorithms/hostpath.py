"""The cached host path of the device-scope algorithms: per-library accessors.

A repeated call of an algorithm with arguments of the same types and dtypes
(a *call signature*) skips argument ingestion (`arrays.describe`), planning
and layout: the algorithm keeps, per signature, what the first call proved
(dtypes supported, operator, accumulator, plan) and re-checks only what can
differ between calls with that signature: each array's rank and size, that
a PyTorch tensor is on the GPU, the device (when the process sees more than
one GPU), the temporary storage's size and contiguity, the count, and where
an output may not overlap an input (a scan's d_out), that it is the same
array or shares no byte with it. Any
check that fails sends the call down the general path, which raises the
error or handles the unusual case (and nothing is written).

`lib_of(obj)` gives the accessors of an array type the cached path knows
(NumPy, CuPy, PyTorch, tilecore's DeviceArray), or None (then every call
takes the general path: still correct, just slower). Each accessor is one
small method with the library's cheapest reads, so a check costs a method
call and two or three attribute reads.

What every algorithm's cached path shares: `find` and `remember` (a table of
signatures keyed by a method tag and the arrays' types and dtypes),
`Signature` (the per-call checks of the device and the temporary storage),
`host_views` / `views_at` / `device_views` (an algorithm's temporaries as
arrays at their offsets in the caller's buffer) and `kept` (a bounded
cache's get-or-make).

`epoch()` changes when what plans depend on changes (policy overrides,
TILECORE_TUNING_DIR, TILECORE_ARCH); a signature remembers the epoch it was made in.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Optional

import numpy as np

from ..dispatch import overrides
from ..runtime import DeviceArray

__all__ = ["Lib", "lib_of", "apart_across", "epoch", "one_device", "library_stream",
           "Signature", "find", "remember", "host_views", "views_at", "device_views", "kept",
           "NARROW", "SHAPES_KEPT", "VIEWS_KEPT"]


class Lib(ABC):
    """Accessors for one array type. `vec(a)`: the size of a 1-d array usable
    on this library's side (a PyTorch tensor: on the GPU), else -1.
    `temp(a)`: the bytes of a contiguous writable buffer, else -1. `ptr(a)`:
    the device pointer. `buffer(a, needed)`: temp and ptr in one call, the
    pointer of a contiguous writable buffer of at least `needed` bytes (0 for
    a host one), else -1. `device(a)`: the device ordinal. `apart(a, b, n)`:
    whether a and b are 1-d arrays of this library, usable on its side, of at
    least n elements each, that share no byte (whole arrays; False when
    unsure), what a cached scan checks before writing d_out (one call: the
    check of every scan call)."""
    host = False
    name = ""

    @abstractmethod
    def vec(self, a) -> int: ...

    @abstractmethod
    def temp(self, a) -> int: ...

    @abstractmethod
    def ptr(self, a) -> int: ...

    @abstractmethod
    def buffer(self, a, needed: int) -> int: ...

    @abstractmethod
    def device(self, a) -> int: ...

    @abstractmethod
    def apart(self, a, b, n: int) -> bool: ...

    def extent(self, a, n: int) -> Optional[tuple]:
        """(address, elements, byte stride, item bytes) of a 1-d device array of
        at least n elements usable on this library's side, else None (NumPy
        arrays never meet another library's in one signature)."""
        return None


def _apart(p: int, n: int, s: int, i: int, p2: int, n2: int, s2: int, i2: int) -> bool:
    """Whether two 1-d arrays, each given as address, elements, byte stride and
    item bytes, share no byte (arrays.span's extents, computed inline: a
    cached scan checks this every call)."""
    if not n or not n2:
        return True
    reach, reach2 = (n - 1) * s, (n2 - 1) * s2
    lo, hi = (p + reach, p + i) if reach < 0 else (p, p + reach + i)
    lo2, hi2 = (p2 + reach2, p2 + i2) if reach2 < 0 else (p2, p2 + reach2 + i2)
    return hi <= lo2 or hi2 <= lo


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

    def buffer(self, a, needed: int) -> int:
        return 0 if self.temp(a) >= needed else -1

    def device(self, a) -> int:
        return -1

    def apart(self, a, b, n: int) -> bool:
        return a.ndim == 1 and b.ndim == 1 and a.size >= n and b.size >= n and \
            not np.may_share_memory(a, b)   # bounds only: no address reads in Python


class _Cupy(Lib):
    name = "cupy"

    def vec(self, a) -> int:
        return a.size if a.ndim == 1 else -1

    def temp(self, a) -> int:
        return a.nbytes if a.flags.c_contiguous else -1

    def ptr(self, a) -> int:
        return a.data.ptr

    def buffer(self, a, needed: int) -> int:
        return a.data.ptr if a.flags.c_contiguous and a.nbytes >= needed else -1

    def device(self, a) -> int:
        return a.device.id

    def apart(self, a, b, n: int) -> bool:
        size, size2 = a.size, b.size
        if size < n or size2 < n or a.ndim != 1 or b.ndim != 1:
            return False
        return _apart(a.data.ptr, size, a.strides[0], a.itemsize,
                      b.data.ptr, size2, b.strides[0], b.itemsize)

    def extent(self, a, n: int) -> Optional[tuple]:
        if a.ndim != 1 or a.size < n:
            return None
        return a.data.ptr, a.size, a.strides[0], a.itemsize


def apart_across(la: Lib, lb: Lib):
    """An `apart(a, b, n)` for a of library la and b of lb (la's own when they
    are one library): a by-key or reduce_by_key temporary (a DeviceArray) beside
    the caller's CuPy or PyTorch arrays."""
    if la is lb:
        return la.apart
    ext, ext2 = la.extent, lb.extent

    def apart(a, b, n: int) -> bool:
        e, e2 = ext(a, n), ext2(b, n)
        return e is not None and e2 is not None and _apart(*e, *e2)
    return apart


class _Torch(Lib):
    name = "torch"

    def vec(self, a) -> int:
        return a.numel() if a.ndim == 1 and a.is_cuda else -1

    def temp(self, a) -> int:
        return a.nbytes if a.is_cuda and a.is_contiguous() else -1

    def ptr(self, a) -> int:
        return a.data_ptr()

    def buffer(self, a, needed: int) -> int:
        return a.data_ptr() if a.is_cuda and a.is_contiguous() and a.nbytes >= needed else -1

    def device(self, a) -> int:
        return a.get_device()

    def apart(self, a, b, n: int) -> bool:
        if a.ndim != 1 or b.ndim != 1 or not a.is_cuda or not b.is_cuda:
            return False
        size, size2 = a.numel(), b.numel()
        if size < n or size2 < n:
            return False
        i, j = a.element_size(), b.element_size()
        return _apart(a.data_ptr(), size, a.stride(0) * i, i,
                      b.data_ptr(), size2, b.stride(0) * j, j)

    def extent(self, a, n: int) -> Optional[tuple]:
        if a.ndim != 1 or not a.is_cuda or a.numel() < n:
            return None
        i = a.element_size()
        return a.data_ptr(), a.numel(), a.stride(0) * i, i


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

    def buffer(self, a, needed: int) -> int:
        return a.ptr if self.temp(a) >= needed else -1

    def device(self, a) -> int:
        return a.device_id

    def apart(self, a, b, n: int) -> bool:
        if len(a.shape) != 1 or len(b.shape) != 1 or a.shape[0] < n or b.shape[0] < n:
            return False
        i, j = a.dtype.itemsize, b.dtype.itemsize
        return _apart(a.ptr, a.shape[0], a.strides[0] * i, i,
                      b.ptr, b.shape[0], b.strides[0] * j, j)

    def extent(self, a, n: int) -> Optional[tuple]:
        if len(a.shape) != 1 or a.shape[0] < n:
            return None
        i = a.dtype.itemsize
        return a.ptr, a.shape[0], a.strides[0] * i, i


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
_generation = overrides._generation  # a one-element list, changed by override_policy

if _ENV is not None:
    _get = _ENV.get
    _TUNING_DIR, _ARCH = map(os.environ.encodekey, _KEYS)

    def epoch() -> tuple:
        """A value that changes when plans must be rebuilt: the policy overrides'
        generation and the raw TILECORE_TUNING_DIR and TILECORE_ARCH (read from
        os.environ's own dict, whose `get` and the encoded keys are bound once:
        every cached call checks this, and os.environ.get decodes)."""
        return _generation[0], _get(_TUNING_DIR), _get(_ARCH)
else:  # os.environ replaced by a plain mapping
    def epoch() -> tuple:
        """The value of the definition above, read through os.environ."""
        return (_generation[0], *map(os.environ.get, _KEYS))


_one_device: list = []


def one_device() -> bool:
    """Whether the process sees exactly one GPU (then every device array is on
    it and the cached path skips device checks, as tilecore.launch's does)."""
    if not _one_device:
        from ..runtime import device_count
        _one_device.append(device_count() == 1)
    return _one_device[0]


# -- cached signatures ---------------------------------------------------------------------------

NARROW = 1 << 31      # counts the cached paths take (wider ones specialize the kernels)
SIGNATURES_KEPT = 256
SHAPES_KEPT = 64      # counts (and shapes) a signature keeps its layouts for


def find(table: dict, tag: int, arrays: tuple, extra: tuple = ()) -> tuple[Any, Optional[tuple]]:
    """(signature or None, key): the signature in `table` of a call of method
    `tag` with these two or three arrays (each keyed by its type and dtype)
    and `extra` (operator, init type, ...); key None when the arguments cannot
    key one (not arrays, something unhashable): the general path says what is
    wrong. (Unrolled: a loop of tuple concatenations costs twice as much.)"""
    try:
        a, b = arrays[0], arrays[1]
        key = (tag, type(a), a.dtype, type(b), b.dtype)
        if len(arrays) > 2:
            c = arrays[2]
            key += (type(c), c.dtype)
        if extra:
            key += extra
        return table.get(key), key
    except (AttributeError, TypeError):
        return None, None


def remember(table: dict, key: Optional[tuple], objs: tuple, make) -> None:
    """After a general-path call succeeded with the arrays `objs` (d_in first),
    store `make(libs)` under `key` when every array's type has accessors and
    they are all on one side (host or GPU)."""
    if key is None:
        return
    libs = tuple(map(lib_of, objs))
    if None in libs or any(lib.host is not libs[0].host for lib in libs):
        return
    if len(table) >= SIGNATURES_KEPT:
        table.clear()
    table[key] = make(libs)


class Signature:
    """What a cached call signature proved once (see the module docstring),
    and the checks every call of it still makes (besides an int count under
    NARROW and the epoch unchanged, which the callers check inline):
    `on_device(objs)` (objs on the signature's GPU; always true in a one-GPU
    process) and `temp_ok(temp, needed)` (a buffer of this side, contiguous,
    writable, of at least `needed` bytes, on the device) or `temp_at(temp,
    needed)` (the same check, giving the buffer's pointer). A failed check
    sends the call down the general path."""

    __slots__ = ("libs", "host", "device", "epoch")

    def __init__(self, libs: tuple, device_id: int) -> None:
        self.libs = libs
        self.host = libs[0].host
        # device arrays of a one-GPU process need no device checks (-2: none made)
        self.device = -1 if self.host else (-2 if one_device() else device_id)
        self.epoch = epoch()

    def on_device(self, objs: tuple) -> bool:
        device = self.device
        return device < 0 or all(lib.device(o) == device for lib, o in zip(self.libs, objs))

    def temp_ok(self, temp: Any, needed: int) -> Optional[Lib]:
        """temp's accessors when it passes, else None."""
        tl = _libs.get(type(temp)) or lib_of(temp)
        if tl is None or tl.host is not self.host or tl.temp(temp) < needed or \
                self.device >= 0 and tl.device(temp) != self.device:
            return None
        return tl

    def temp_at(self, temp: Any, needed: int) -> int:
        """temp's device pointer (0 for a host buffer) when it passes temp_ok's
        checks, else -1."""
        tl = _libs.get(type(temp)) or lib_of(temp)
        if tl is None or tl.host is not self.host or \
                self.device >= 0 and tl.device(temp) != self.device:
            return -1
        return tl.buffer(temp, needed)


def host_views(temp: np.ndarray, aliases: tuple) -> tuple:
    """NumPy views of a host buffer (any dtype, C-contiguous) at the aliases'
    (byte offset, dtype, count)."""
    raw = temp.reshape(-1).view(np.uint8)
    return tuple(raw[off:off + count * dt.itemsize].view(dt.numpy_dtype)
                 for off, dt, count in aliases)


VIEWS_KEPT = 64


def views_at(ptr: int, aliases: tuple, device: int) -> tuple:
    """DeviceArrays at the aliases' (byte offset, dtype, count) in the device
    buffer at `ptr`."""
    return tuple(DeviceArray(ptr + off, (count,), (1,), dt, device) for off, dt, count in aliases)


def kept(cache: dict, key: Any, limit: int, make: Callable[..., Any], *args: Any) -> Any:
    """cache[key], made as make(*args) when missing; a cache of `limit`
    entries is emptied first (what a process keeps stays bounded)."""
    got = cache.get(key)
    if got is None:
        if len(cache) >= limit:
            cache.clear()
        got = cache[key] = make(*args)
    return got


def device_views(cache: dict, key: tuple, ptr: int, aliases: tuple, device: int) -> tuple:
    """views_at(ptr, aliases, device), kept in `cache` under `key` (which
    names ptr and the aliases), so that a repeated call makes no object."""
    return kept(cache, key, VIEWS_KEPT, views_at, ptr, aliases, device)


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
