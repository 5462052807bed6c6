"""IR -> CUDA C++: one rule per IR op, driven by one small loop.

Each rule appends the C++ statements of one op to the context (see emit.Ctx);
the loop below is the only place that walks the IR. Rules for nested regions
call back into `emit_block`.
"""
from __future__ import annotations

from ...ir.core import Block
from . import rules_control, rules_elementwise, rules_memory, rules_movement, rules_reduce
from .emit import Ctx

__all__ = ["RULES", "emit_block"]

RULES: dict = {
    **rules_elementwise.RULES,
    **rules_movement.RULES,
    **rules_reduce.RULES,
    **rules_memory.RULES,
    **rules_control.RULES,
}


_SAME_VALUE = ("reshape", "broadcast")  # ops whose every element is their operand's element


def emit_block(ctx: Ctx, block: Block) -> None:
    """Emit every op of `block` in program order, noting which values are
    known constants (rules use them to pick exact cheaper forms)."""
    for op in block.ops:
        ctx.loc(op)
        RULES[op.name](ctx, op)
        if op.name == "constant":
            ctx.constants[op.result.id] = op.attrs["value"]
        elif op.name in _SAME_VALUE and op.operands[0].id in ctx.constants:
            ctx.constants[op.result.id] = ctx.constants[op.operands[0].id]
