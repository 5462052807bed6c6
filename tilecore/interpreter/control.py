"""Rules for structured control flow: if, for, while and the terminators.

A terminator returns a `Signal`. An `if` turns its region's `yield` into its
results and passes `break`/`continue` on to the enclosing loop; a loop treats
`yield` and `continue` as "next iteration with these carried values" and
`break` as "done, these are the results".
"""
from __future__ import annotations

from typing import Union

import numpy as np

from ..errors import TileRuntimeError
from ..ir.core import Op
from .context import BlockContext, Signal
from .spin import check_progress

__all__ = ["RULES"]


def _if(ctx: BlockContext, op: Op, args: list) -> Union[tuple, Signal]:
    region = op.regions[0] if bool(args[0]) else op.regions[1]
    signal = ctx.run_block(region, ())
    if signal is None:  # a region without results may end without a yield
        return ()
    if signal.kind == "yield":
        return signal.values
    return signal


def _for(ctx: BlockContext, op: Op, args: list) -> tuple:
    lb, ub, step = args[0], args[1], args[2]
    if int(step) <= 0:  # the same text as the GPU's device error (runtime/device_errors.py)
        block = tuple(int(b) for b in ctx.bid)
        raise TileRuntimeError(f"The step of range() must be strictly positive, got {int(step)} "
                               f"(block {block})", loc=op.loc)
    carried = tuple(args[3:])
    iv_dtype = lb.dtype
    for iv in range(int(lb), int(ub), int(step)):
        signal = ctx.run_block(op.regions[0], (np.array(iv, dtype=iv_dtype),) + carried)
        if signal is not None:
            carried = signal.values
            if signal.kind == "break":
                break
    return carried


def _while(ctx: BlockContext, op: Op, args: list) -> tuple:
    carried = tuple(args)
    while True:
        writes = ctx.writes
        signal = ctx.run_block(op.regions[0], carried)
        if signal is not None:
            if signal.kind == "break":
                return signal.values
            check_progress(ctx, op, writes, carried, signal.values)  # a spin-wait never ending
            carried = signal.values


def _terminator(kind: str):
    def rule(ctx: BlockContext, op: Op, args: list) -> Signal:
        return Signal(kind, tuple(args))
    rule.__name__ = f"_{kind}"
    return rule


def _grid_control(ctx: BlockContext, op: Op, args: list) -> tuple:
    """grid_wait / grid_launch_dependents: the interpreter runs kernels one after
    another, each wholly after the one before, so neither has anything to do."""
    return ()


RULES = {"grid_wait": _grid_control, "grid_launch_dependents": _grid_control,
         "if": _if, "for": _for, "while": _while,
         "yield": _terminator("yield"), "continue": _terminator("continue"),
         "break": _terminator("break")}
