"""The convenience form of DeviceSegmentedReduce: `segmented_sum(x, offsets)`
allocates its result (an array of x's library: NumPy, CuPy or PyTorch) and
reuses the convenience layer's cached temporary storage, on the library's
current stream (convenience.py).

Segment s is x.ravel()[offsets[s]:offsets[s + 1]], so the result has
len(offsets) - 1 elements; its dtype follows NumPy/CuPy/PyTorch as `sum` does
(integers narrower than 64 bits sum to int64, uint64 for unsigned; floats keep
their dtype). x may have any shape (contiguous); offsets are a 1-d int32 or
int64 array of the same library.

A repeated call with the same array types and dtypes takes a cached path
(`_SegmentedSum`, on DeviceSegmentedReduce.sum's cached signature): no size
query through the general path, no argument ingestion; the result's
allocation, the offsets' two views, the current stream, a look-up of the
temporary buffer when the launches need one, and the launches.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..runtime import DeviceArray
from . import convenience as _c
from .arrays import describe
from .hostpath import NARROW, Lib, epoch, lib_of, library_stream, one_device
from .segmented_reduce import DeviceSegmentedReduce, sum_signature
from .shared import check_dtype

__all__ = ["segmented_sum"]


def _host_halves(offsets: Any, n: int) -> tuple[Any, Any]:
    return offsets[:-1], offsets[1:]


def _halves(lib: Lib, dtype: Any, device: int) -> Callable[[Any, int], tuple[Any, Any]]:
    """(offsets, n) -> (offsets[:-1], offsets[1:]) as the kernels take them, for
    1-d offsets of n + 1 elements of library `lib` and tilecore dtype `dtype`
    on `device`: NumPy slices on the host; on the GPU two DeviceArrays at the
    offsets' pointer (a CuPy or PyTorch slice costs about 1 us, a DeviceArray
    a tuple)."""
    if lib.host:
        return _host_halves
    item = dtype.itemsize
    new = tuple.__new__

    def views(ptr: int, step: int, n: int) -> tuple[Any, Any]:
        return (new(DeviceArray, (ptr, (n,), (step,), dtype, device, False)),
                new(DeviceArray, (ptr + step * item, (n,), (step,), dtype, device, False)))
    if lib.name == "cupy":
        def cupy_halves(o: Any, n: int) -> tuple[Any, Any]:
            return views(o.data.ptr, o.strides[0] // item, n)
        return cupy_halves

    def torch_halves(o: Any, n: int) -> tuple[Any, Any]:
        return views(o.data_ptr(), o.stride(0), n)
    return torch_halves


class _SegmentedSum:
    """The cached path of one (array type, dtype, offsets type, offsets dtype):
    called with (x, offsets), it gives the result, or None to take the general
    path. The result is made here (n elements, sharing no memory with x) by the
    library's cheapest allocator, the begins and ends are the offsets' two
    views and the temporary buffer is the convenience layer's: of the
    signature's checks only the sizes', the count's and the epoch's remain
    (the device too is known: one GPU), and the launches are the plan's for
    the count and x's size, kept here (`runs`): on the GPU their arguments
    are of other kinds than the two-phase calls' (DeviceArrays for the
    offsets), so they keep their own fast launchers."""

    __slots__ = ("sig", "vec", "offsets_vec", "halves", "library", "empty", "stream", "root",
                 "device", "runs")

    def __init__(self, sig: Any, lib: Lib, library: Any, x: Any, dtype: Any, offsets_lib: Lib,
                 halves: Callable) -> None:
        self.sig, self.vec, self.offsets_vec, self.halves = sig, lib.vec, offsets_lib.vec, halves
        self.library = library
        self.empty = _c.allocator(lib, library, x, dtype)
        self.stream = library_stream(lib)
        self.root = lib.name
        self.device = -1 if lib.host else lib.device(x)
        self.runs: dict = {}

    def __call__(self, x: Any, offsets: Any) -> Optional[Any]:
        flat = x if x.ndim == 1 else x.reshape(-1)
        m = self.vec(flat)
        n = self.offsets_vec(offsets) - 1
        sig = self.sig
        if m < 0 or not 0 <= n < NARROW or sig.epoch != epoch():
            return None
        run = self.runs.get((n, m)) or sig.plan.launches(n, m, self.runs)
        if run.convert:
            return None
        out = self.empty((n,))
        if not n:
            return out
        begins, ends = self.halves(offsets, n)
        partials = None
        if self.stream is None:
            if run.aliases:
                buf = _c.temp_entry(self.library, self.root, run.needed, x)[0]
                partials = run.host_partials(buf)
            run.go(None, flat, begins, ends, (out,), n, sig.init, partials)
            return out
        stream = self.stream(x)
        if run.aliases:
            ptr = _c.temp_entry(self.library, (self.root, self.device, stream), run.needed, x)[2]
            partials = run.device_partials(ptr, self.device)
        run.go(stream, flat, begins, ends, (out,), n, sig.init, partials)
        return out


_sums: dict[tuple, _SegmentedSum] = {}


def _general(x: Any, offsets: Any, key: Optional[tuple]):
    """The general path: the two-phase calls with every argument checked;
    remembers the cached path of these types and dtypes."""
    library = _c._library(x)
    o = describe(offsets, "offsets")
    if o.ndim != 1 or o.size < 1:
        raise ValueError(f'Invalid argument "offsets": expected a 1-d array of at least 1 '
                         f"element (num_segments + 1), got shape "
                         f"{tuple(getattr(offsets, 'shape', ()))}")
    n = o.size - 1
    flat = library.flat(x)
    stream = library.stream(x)
    a = describe(x, "x")
    check_dtype(a, "x")
    dtype = _c._sum_dtype(a.dtype)
    out = library.empty((n,), dtype, x)
    begins, ends = offsets[:-1], offsets[1:]
    s = DeviceSegmentedReduce.sum
    nbytes = s(None, flat, out, n, begins, ends, stream)
    s(_c._temp_storage(library, x, stream, nbytes), flat, out, n, begins, ends, stream)
    if key is not None:
        _remember(key, library, x, flat, out, dtype, o, begins, ends)
    return out


def _remember(key: tuple, library: Any, x: Any, flat: Any, out: Any, dtype: Any, o: Any,
              begins: Any, ends: Any) -> None:
    """Keep the cached path of a general-path call that succeeded (`o`: the
    offsets described), when its arrays have accessors and live on the host
    or the one GPU, and the sum signature was cached."""
    lib, offsets_lib = lib_of(flat), lib_of(o.obj)
    if lib is None or offsets_lib is None or not (lib.host or one_device()) or \
            library.native(dtype) is None:
        return
    sig = sum_signature(flat, out, begins, ends)
    if sig is not None:
        if len(_sums) >= 256:
            _sums.clear()
        halves = _halves(offsets_lib, o.dtype, o.device_id)
        _sums[key] = _SegmentedSum(sig, lib, library, x, dtype, offsets_lib, halves)


def segmented_sum(x: Any, offsets: Any):
    """The sums of x's segments offsets[s]:offsets[s + 1] (a 1-d array of
    len(offsets) - 1 elements, on x's library and stream)."""
    try:
        key = (type(x), x.dtype, type(offsets), offsets.dtype)
        fast = _sums.get(key)
    except (AttributeError, TypeError):  # not arrays: the general path says so
        return _general(x, offsets, None)
    if fast is not None:
        out = fast(x, offsets)
        if out is not None:
            return out
    return _general(x, offsets, key)
