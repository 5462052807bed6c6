"""The convenience layer: `sum(x)`, `min(x)`, `max(x)`, `argmin(x)`,
`argmax(x)` allocate their result (a 0-d array of x's library: NumPy, CuPy or
PyTorch) and reuse cached temporary storage, running on the library's current
stream (torch.cuda.current_stream() for tensors, CuPy's current stream for
CuPy arrays). Result dtypes follow NumPy/CuPy/PyTorch: sum of integers
narrower than 64 bits gives int64 (uint64 for unsigned), of floats the input's
dtype; min/max the input's dtype; argmin/argmax an int64 index.

x may have any shape (it is reduced whole; a strided x of more than one
dimension is copied by its library's reshape).

A repeated call with the same array type and dtype takes a cached path (see
`_Conv`): no size query, no argument ingestion, one allocation (the result).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Optional

import numpy as np

from ..language import dtypes as D
from ..runtime import DeviceArray
from .arrays import describe
from .hostpath import Lib, epoch, host_views, lib_of, library_stream, one_device
from .reduce import DeviceReduce, signature_plan
from .shared import check_dtype

__all__ = ["sum", "min", "max", "argmin", "argmax"]


class _Library:
    """How to allocate, flatten and find the current stream for one array type;
    `native(dtype)` is the library's dtype for a tilecore dtype."""

    def __init__(self, empty, flat, stream, key, native) -> None:
        self.empty, self.flat, self.stream, self.key = empty, flat, stream, key
        self.native = native


def _numpy() -> _Library:
    return _Library(lambda shape, dtype, like: np.empty(shape, dtype.numpy_dtype),
                    lambda x: x.reshape(-1), lambda x: None, lambda x, s: "numpy",
                    lambda dtype: dtype.numpy_dtype)


def _cupy() -> _Library:
    """CuPy's: results, buffers and the current stream of x's device, which
    need not be the current one (the cached paths, of one-GPU processes only,
    allocate on the current device: `allocator`)."""
    import cupy as cp

    def empty(shape, dtype, like):
        with like.device:
            return cp.empty(shape, dtype.numpy_dtype)

    def stream(x):
        with x.device:
            return cp.cuda.get_current_stream()

    return _Library(empty, lambda x: x.reshape(-1), stream,
                    lambda x, s: ("cupy", x.device.id, s.ptr), lambda dtype: dtype.numpy_dtype)


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
                    lambda x, s: ("torch", x.device.index, s.cuda_stream), dtypes.get)


def allocator(lib: Lib, library: _Library, x: Any, dtype) -> Callable[[tuple], Any]:
    """shape -> a new uninitialized C-contiguous array of tilecore dtype `dtype`
    of x's library on x's device, by the library's cheapest constructor: CuPy's
    `cupy.ndarray(shape, dtype)` (what cupy.empty calls: memory from the
    current device's pool, for the current stream), PyTorch's `torch.empty`
    with a prebuilt torch.device. (`lib`, `library`: x's accessors and
    _Library.)"""
    native = library.native(dtype)
    if lib.name == "cupy":
        import cupy
        ndarray = cupy.ndarray
        return lambda shape: ndarray(shape, native)
    if lib.name == "torch":
        import torch
        torch_empty, where = torch.empty, torch.device("cuda", lib.device(x))
        return lambda shape: torch_empty(shape, dtype=native, device=where)
    return lambda shape: np.empty(shape, native)


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


# (library, device, raw stream handle) or "numpy" -> (buffer, its bytes, its device pointer or 0)
_temp: dict[Any, tuple] = {}


def _temp_storage(lib: _Library, x: Any, stream: Any, nbytes: int):
    """A cached buffer of at least `nbytes` for (library, device, stream): reused
    by calls in stream order, grown when too small."""
    return temp_entry(lib, lib.key(x, stream), nbytes, x)[0]


