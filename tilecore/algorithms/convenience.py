"""The convenience layer: `sum(x)`, `min(x)`, `max(x)`, `argmin(x)`,
`argmax(x)` allocate their result (a 0-d array of x's library: NumPy, CuPy or
PyTorch) and reuse cached temporary storage, running on the library's current
stream (torch.cuda.current_stream() for tensors, CuPy's current stream for
CuPy arrays). Result dtypes follow NumPy/CuPy/PyTorch: sum of integers
narrower than 64 bits gives int64 (uint64 for unsigned), of floats the input's
dtype; min/max the input's dtype; argmin/argmax an int64 index.

x may have any shape (it is reduced whole) but must be contiguous.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..language import dtypes as D
from .arrays import describe
from .reduce import DeviceReduce

__all__ = ["sum", "min", "max", "argmin", "argmax"]


class _Library:
    """How to allocate, flatten and find the current stream for one array type."""

    def __init__(self, empty, flat, stream, key) -> None:
        self.empty, self.flat, self.stream, self.key = empty, flat, stream, key


def _numpy() -> _Library:
    return _Library(lambda shape, dtype, like: np.empty(shape, dtype.numpy_dtype),
                    lambda x: x.reshape(-1), lambda x: None, lambda x, s: "numpy")


def _cupy() -> _Library:
    import cupy as cp

    def stream(x):
        return cp.cuda.get_current_stream()

    return _Library(lambda shape, dtype, like: cp.empty(shape, dtype.numpy_dtype),
                    lambda x: x.reshape(-1), stream,
                    lambda x, s: ("cupy", x.device.id, s.ptr))


def _torch() -> _Library:
    import torch
    dtypes = {D.int8: torch.int8, D.int16: torch.int16, D.int32: torch.int32,
              D.int64: torch.int64, D.uint8: torch.uint8, D.float16: torch.float16,
              D.bfloat16: torch.bfloat16, D.float32: torch.float32, D.float64: torch.float64}
    for name in ("uint16", "uint32", "uint64"):
        if hasattr(torch, name):
            dtypes[getattr(D, name)] = getattr(torch, name)

    def stream(x):
        return torch.cuda.current_stream(x.device)

    return _Library(lambda shape, dtype, like: torch.empty(shape, dtype=dtypes[dtype],
                                                           device=like.device),
                    lambda x: x.reshape(-1), stream,
                    lambda x, s: ("torch", x.device.index, s.cuda_stream))


_libraries: dict[type, _Library] = {}


def _library(x: Any) -> _Library:
    lib = _libraries.get(type(x))
    if lib is None:
        root = type(x).__module__.split(".")[0]
        if isinstance(x, np.ndarray):
            lib = _numpy()
        elif root == "cupy":
            lib = _cupy()
        elif root == "torch":
            lib = _torch()
        else:
            raise TypeError(f"tilecore.algorithms: expected a NumPy, CuPy or PyTorch array, got "
                            f"{type(x).__name__}")
        _libraries[type(x)] = lib
    return lib


_temp: dict[Any, Any] = {}


def _temp_storage(lib: _Library, x: Any, stream: Any, nbytes: int):
    """A cached buffer of at least `nbytes` for (library, device, stream): reused
    by calls in stream order, grown when too small."""
    key = lib.key(x, stream)
    buf = _temp.get(key)
    if buf is None or _nbytes(buf) < nbytes:
        buf = _temp[key] = lib.empty((builtins.max(nbytes, 256),), D.uint8, x)
    return buf


def _nbytes(buf) -> int:
    n = getattr(buf, "nbytes", None)
    return int(n) if n is not None else buf.numel() * buf.element_size()


def _sum_dtype(dt):
    if dt.is_integer and dt.itemsize < 8:
        return D.int64 if dt.signed else D.uint64
    return dt


def _call(x: Any, method, out_dtypes: tuple, *extra) -> tuple:
    lib = _library(x)
    flat = lib.flat(x)
    stream = lib.stream(x)
    outs = tuple(lib.empty((), dt, x) for dt in out_dtypes)
    views = tuple(o.reshape(1) for o in outs)
    n = describe(flat, "x").size
    nbytes = method(None, flat, *views, n, *extra, stream)
    method(_temp_storage(lib, x, stream, nbytes), flat, *views, n, *extra, stream)
    return outs


def sum(x):  # noqa: A001
    """The sum of all elements of x (a 0-d array of x's library)."""
    return _call(x, DeviceReduce.sum, (_sum_dtype(describe(x, "x").dtype),))[0]


def min(x):  # noqa: A001
    """The minimum of all elements of x (NaNs ignored, as CUB)."""
    return _call(x, DeviceReduce.min, (describe(x, "x").dtype,))[0]


def max(x):  # noqa: A001
    """The maximum of all elements of x (NaNs ignored, as CUB)."""
    return _call(x, DeviceReduce.max, (describe(x, "x").dtype,))[0]


def argmin(x):
    """The flat index (int64) of the first minimum of x."""
    return _call(x, DeviceReduce.arg_min, (describe(x, "x").dtype, D.int64))[1]


def argmax(x):
    """The flat index (int64) of the first maximum of x."""
    return _call(x, DeviceReduce.arg_max, (describe(x, "x").dtype, D.int64))[1]
