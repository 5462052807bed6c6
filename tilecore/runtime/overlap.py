"""Whether an array's elements overlap one another: a view in which distinct
indices reach the same bytes (a stride of 0 as `np.broadcast_to` or torch's
`expand` make, or any `as_strided` view that folds onto itself). A kernel may
read such an array; in one it writes, blocks would race for the shared bytes.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["self_overlaps"]

_EXACT_LIMIT = 1 << 22  # elements whose addresses are enumerated when the quick rule fails


def self_overlaps(shape: Sequence[int], byte_strides: Sequence[int], itemsize: int, *,
                  exact: bool = True) -> bool:
    """True unless every element of the view occupies bytes of its own.

    Quick rule: with the axes sorted by |stride|, each stride clears everything
    the smaller axes span (row-major, column-major, slices, transposes). When it
    does not (interleaved layouts, or real overlap), the element addresses are
    enumerated (unless `exact` is False: then such a view counts as overlapping);
    a view too large for that counts as overlapping, since its elements cannot
    be shown distinct cheaply."""
    if any(n == 0 for n in shape):
        return False
    reach = itemsize
    for stride, n in sorted((abs(s), n) for n, s in zip(shape, byte_strides) if n > 1):
        if stride < reach:
            break
        reach += (n - 1) * stride
    else:
        return False
    if not exact or math.prod(shape) > _EXACT_LIMIT:
        return True
    offsets = np.zeros(1, np.int64)
    for n, s in zip(shape, byte_strides):
        if n > 1:
            offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    offsets.sort()
    return bool(np.any(np.diff(offsets) < itemsize))
