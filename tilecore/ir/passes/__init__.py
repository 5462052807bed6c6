"""IR passes and the pipeline that runs them, in order.

The pipeline is one short list; each entry says why it sits where it does.
Every pass keeps the program's meaning: the interpreter and the CUDA backend
run the pipeline's output.
"""
from __future__ import annotations

from ..core import Function
from ..verify import verify
from .hoist_loads import hoist_loads

__all__ = ["run_pipeline", "PIPELINE"]

PIPELINE = (
    # First: catch a front-end bug before any pass builds on it.
    verify,
    # Last of the transformations: it only reorders ops, and works best on the final op list.
    hoist_loads,
    # After every transformation: the backends rely on these invariants.
    verify,
)


def run_pipeline(fn: Function) -> Function:
    """Run every pass of PIPELINE on `fn` (in place) and return it."""
    for p in PIPELINE:
        p(fn)
    return fn
