"""Array arguments of the device-scope algorithms: what each one is (host
NumPy array for the interpreter, or a GPU array), its dtype and size, checked
with errors that name the argument, the expectation and what was given.

A call's arrays are all host arrays (the call runs in the interpreter) or all
device arrays (it runs on their GPU); mixing them is a TypeError.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..language import dtypes as D
from ..language.dtypes import DType
from ..runtime import DeviceArray, array_fields, classify_arg

__all__ = ["Arg", "describe", "same_side", "check_num_items", "as_1d_output", "address",
           "byte_span", "span", "check_count_output"]

_kind_by_type: dict[type, str] = {}
_numpy_dtypes: dict = {}


class Arg(NamedTuple):
    obj: Any            # what the kernels get (the caller's array, or a 1-d view of it)
    host: bool
    dtype: DType
    size: int
    ndim: int
    device_id: int
    fields: tuple       # device arrays: (ptr, shape, strides, dtype, device[, readonly])


def _kind(obj: Any) -> str:
    cls = type(obj)
    k = _kind_by_type.get(cls)
    if k is None:
        if isinstance(obj, np.ndarray):
            k = "host"
        elif isinstance(obj, DeviceArray):
            k = "device"    # tilecore's own view (a NamedTuple: before the tuple test)
        elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, list, tuple,
                                             dict, np.generic)):
            k = "other"
        else:
            k = classify_arg(obj)
            if k == "host" and not isinstance(obj, np.ndarray):
                k = "host-other"  # a CPU tensor: refused below, not cached as NumPy
            if k == "device":
                _kind_by_type[cls] = k
            return k
        _kind_by_type[cls] = k
    return k


def describe(obj: Any, name: str) -> Arg:
    k = _kind(obj)
    if k == "host":
        dtype = _numpy_dtypes.get(obj.dtype)
        if dtype is None:
            try:
                dtype = _numpy_dtypes[obj.dtype] = D.from_numpy(obj.dtype)
            except TypeError:
                raise TypeError(f'Invalid argument "{name}": dtype {obj.dtype} is not '
                                f"supported") from None
        return Arg(obj, True, dtype, obj.size, obj.ndim, -1, ())
    if k == "device":
        fields = array_fields(obj, name)
        shape = fields[1]
        return Arg(obj, False, fields[3], math.prod(shape), len(shape), fields[4], fields)
    if k == "host-other":
        raise TypeError(f'Invalid argument "{name}": {type(obj).__name__} in host memory; pass '
                        f"a NumPy array (the interpreter) or a GPU array")
    raise TypeError(f'Invalid argument "{name}": expected an array (a NumPy array, or a GPU '
                    f"array such as a CuPy array or a PyTorch CUDA tensor), got "
                    f"{'None' if obj is None else type(obj).__name__}")


def same_side(args: list[tuple[str, Arg]]) -> bool:
    """True when every array is a host array; TypeError naming a host and a
    device argument when they are mixed, ValueError for two devices."""
    host = [n for n, a in args if a.host]
    dev = [(n, a) for n, a in args if not a.host]
    if host and dev:
        raise TypeError(f'Arguments "{host[0]}" (a host NumPy array) and "{dev[0][0]}" (a GPU '
                        f"array) are on different sides; pass all arrays on the GPU, or all as "
                        f"NumPy arrays for the interpreter")
    devices = {a.device_id for _, a in dev if a.device_id >= 0}
    if len(devices) > 1:
        names = [n for n, a in dev]
        raise ValueError(f"Arguments {names} are on different GPUs ({sorted(devices)}); pass "
                         f"arrays of one device")
    return bool(host)


def address(a: Arg) -> tuple[int, int]:
    """(address of a's first element, the element stride in bytes; 0 for a 0-d
    array)."""
    if a.host:
        o = a.obj
        return o.__array_interface__["data"][0], (o.strides[0] if o.ndim else 0)
    return a.fields[0], (a.fields[2][0] * a.dtype.itemsize if a.fields[2] else 0)


def span(ptr: int, count: int, stride: int, item: int) -> tuple[int, int]:
    """(first byte address, one past the last byte) of `count` > 0 elements of
    `item` bytes from address `ptr`, `stride` bytes apart."""
    last = ptr + (count - 1) * stride
    return (ptr, last + item) if stride >= 0 else (last, ptr + item)


def byte_span(a: Arg, count: int) -> tuple[int, int, int]:
    """(first byte address, one past the last byte, element stride in bytes)
    of a's first `count` elements (count > 0): what overlap checks compare."""
    ptr, stride = address(a)
    return (*span(ptr, count, stride, a.dtype.itemsize), stride)


def check_num_items(num_items: Any, d_in: Arg, name: str = "num_items",
                    array: str = "d_in") -> int:
    if isinstance(num_items, (bool, np.bool_)) or not isinstance(num_items, (int, np.integer)):
        raise TypeError(f'Invalid argument "{name}": expected an int, got '
                        f"{type(num_items).__name__}")
    n = int(num_items)
    if n < 0:
        raise ValueError(f'Invalid argument "{name}": expected a count >= 0, got {n}')
    if n > d_in.size:
        raise ValueError(f'Invalid argument "{name}": {n} items is more than "{array}" holds '
                         f"({d_in.size} elements)")
    return n


def check_count_output(a: Arg, name: str, largest: int, what: str) -> None:
    """An output of indices or counts (arg_min's index, reduce_by_key's number of
    runs): an integer dtype of 32 or 64 bits (CUB writes its offset type; a
    narrower one would wrap silently for the counts a cached call may take, up
    to 2**31 - 1) that holds `largest`, the most the call can write."""
    dt = a.dtype
    if not dt.is_integer or dt.itemsize < 4:
        raise TypeError(f'Invalid argument "{name}": expected a 32- or 64-bit integer dtype '
                        f"(int64, as CUB writes), got {dt.name}")
    if largest > dt.max:
        raise ValueError(f'Invalid argument "{name}": {dt.name} cannot hold {what} '
                         f"({largest}); use int64")


def check_1d(a: Arg, name: str) -> None:
    if a.ndim != 1:
        raise ValueError(f'Invalid argument "{name}": expected a 1-d array, got {a.ndim} '
                         f"dimensions")


def as_1d_output(a: Arg, name: str) -> Arg:
    """An output of at least one element: 1-d, or a 0-d array viewed as 1-d."""
    if a.size < 1:
        raise ValueError(f'Invalid argument "{name}": expected an array of at least 1 element, '
                         f"got an empty one")
    if a.ndim == 1:
        return a
    if a.ndim == 0 and hasattr(a.obj, "reshape"):
        view = a.obj.reshape(1)
        return describe(view, name)
    raise ValueError(f'Invalid argument "{name}": expected a 1-d array (or 0-d), got '
                     f"{a.ndim} dimensions")
