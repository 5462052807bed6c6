"""Device-scope algorithms in CUB's architecture (docs/algorithms.md).

- `DeviceReduce`: sum, min, max, arg_min, arg_max, reduce, transform_reduce,
  with CUB's two-phase temporary storage (`reduce.py`; kernels in
  `reduce_kernels.py`, operators and accumulator rules in `operators.py`,
  argument checks in `arrays.py`).
- The convenience layer: `sum`, `min`, `max`, `argmin`, `argmax`
  (`convenience.py`).

Policies come from `tilecore.dispatch`, tuning tables from `tilecore.tunings`.
"""
from .convenience import argmax, argmin, max, min, sum  # noqa: A004
from .reduce import DeviceReduce

__all__ = ["DeviceReduce", "sum", "min", "max", "argmin", "argmax"]
