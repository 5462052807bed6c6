"""The convenience form of DeviceSegmentedReduce: `segmented_sum(x, offsets)`
allocates its result (an array of x's library: NumPy, CuPy or PyTorch) and
reuses the convenience layer's cached temporary storage, on the library's
current stream (convenience.py).

Segment s is x.ravel()[offsets[s]:offsets[s + 1]], so the result has
len(offsets) - 1 elements; its dtype follows NumPy/CuPy/PyTorch as `sum` does
(integers narrower than 64 bits sum to int64, uint64 for unsigned; floats keep
their dtype). x may have any shape (contiguous); offsets are a 1-d int32 or
int64 array of the same library.
"""
from __future__ import annotations

from typing import Any

from .arrays import describe
from .convenience import _library, _sum_dtype, _temp_storage
from .segmented_reduce import DeviceSegmentedReduce

__all__ = ["segmented_sum"]


def segmented_sum(x: Any, offsets: Any):
    """The sums of x's segments offsets[s]:offsets[s + 1] (a 1-d array of
    len(offsets) - 1 elements, on x's library and stream)."""
    lib = _library(x)
    o = describe(offsets, "offsets")
    if o.ndim != 1 or o.size < 1:
        raise ValueError(f'Invalid argument "offsets": expected a 1-d array of at least 1 '
                         f"element (num_segments + 1), got shape "
                         f"{tuple(getattr(offsets, 'shape', ()))}")
    n = o.size - 1
    flat = lib.flat(x)
    stream = lib.stream(x)
    out = lib.empty((n,), _sum_dtype(describe(x, "x").dtype), x)
    begins, ends = offsets[:-1], offsets[1:]
    s = DeviceSegmentedReduce.sum
    nbytes = s(None, flat, out, n, begins, ends, stream)
    s(_temp_storage(lib, x, stream, nbytes), flat, out, n, begins, ends, stream)
    return out
