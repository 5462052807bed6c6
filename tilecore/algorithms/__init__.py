"""Device-scope algorithms in CUB's architecture (docs/algorithms.md).

- `DeviceReduce`: sum, min, max, arg_min, arg_max, reduce, transform_reduce,
  with CUB's two-phase temporary storage (`reduce.py`; kernels in
  `reduce_kernels.py`, operators and accumulator rules in `operators.py`,
  argument checks in `arrays.py`).
- `DeviceScan`: inclusive/exclusive sums and scans, with init, by key
  (`scan.py`; plans and launches in `scan_plan.py`; kernels in `scan_kernels.py`,
  their parts in `scan_tiles.py`, `scan_status.py`, `scan_lookback.py`,
  `scan_groups.py`, `scan_recompute.py`, `scan_twopass.py`).
- The convenience layer: `sum`, `min`, `max`, `argmin`, `argmax`
  (`convenience.py`), `cumsum` (`scan_convenience.py`).
- `DeviceSegmentedReduce`: sum, min, max, arg_min, arg_max, reduce over
  segments given by begin/end offsets (`segmented_reduce.py`; kernels in
  `segmented_kernels.py`), and its convenience form `segmented_sum`
  (`segmented_convenience.py`).

Policies come from `tilecore.dispatch`, tuning tables from `tilecore.tunings`.
"""
from .convenience import argmax, argmin, max, min, sum  # noqa: A004
from .reduce import DeviceReduce
from .segmented_convenience import segmented_sum
from .segmented_reduce import DeviceSegmentedReduce

__all__ = ["DeviceReduce", "sum", "min", "max", "argmin", "argmax"]
__all__ += ["DeviceSegmentedReduce", "segmented_sum"]
from .scan import DeviceScan  # noqa: E402
from .scan_convenience import cumsum  # noqa: E402

__all__ += ["DeviceScan", "cumsum"]
