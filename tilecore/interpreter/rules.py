"""The interpreter's rule table: one entry per op name of `ir.ops.OPS`."""
from __future__ import annotations

from . import atomic, control, elementwise, memory, reduce, scan, values
from .context import Rule

__all__ = ["RULES"]

RULES: dict[str, Rule] = {
    **values.RULES,
    **elementwise.RULES,
    **reduce.RULES,
    **scan.RULES,
    **memory.RULES,
    **atomic.RULES,
    **control.RULES,
}
