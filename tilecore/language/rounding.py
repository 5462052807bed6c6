"""Round-to-nearest-even into tfloat32 (10 mantissa bits in a float32 container)."""
from __future__ import annotations

import numpy as np

__all__ = ["round_tf32"]


def round_tf32(x):
    """`x` (float or float array) rounded RNE to tfloat32; NaN and inf are kept."""
    a = np.asarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) & 0xFFFFE000).astype(np.uint32)
    finite = np.isfinite(a)
    out = np.where(finite, rounded.view(np.float32), a)
    if np.ndim(x) == 0 and not isinstance(x, np.ndarray):
        return float(out)
    return out.astype(np.float32)