def temp_entry(lib: _Library, key: Any, nbytes: int, x: Any) -> tuple:
    """(buffer, bytes, device pointer: 0 on the host) of the cached buffer
    under `key` ("numpy", or (library, device, raw stream handle): what
    _Library.key gives), grown to at least `nbytes` (a cached path reads
    `_temp` first and calls this when the entry is missing or too small)."""
    entry = _temp.get(key)
    if entry is None or entry[1] < nbytes:
        size = builtins.max(nbytes, 256)
        buf = lib.empty((size,), D.uint8, x)
        accessors = lib_of(buf)
        entry = _temp[key] = (buf, size, 0 if accessors.host else accessors.ptr(buf))
    return entry


def _sum_dtype(dt):
    if dt.is_integer and dt.itemsize < 8:
        return D.int64 if dt.signed else D.uint64
    return dt


def _call(x: Any, method, out_dtypes: tuple, *extra) -> tuple:
    """The general path: the two-phase calls with every argument checked."""
    lib = _library(x)
    flat = lib.flat(x)
    stream = lib.stream(x)
    outs = tuple(lib.empty((), dt, x) for dt in out_dtypes)
    views = tuple(o.reshape(1) for o in outs)
    n = describe(flat, "x").size
    nbytes = method(None, flat, *views, n, *extra, stream)
    method(_temp_storage(lib, x, stream, nbytes), flat, *views, n, *extra, stream)
    return outs, (flat, *views)


# -- the cached path -----------------------------------------------------------------------------
#
# Per (function, array type, dtype) a _Conv keeps the plan the first call's two-phase calls
# made, the library's accessors, its current-stream reader and an allocator of the result;
# a call then costs the current stream, the result's allocation, the plan's launches and a
# few attribute reads. The temporary buffer (and argmin/argmax's value, which is not
# returned) are cached per (library, device, stream) and grown when too small.

_WIDE = 1 << 31
_ONE = (1,)
_scratch: dict[Any, Any] = {}


class _Conv:
    """The cached path of one (function, array type, dtype): `call(x)` gives the
    result (already 0-d), or None to take the general path.

    On the GPU the result is allocated 0-d with the library's cheapest
    constructor (CuPy: `cupy.ndarray((), dtype)`, PyTorch: `torch.empty((),
    dtype=, device=)` with a prebuilt torch.device) and the kernel writes it
    through a DeviceArray of its pointer (a tuple: the cheapest argument of the
    fast launcher), so no 1-d result is made and then reshaped (a reshape costs
    about 1 us in CuPy and PyTorch). The current stream is read with the
    library's raw reader (hostpath.library_stream), for the device the
    signature was made on (a one-GPU process)."""

    __slots__ = ("plan", "lib", "library", "stream", "scratch_dtype", "root", "device",
                 "epoch", "call", "fast")

    def __init__(self, plan, lib, library: _Library, x, out_dtype, scratch_dtype) -> None:
        self.plan, self.lib, self.library = plan, lib, library
        self.stream = library_stream(lib)
        self.root = lib.name
        self.device = -1 if lib.host else lib.device(x)
        self.scratch_dtype = scratch_dtype
        self.epoch = epoch()
        self.fast = [None, None, None]  # the launches' fast launchers (_Plan.run)
        self.call = self._host_call(out_dtype) if lib.host else self._device_call(out_dtype)

    def _host_call(self, dtype):
        native = self.library.native(dtype)
        vec, plan, conv = self.lib.vec, self.plan, self
        made = self.epoch

        def call(x):
            if made != epoch():
                return None
            flat = x if x.ndim == 1 else x.reshape(-1)
            n = vec(flat)
            if not 0 <= n < _WIDE:
                return None
            grid = plan.grid(n)
            out = np.empty((), native)
            outs = (out.reshape(1),)
            if conv.scratch_dtype is not None:
                outs = (conv._scratch(x, None),) + outs
            plan.run(None, flat, outs, n, (), grid, conv._views(x, None, grid) if grid else ())
            return out
        return call

    def _device_call(self, dtype):
        native = self.library.native(dtype)
        vec, plan, conv, device = self.lib.vec, self.plan, self, self.device
        made = self.epoch
        stream = self.stream
        fast = self.fast
        new = tuple.__new__
        arg = self.scratch_dtype is not None
        if self.root == "cupy":
            import cupy
            ndarray = cupy.ndarray

            def empty():
                out = ndarray((), native)
                return out, out.data.ptr
        else:
            import torch
            torch_empty, where = torch.empty, torch.device("cuda", device)
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:  # the device is known: no get_device() per call
                def stream(x, raw=raw, device=device) -> int:
                    return raw(device)

            def empty():
                out = torch_empty((), dtype=native, device=where)
                return out, out.data_ptr()

        def call(x):
            if made != epoch():
                return None
            flat = x if x.ndim == 1 else x.reshape(-1)
            n = vec(flat)
            if not 0 <= n < _WIDE:
                return None
            s = stream(x)
            grid = plan.grid(n)
            out, ptr = empty()
            # the 0-d result as the 1-element 1-d array the kernels write
            o = new(DeviceArray, (ptr, _ONE, _ONE, dtype, device, False))
            outs = (conv._scratch(x, s), o) if arg else (o,)
            plan.run(s, flat, outs, n, (), grid, conv._views(x, s, grid) if grid else (), fast)
            return out
        return call

    def __call__(self, x):
        """The result (0-d), or None to take the general path."""
        return self.call(x)

    def _views(self, x, stream, grid: int) -> tuple:
        needed, aliases = self.plan.layout(grid)
        key = (self.root, self.device, stream) if stream is not None else self.root
        buf, _, ptr = temp_entry(self.library, key, needed, x)
        if self.lib.host:
            return host_views(buf, aliases)
        return self.plan.device_views(ptr, grid, aliases, self.device)

    def _scratch(self, x, stream):
        key = (self.root, self.device, stream, self.scratch_dtype)
        buf = _scratch.get(key)
        if buf is None:
            buf = _scratch[key] = self.library.empty((1,), self.scratch_dtype, x)
        return buf


