"""Which array parameters a kernel writes.

Those arrays must be writable and free of self-overlap at launch, and must not
overlap any other argument; arrays the kernel only reads may be read-only
views, broadcast views (stride 0) or the same array passed twice. Code
generation marks the others `const`.
"""
from __future__ import annotations

from .core import Function

__all__ = ["WRITING_OPS", "written_params"]

WRITING_OPS = frozenset({"store", "scatter"})  # ops that write their first operand, an array


def written_params(fn: Function) -> frozenset[int]:
    """Python parameter indices of the arrays `fn` writes, on any path."""
    written = {op.operands[0].id for op in fn.walk() if op.name in WRITING_OPS}
    return frozenset(p.index for p in fn.params if p.value.id in written)
