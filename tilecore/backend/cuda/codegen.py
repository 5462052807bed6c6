"""IR -> CUDA C++: one rule per IR op, driven by one small loop.

Each rule appends the C++ statements of one op to the context (see emit.Ctx);
the loop below is the only place that walks the IR. Rules for nested regions
call back into `emit_block`.
"""
from __future__ import annotations

from ...ir.core import Block, Op
from . import fusion, outline, rules_control, rules_elementwise, rules_memory, rules_movement, rules_reduce
from . import privatize, rules_atomic
from . import rules_scan
from .emit import Ctx

__all__ = ["RULES", "emit_block"]

RULES: dict = {
    **rules_elementwise.RULES,
    **rules_movement.RULES,
    **rules_reduce.RULES,
    **rules_scan.RULES,
    **rules_memory.RULES,
    **rules_atomic.RULES,  # after rules_memory: also load/store with a memory order
    **rules_control.RULES,
}


_SAME_VALUE = ("reshape", "broadcast")  # ops whose every element is their operand's element


def emit_block(ctx: Ctx, block: Block) -> None:
    """Emit every op of `block` in program order, noting which values are
    known constants (rules use them to pick exact cheaper forms). A compact
    kernel's blocks are emitted in outlined segments (outline.py), and each
    run of fusible element-wise ops as one loop (fusion.py). The kernel's body
    starts and ends with its atomics' private windows (privatize.py)."""
    body = block is ctx.fn.body
    if body:
        privatize.emit_prologue(ctx)
    if ctx.compact:
        outline.emit_outlined(ctx, block.ops, _emit_ops)
    else:
        _emit_ops(ctx, block.ops)
    if body:
        privatize.emit_epilogue(ctx, rules_atomic.global_update)


def _emit_ops(ctx: Ctx, ops: list[Op]) -> None:
    run: list[Op] = []
    for op in ops:
        if ctx.compact and fusion.fusible(op):
            if run and run[0].result.type.size != op.result.type.size:
                fusion.emit_run(ctx, run)
                run = []
            run.append(op)
        elif run and rules_reduce.fusible_fold(op) and any(
                op.operands[0] is r.result for r in run):
            fusion.emit_run(ctx, run, fold=op)  # the reduction's fold in the run's loop
            run = []
        else:
            if run and not fusion.uniform(op):
                fusion.emit_run(ctx, run)
                run = []
            ctx.loc(op)
            RULES[op.name](ctx, op)
        _note_constant(ctx, op)
    if run:
        fusion.emit_run(ctx, run)


def _note_constant(ctx: Ctx, op: Op) -> None:
    if op.name == "constant":
        ctx.constants[op.result.id] = op.attrs["value"]
    elif op.name in _SAME_VALUE and op.operands[0].id in ctx.constants:
        ctx.constants[op.result.id] = ctx.constants[op.operands[0].id]