_convs: dict[tuple, _Conv] = {}
_SUM, _MIN, _MAX, _ARGMIN, _ARGMAX = range(5)
_METHODS = {_SUM: "sum", _MIN: "min", _MAX: "max", _ARGMIN: "arg_min", _ARGMAX: "arg_max"}


def _general(x: Any, tag: int, key: Optional[tuple]):
    """The general path of a convenience call; remembers its signature."""
    a = describe(x, "x")
    check_dtype(a, "x")
    dt = a.dtype
    arg = tag in (_ARGMIN, _ARGMAX)
    out_dtypes = (dt, D.int64) if arg else (_sum_dtype(dt) if tag == _SUM else dt,)
    outs, args = _call(x, getattr(DeviceReduce, _METHODS[tag]), out_dtypes)
    flat = args[0]
    lib = lib_of(flat)
    if key is not None and lib is not None and (lib.host or one_device()) and \
            lib.vec(flat) >= 0 and _library(x).native(out_dtypes[-1]) is not None:
        plan = signature_plan(_METHODS[tag], *args)
        if plan is not None:
            if len(_convs) >= 256:
                _convs.clear()
            _convs[key] = _Conv(plan, lib, _library(x), x, out_dtypes[-1],
                                dt if arg else None)
    return outs[-1]


def _reduce_whole(x: Any, tag: int):
    try:
        key = (tag, type(x), x.dtype)
        conv = _convs.get(key)
    except (AttributeError, TypeError):  # not an array: the general path says so
        return _general(x, tag, None)
    if conv is not None:
        out = conv.call(x)
        if out is not None:
            return out
    return _general(x, tag, key)


def sum(x):  # noqa: A001
    """The sum of all elements of x (a 0-d array of x's library)."""
    return _reduce_whole(x, _SUM)


def min(x):  # noqa: A001
    """The minimum of all elements of x (NaNs ignored, as CUB)."""
    return _reduce_whole(x, _MIN)


def max(x):  # noqa: A001
    """The maximum of all elements of x (NaNs ignored, as CUB)."""
    return _reduce_whole(x, _MAX)


def argmin(x):
    """The flat index (int64) of the first minimum of x."""
    return _reduce_whole(x, _ARGMIN)


def argmax(x):
    """The flat index (int64) of the first maximum of x."""
    return _reduce_whole(x, _ARGMAX)
