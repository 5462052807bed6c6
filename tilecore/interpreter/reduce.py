"""Rules for reductions: reduce (sum/prod/max/min) and argreduce (argmax/argmin).

Narrow floats accumulate in float32 and round the result once; integer sums
and products wrap in the operand's own dtype; max/min propagate NaN. For
argmax/argmin NumPy already has the IR's rules: the first index wins ties and
the first NaN wins over everything.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Op
from .context import BlockContext
from ..language.rounding import compute_dtype
from .storage import to_storage

__all__ = ["RULES"]

_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def _reduce(ctx: BlockContext, op: Op, args: list) -> tuple:
    dtype = op.operands[0].type.dtype
    cdt = compute_dtype(dtype)
    fn = _REDUCE[op.attrs["fn"]]
    x = args[0].astype(cdt, copy=False)  # read, never written
    kwargs = {"dtype": cdt} if op.attrs["fn"] in ("sum", "prod") else {}
    r = fn(x, axis=tuple(op.attrs["axes"]), keepdims=op.attrs["keepdims"], **kwargs)
    return (to_storage(r, dtype),)


def _argreduce(ctx: BlockContext, op: Op, args: list) -> tuple:
    dtype = op.operands[0].type.dtype
    fn = np.argmax if op.attrs["fn"] == "argmax" else np.argmin
    x = args[0].astype(compute_dtype(dtype), copy=False)
    r = fn(x, axis=op.attrs["axis"], keepdims=op.attrs["keepdims"])
    return (np.asarray(r).astype(np.int32),)


RULES = {"reduce": _reduce, "argreduce": _argreduce}
