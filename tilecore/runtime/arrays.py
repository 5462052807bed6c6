"""Ingest array arguments that live on the GPU.

`as_device_array(obj, name)` turns CuPy arrays, PyTorch tensors, Numba arrays
and any object with `__cuda_array_interface__` (v2/v3) or DLPack into a
`DeviceArray`: pointer, shape, strides in elements, tilecore dtype, device.
Each Python type is inspected once and gets an extractor cached in a dict, so
the launch hot path is one dict lookup plus a few attribute reads. Host memory
(NumPy arrays, CPU tensors) is refused with an error naming the argument.

The producer's stream is not synchronized with (CAI "stream" and the DLPack
stream argument are treated as stream_ptr=-1, as cuda.core allows): tilecore
launches on the stream the caller names, and ordering is the caller's job.
"""
from __future__ import annotations

import math

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from ..errors import TileTypeError, TileValueError
from ..language import dtypes as dt
from ..language.dtypes import DType
from .overlap import self_overlaps

__all__ = ["DeviceArray", "as_device_array", "array_fields", "classify_arg", "check_same_device",
           "check_no_overlap", "check_written_arrays", "check_writable", "overlap_message",
           "memory_extent"]


class DeviceArray(NamedTuple):
    """A strided array in GPU memory; strides count elements, not bytes.
    `device_id` is -1 when unknown (an empty array with a null pointer)."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: DType
    device_id: int
    readonly: bool = False  # the producer marks it read-only (CAI or DLPack flag)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def size(self) -> int:
        return math.prod(self.shape)


Extractor = Callable[[Any, str], DeviceArray]

_HOST_HINT = ("kernel arrays must be in GPU memory (e.g. CuPy arrays or PyTorch CUDA tensors); "
              "to run on the CPU, pass NumPy arrays for all array arguments "
              "(the interpreter) or set TILECORE_INTERPRET=1")


def _host_error(name: str, what: str) -> TileTypeError:
    return TileTypeError(f'Invalid argument "{name}": {what} is in host memory; {_HOST_HINT}')


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


def _elem_strides(name: str, byte_strides, itemsize: int) -> tuple[int, ...]:
    out = []
    for s in byte_strides:
        q, r = divmod(int(s), itemsize)
        if r:
            raise TileValueError(f'Invalid argument "{name}": strides {tuple(byte_strides)} '
                                 f"(bytes) are not multiples of the item size {itemsize}")
        out.append(q)
    return tuple(out)


# ---- dtypes -------------------------------------------------------------------

_numpy_dtypes: dict[Any, DType] = {}


def _from_numpy(name: str, npd) -> DType:
    d = _numpy_dtypes.get(npd)
    if d is None:
        npd = np.dtype(npd)
        if npd.byteorder == ">":
            raise TileTypeError(f'Invalid argument "{name}": big-endian dtype {npd.str!r} '
                                f"is not supported")
        try:
            d = dt.from_numpy(npd)
        except TypeError:
            if npd.kind == "V":  # a typestr like '<V2', not an ml_dtypes dtype
                raise TileTypeError(
                    f'Invalid argument "{name}": dtype {npd.str!r} is an opaque '
                    f"{npd.itemsize}-byte type (bfloat16 is exported this way and cannot be "
                    f"told apart); pass the array through DLPack instead") from None
            raise TileTypeError(f'Invalid argument "{name}": dtype {npd} has no tilecore '
                                f"equivalent") from None
        _numpy_dtypes[npd] = d
    return d


_TORCH_DTYPES = {f"torch.{d.name.rstrip('_')}": d for d in dt.ALL_DTYPES
                 if d is not dt.tfloat32 and d is not dt.float4_e2m1fn}
_torch_dtypes: dict[Any, DType] = {}


def _from_torch(name: str, tdtype) -> DType:
    d = _torch_dtypes.get(tdtype)
    if d is None:
        d = _TORCH_DTYPES.get(str(tdtype))
        if d is None:
            raise TileTypeError(f'Invalid argument "{name}": dtype {tdtype} has no tilecore '
                                f"equivalent")
        _torch_dtypes[tdtype] = d
    return d


# ---- extractors (one per kind of producer) ------------------------------------

def _extract_numpy(obj, name: str) -> DeviceArray:
    raise _host_error(name, "a NumPy array")


def _extract_torch(obj, name: str) -> DeviceArray:
    if not obj.is_cuda:
        raise _host_error(name, f"a PyTorch tensor on device '{obj.device}'")
    return DeviceArray(obj.data_ptr(), tuple(obj.shape), tuple(obj.stride()),
                       _from_torch(name, obj.dtype), obj.device.index)


def _extract_cupy(obj, name: str) -> DeviceArray:
    dtype = _from_numpy(name, obj.dtype)
    return DeviceArray(obj.data.ptr, obj.shape, _elem_strides(name, obj.strides, dtype.itemsize),
                       dtype, obj.device.id)


def _pointer_device(ptr: int) -> int:
    """Ordinal of the device that owns a device pointer (asks the driver)."""
    from .driver import check, driver
    return check(driver().pointer_device(ptr))


def _extract_cai(obj, name: str) -> DeviceArray:
    cai = obj.__cuda_array_interface__
    if cai.get("mask") is not None:
        raise TileTypeError(f'Invalid argument "{name}": masked arrays '
                            f"(__cuda_array_interface__ with a mask) are not supported")
    dtype = _from_numpy(name, cai["typestr"])
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    strides = _c_strides(shape) if strides is None else _elem_strides(name, strides,
                                                                      dtype.itemsize)
    ptr = int(cai["data"][0])
    device = _pointer_device(ptr) if ptr else -1
    return DeviceArray(ptr, shape, strides, dtype, device, bool(cai["data"][1]))


def _extract_dlpack(obj, name: str) -> DeviceArray:
    from cuda.core.utils import StridedMemoryView
    view = StridedMemoryView.from_dlpack(obj, stream_ptr=-1)
    if not view.is_device_accessible:
        raise _host_error(name, f"a DLPack tensor of type {type(obj).__name__} on the CPU")
    shape = tuple(view.shape)
    strides = view.strides
    return DeviceArray(view.ptr, shape, _c_strides(shape) if strides is None else tuple(strides),
                       _from_numpy(name, view.dtype), view.device_id, bool(view.readonly))


def _not_an_array(obj, name: str) -> DeviceArray:
    raise TileTypeError(f'Invalid argument "{name}": expected a GPU array (an object with '
                        f"__cuda_array_interface__ or __dlpack__, e.g. a CuPy array or a "
                        f"PyTorch CUDA tensor), got {type(obj).__name__}")


def _in_mro(cls: type, module_prefix: str, name: str) -> bool:
    return any(c.__name__ == name and c.__module__.split(".")[0] == module_prefix
               for c in cls.__mro__)


def _extract_described(obj: "DeviceArray", name: str) -> "DeviceArray":
    """A DeviceArray passed as an argument already describes itself (any dtype,
    including those no array library can label, such as float4_e2m1fn)."""
    return obj


def _resolve(cls: type, obj: Any) -> Extractor:
    """The extractor for objects of `cls`, judged on one instance `obj` (the
    protocols may be instance attributes); every instance then shares it."""
    if issubclass(cls, np.ndarray):
        return _extract_numpy
    if issubclass(cls, DeviceArray):
        return _extract_described
    if _in_mro(cls, "torch", "Tensor"):
        return _extract_torch
    if _in_mro(cls, "cupy", "ndarray"):
        return _extract_cupy
    if hasattr(obj, "__cuda_array_interface__"):
        return _extract_cai
    if hasattr(obj, "__dlpack__"):
        return _extract_dlpack
    return _not_an_array


_extractors: dict[type, Extractor] = {}


def as_device_array(obj: Any, name: str) -> DeviceArray:
    """The `DeviceArray` view of a GPU array argument called `name`.

    Raises TileTypeError for host memory, non-arrays and unsupported dtypes,
    TileValueError for strides that are not whole elements."""
    cls = type(obj)
    f = _extractors.get(cls)
    if f is None:
        f = _extractors[cls] = _resolve(cls, obj)
    return f(obj, name)


# ---- the launch hot path: fields without building a DeviceArray ----------------

Fields = tuple  # (ptr, shape, strides, dtype, device_id[, readonly]), the DeviceArray field order


def _fields_torch(obj, name: str) -> Fields:
    device = obj.get_device()
    if device < 0:
        return _extract_torch(obj, name)  # raises the host-memory error
    dtype = _torch_dtypes.get(obj.dtype) or _from_torch(name, obj.dtype)
    return obj.data_ptr(), obj.shape, obj.stride(), dtype, device


_fast_fields: dict[type, Callable[[Any, str], Fields]] = {}


def array_fields(obj: Any, name: str) -> Fields:
    """`as_device_array(obj, name)` as a plain tuple, with a faster path for
    PyTorch tensors (the launch path reads these on every call)."""
    f = _fast_fields.get(type(obj))
    if f is None:
        cls = type(obj)
        f = _fields_torch if _in_mro(cls, "torch", "Tensor") else as_device_array
        _fast_fields[cls] = f
    return f(obj, name)


# ---- classification -------------------------------------------------------------

_SCALAR_TYPES = (bool, int, float, np.generic)  # ml_dtypes scalars are np.generic too
_DLPACK_CPU = 1  # DLDeviceType kDLCPU


def classify_arg(obj: Any) -> str:
    """What a kernel argument is: "device" (a GPU array), "host" (a NumPy
    array or another CPU array), "scalar" (a Python or NumPy number or bool)
    or "other". Used to route a launch to the GPU or the interpreter."""
    if isinstance(obj, _SCALAR_TYPES):
        return "scalar"
    cls = type(obj)
    f = _extractors.get(cls)
    if f is None:
        f = _extractors[cls] = _resolve(cls, obj)
    if f is _extract_numpy:
        return "host"
    if f is _extract_torch:
        return "device" if obj.is_cuda else "host"
    if f is _extract_dlpack:
        return "device" if obj.__dlpack_device__()[0] != _DLPACK_CPU else "host"
    if f is _not_an_array:
        return "other"
    return "device"


# ---- checks across arguments ------------------------------------------------------

def check_same_device(arrays: list[tuple[str, DeviceArray]]) -> int:
    """The device all arrays live on (-1 when none is known); TileValueError
    naming two arguments when they are on different devices."""
    device, first = -1, ""
    for name, a in arrays:
        if a.device_id < 0:
            continue
        if device < 0:
            device, first = a.device_id, name
        elif a.device_id != device:
            raise TileValueError(f'Arguments "{first}" and "{name}" are on different devices '
                                 f"(cuda:{device} and cuda:{a.device_id}); all arrays of a "
                                 f"launch must be on the same GPU")
    return device


def memory_extent(a: DeviceArray) -> tuple[int, int]:
    """Half-open byte range [lo, hi) spanned by the elements of `a`
    (empty range at ptr for an empty array)."""
    if a.size == 0:
        return a.ptr, a.ptr
    lo = hi = 0
    for s, st in zip(a.shape, a.strides):
        span = (s - 1) * st
        if span < 0:
            lo += span
        else:
            hi += span
    item = a.dtype.itemsize
    return a.ptr + lo * item, a.ptr + (hi + 1) * item


def _interleaved(a: DeviceArray, b: DeviceArray) -> bool:
    """True when `a` and `b` provably share no byte although their extents
    intersect: either every element address of each is fixed modulo g, the
    gcd of all their byte strides, and the two residues keep whole elements
    apart (x[0::2] and x[1::2]); or both are made of rows that repeat at one
    outer stride, and the rows of one fall between the rows of the other
    (m[0::2, :] and m[1::2, :])."""
    g = 0
    for arr in (a, b):
        for extent, stride in zip(arr.shape, arr.strides):
            if extent > 1:
                g = math.gcd(g, abs(stride) * arr.itemsize)
    if g == 0:
        return False
    r = (b.ptr - a.ptr) % g
    if r >= a.itemsize and g - r >= b.itemsize:
        return True
    return _rows_interleave(a, b)


def _row_span(arr: DeviceArray, outer: int) -> Optional[int]:
    """Bytes one row spans when `arr` repeats every `outer` bytes along its
    outermost-strided axis (None if its layout is not rows of that pitch)."""
    dims = [(abs(st) * arr.itemsize, n) for n, st in zip(arr.shape, arr.strides) if n > 1]
    if not dims:
        return arr.itemsize
    pitch = max(d for d, _ in dims)
    if pitch != outer or any(st < 0 for st in arr.strides):
        return None
    span = arr.itemsize + sum((n - 1) * d for d, n in dims if d != pitch)
    return span if span <= pitch and sum(1 for d, _ in dims if d == pitch) == 1 else None


def _rows_interleave(a: DeviceArray, b: DeviceArray) -> bool:
    """Rows of one pitch P: a's bytes lie in [pa, pa + span_a) modulo P, b's in
    [pb, pb + span_b); disjoint circular intervals mean no shared byte."""
    pitches = [abs(st) * arr.itemsize for arr in (a, b)
               for n, st in zip(arr.shape, arr.strides) if n > 1]
    if not pitches:
        return False
    pitch = max(pitches)
    span_a, span_b = _row_span(a, pitch), _row_span(b, pitch)
    if span_a is None or span_b is None:
        return False
    offset = (b.ptr - a.ptr) % pitch          # where b's rows start within a's row period
    return offset >= span_a and pitch - offset >= span_b


def overlap_message(name_a: str, name_b: str, writer: str, detail: str = "") -> str:
    """The error text for two overlapping arguments, one of which (`writer`)
    the kernel writes."""
    return (f'Kernel arguments "{name_a}" and "{name_b}" overlap in memory{detail}, and the '
            f'kernel writes "{writer}"; an array the kernel writes must share no memory with '
            f"another argument")


def check_writable(name: str, readonly: bool, shape: tuple, byte_strides: tuple,
                   itemsize: int) -> None:
    """ValueError unless the array `name`, which the kernel writes, is writable
    and its elements are distinct (no stride-0 or folded view)."""
    if readonly:
        raise ValueError(f'Invalid kernel argument "{name}": the array is read-only, but the '
                         f"kernel writes it; pass a writable array")
    if self_overlaps(shape, byte_strides, itemsize):
        strides = tuple(s // itemsize if s % itemsize == 0 else s / itemsize
                        for s in byte_strides)
        raise ValueError(f'Invalid kernel argument "{name}": its elements overlap one another '
                         f"(shape {tuple(shape)}, strides {strides} in elements), but the "
                         f"kernel writes it, so blocks would race for the shared elements; "
                         f"pass an array whose elements are distinct (e.g. a copy)")


def check_no_overlap(arrays: list[tuple[str, DeviceArray]],
                     written: Optional[frozenset[str]] = None) -> None:
    """TileValueError naming two arguments whose memory extents intersect, one
    of which the kernel writes (any two when `written` is None). Empty arrays
    never overlap; neither do views whose elements interleave without sharing
    bytes (x[0::2] and x[1::2]), see `_interleaved`."""
    spans = sorted((memory_extent(a) + (name, a) for name, a in arrays if a.size),
                   key=lambda t: t[0])
    for i, (lo_a, hi_a, name_a, a) in enumerate(spans):
        for lo_b, hi_b, name_b, b in spans[i + 1:]:
            if lo_b >= hi_a:
                break
            if written is not None and name_a not in written and name_b not in written:
                continue
            if not _interleaved(a, b):
                detail = f" (bytes [{lo_a:#x}, {hi_a:#x}) and [{lo_b:#x}, {hi_b:#x}))"
                if written is None:
                    raise TileValueError(f'Arguments "{name_a}" and "{name_b}" overlap in '
                                         f"memory{detail}")
                raise TileValueError(overlap_message(name_a, name_b, name_a if name_a in
                                                     written else name_b, detail))


def check_written_arrays(arrays: list[tuple[str, DeviceArray]], written: frozenset[str]) -> None:
    """`check_writable` for each device array the kernel writes."""
    for name, a in arrays:
        if name in written:
            item = a.dtype.itemsize
            check_writable(name, a.readonly, a.shape, tuple(s * item for s in a.strides), item)
