"""The convenience scan: `cumsum(x, exclusive=False)` returns an array of x's
library (NumPy, CuPy, PyTorch) holding the running sums of x flattened,
computed on the library's current stream with cached temporary storage (the
convenience layer's, convenience.py). Result dtypes follow NumPy/CuPy/
PyTorch's cumsum: integers narrower than 64 bits give int64 (uint64 for
unsigned) and accumulate in it, floats keep their dtype."""
from __future__ import annotations

from typing import Any

from . import convenience as _c
from .arrays import describe
from .scan import _scan

__all__ = ["cumsum"]


def cumsum(x: Any, exclusive: bool = False):
    """Inclusive (or exclusive: starting from 0) running sums of x's elements
    in flat order, as a 1-d array of x's library."""
    lib = _c._library(x)
    flat = lib.flat(x)
    stream = lib.stream(x)
    a = describe(flat, "x")
    out = lib.empty((a.size,), _c._sum_dtype(a.dtype), x)

    def call(temp):
        return _scan(temp, None, flat, out, "add", 0 if exclusive else None, a.size, stream,
                     rule="out", exclusive=exclusive, has_init=exclusive)
    call(_c._temp_storage(lib, x, stream, call(None)))
    return out
