"""The temporary storage a tuned policy may ask for: issue 15 asks for no more
than CUB's for the same call at 2^27 items, and a faster candidate that needs
more (an 8-byte scan on 1024-item tiles) must not reach a table. Each call
CUB makes is measured once (cuda.compute from cuda-cccl 1.2.1, its
temp_storage query at 2^27 items, NVIDIA H200, benchmarks/RESULTS.md,
twenty-fifth session) and kept here by algorithm and input item size; a
candidate over its budget fails before it is compiled or timed. Algorithms
and item sizes without a measurement have no budget.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..algorithms.scan import inclusive_temp_bytes
from ..dispatch.target import Target
from .workloads import Workload

__all__ = ["BUDGET_ITEMS", "CUB_TEMP_BYTES", "temp_budget_problem"]

BUDGET_ITEMS = 1 << 27
# CUB's temporary storage in bytes at BUDGET_ITEMS items, by algorithm and item size
CUB_TEMP_BYTES: dict[str, dict[int, int]] = {"scan": {2: 140543, 4: 350463, 8: 799999}}


def _scan_bytes(workload: Workload, target: Target) -> int:
    # the tuned calls (exclusive_sum, inclusive_scan) ask for what inclusive_scan does
    return inclusive_temp_bytes(target, workload.in_dtype, workload.op, BUDGET_ITEMS)[0]


# each budgeted algorithm's size query at BUDGET_ITEMS items under the policy in force
_SIZE_QUERIES: dict[str, Callable[[Workload, Target], int]] = {"scan": _scan_bytes}


def temp_budget_problem(workload: Workload, target: Target) -> Optional[str]:
    """None when the policy in force (call inside override_policy) asks for no
    more temporary storage at BUDGET_ITEMS items than CUB, else what it asks."""
    budget = CUB_TEMP_BYTES.get(workload.algorithm, {}).get(workload.in_dtype.itemsize)
    if budget is None:
        return None
    nbytes = _SIZE_QUERIES[workload.algorithm](workload, target)
    if nbytes <= budget:
        return None
    return (f"temporary storage: {nbytes} bytes at 2^27 items, more than CUB's {budget} "
            f"for the same call (tilecore/tune/temp_budget.py)")
