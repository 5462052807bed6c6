"""The interpreter's fast path around `language.rounding.cast`: the rules run
once per op per block, so its per-call cost matters.

`to_storage` is `cast` for a result the rule has just computed: where `cast`
would only copy it unchanged (it already is in the storage dtype of a bool,
integer, float32 or float64 result), it returns the array itself; tiles are never written, so the copy is needless.
Every other dtype (the narrow floats, tfloat32 in its float32 container) goes
through `cast`, which rounds it.
"""
from __future__ import annotations

import numpy as np

from ..language.dtypes import ALL_DTYPES, DType
from ..language.rounding import cast

__all__ = ["to_storage"]


def _cast_is_a_copy(dtype: DType) -> bool:
    """True when `cast(x, dtype)` of an `x` already in dtype's storage dtype
    returns an equal copy of it: bool (x != 0), integers, float32 and float64
    (astype to the same dtype). Not tfloat32, which rounds its container."""
    npd = dtype.numpy_dtype
    return dtype.name != "tfloat32" and (npd.kind in "biu" or npd in (np.float32, np.float64))


_AS_STORED = frozenset(d for d in ALL_DTYPES if _cast_is_a_copy(d))


def to_storage(x: np.ndarray, dtype: DType) -> np.ndarray:
    """`cast(x, dtype)` for a freshly computed `x` (an array or NumPy scalar):
    `x` as an array, not copied, when the cast would only copy it."""
    x = np.asarray(x)
    if dtype in _AS_STORED and x.dtype == dtype.numpy_dtype:
        return x
    return cast(x, dtype)
