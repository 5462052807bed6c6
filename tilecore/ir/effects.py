"""Which array parameters a kernel writes.

Those arrays must be writable and free of self-overlap at launch, and must not
overlap any other argument; arrays the kernel only reads may be read-only
views, broadcast views (stride 0) or the same array passed twice. Code
generation marks the others `const`.

A kernel that orders memory accesses (an acquire or release: cross-block
protocols) may read, with plain loads, data that other blocks write while it
runs; code generation then drops `__restrict__` from the arrays it writes, so
that the compiler keeps those loads on their side of the fences.
"""
from __future__ import annotations

from ..language.enums import MemoryOrder
from .core import Function

__all__ = ["WRITING_OPS", "written_params", "orders_memory"]

# ops that write their first operand, an array (scatter and the atomics also
# with attr raw: RawArrayMemory.store_offset and atomic_*_offset write it too);
# a prefetch (an L2 hint) writes nothing and orders nothing
WRITING_OPS = frozenset({"store", "scatter", "atomic_rmw", "atomic_cas"})


def written_params(fn: Function) -> frozenset[int]:
    """Python parameter indices of the arrays `fn` writes, on any path."""
    return _params_under(fn, WRITING_OPS)


def prefetched_params(fn: Function) -> frozenset[int]:
    """Python parameter indices of the arrays `fn` prefetches."""
    return _params_under(fn, ("prefetch",))


def _params_under(fn: Function, op_names) -> frozenset[int]:
    """Python parameter indices of the arrays that are the first operand of an
    op named in `op_names`."""
    arrays = {op.operands[0].id for op in fn.walk() if op.name in op_names}
    return frozenset(p.index for p in fn.params if p.value.id in arrays)


def orders_memory(fn: Function) -> bool:
    """Whether `fn` has an access with acquire or release semantics: a load,
    gather, store or atomic whose memory order is neither WEAK nor RELAXED."""
    weak = (None, MemoryOrder.WEAK, MemoryOrder.RELAXED)
    return any(op.attrs.get("memory_order") not in weak for op in fn.walk()
               if op.name in ("load", "gather", "store", "atomic_rmw", "atomic_cas"))
