"""The convenience scan: `cumsum(x, exclusive=False)` returns an array of x's
library (NumPy, CuPy, PyTorch) holding the running sums of x flattened,
computed on the library's current stream with cached temporary storage (the
convenience layer's, convenience.py). Result dtypes follow NumPy/CuPy/
PyTorch's cumsum: integers narrower than 64 bits give int64 (uint64 for
unsigned) and accumulate in it, floats keep their dtype.

A repeated call with the same array type and dtype takes a cached path
(`_Cumsum`, on DeviceScan's cached signature): no size query through the
general path, no argument ingestion; the result's allocation, the current
stream, a look-up of the temporary buffer and the scan's launches."""
from __future__ import annotations

from typing import Any, Optional

from . import convenience as _c
from .arrays import describe
from .hostpath import NARROW, Lib, epoch, lib_of, library_stream, one_device
from .scan import running_sum, running_sum_signature
from .shared import check_dtype

__all__ = ["cumsum"]


class _Cumsum:
    """The cached path of one (exclusive, array type, dtype): `call(x)` gives
    the result, or None to take the general path. The result is made here (so
    it has x's size and shares no memory with it) by the library's cheapest
    allocator (convenience.allocator), and so is the temporary buffer (the
    convenience layer's, per library, device and current stream): of the
    signature's checks only the count's and the epoch's remain, and the
    launches run on its shape for the count (`_Sig.shape`)."""

    __slots__ = ("sig", "vec", "library", "empty", "stream", "root", "device")

    def __init__(self, sig: Any, lib: Lib, library: Any, x: Any, dtype: Any) -> None:
        self.sig, self.vec, self.library = sig, lib.vec, library
        self.empty = _c.allocator(lib, library, x, dtype)
        self.stream = library_stream(lib)
        self.root = lib.name
        self.device = -1 if lib.host else lib.device(x)

    def __call__(self, x: Any) -> Optional[Any]:
        flat = x if x.ndim == 1 else x.reshape(-1)
        n = self.vec(flat)
        sig = self.sig
        if not 0 <= n < NARROW or sig.epoch != epoch():
            return None
        shape = sig.shapes.get(n) or sig.shape(n, False)
        if shape is None:
            return None
        needed, run = shape
        out = self.empty((n,))
        if run is None:
            return out
        if self.stream is None:
            buf = _c.temp_entry(self.library, self.root, needed, x)[0]
            run.go(None, run.host_bound_of(buf), flat, None, out, sig.init)
            return out
        stream = self.stream(x)
        key = (self.root, self.device, stream)
        entry = _c._temp.get(key)
        if entry is None or entry[1] < needed:
            entry = _c.temp_entry(self.library, key, needed, x)
        ptr = entry[2]
        run.go(stream, run.bound.get(ptr) or run.bound_at(ptr, self.device), flat, None, out,
               sig.init)
        return out


_cumsums: dict[tuple, _Cumsum] = {}


def _general(x: Any, exclusive: bool, key: Optional[tuple]):
    """The general path: the two-phase calls with every argument checked;
    remembers the cached path of x's type and dtype."""
    library = _c._library(x)
    flat = library.flat(x)
    stream = library.stream(x)
    a = describe(flat, "x")
    check_dtype(a, "x")
    dtype = _c._sum_dtype(a.dtype)
    out = library.empty((a.size,), dtype, x)
    nbytes = running_sum(None, flat, out, a.size, stream, exclusive)
    running_sum(_c._temp_storage(library, x, stream, nbytes), flat, out, a.size, stream,
                exclusive)
    lib = lib_of(flat)
    if key is not None and lib is not None and (lib.host or one_device()):
        sig = running_sum_signature(flat, out, exclusive)
        if sig is not None:
            if len(_cumsums) >= 256:
                _cumsums.clear()
            _cumsums[key] = _Cumsum(sig, lib, library, x, dtype)
    return out


def cumsum(x: Any, exclusive: bool = False):
    """Inclusive (or exclusive: starting from 0) running sums of x's elements
    in flat order, as a 1-d array of x's library."""
    try:
        key = (bool(exclusive), type(x), x.dtype)
        fast = _cumsums.get(key)
    except (AttributeError, TypeError):  # not an array: the general path says so
        return _general(x, bool(exclusive), None)
    if fast is not None:
        out = fast(x)
        if out is not None:
            return out
    return _general(x, bool(exclusive), key)
