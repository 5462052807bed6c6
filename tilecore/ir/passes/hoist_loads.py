"""Issue global-memory reads as early as their inputs allow.

A tile op that needs a block-wide exchange (a reduction, a permute) ends in a
barrier, and the CUDA compiler never moves a global load above a barrier. So
a load written after a reduction (layer-norm's weight and bias, say) would
wait for it and then expose its whole latency. Moving each `load` and
`gather` up to just after the ops it depends on lets its latency overlap the
work before it.

A read may not move above an op that writes the same array (a store or
scatter to it): arrays passed to a kernel never overlap, so writes to other
arrays cannot change what it reads. Leaf ops with no tile operands (constants, block indices, array dimensions)
go first in their block, so reads indexed by them can move. Reads never move
above an if/for/while
(it may break out of the enclosing loop, and the read would then run where
the program never runs it), nor into or out of regions. Atomics and loads or
stores with a memory order are fences for this pass: no read moves above one
(an acquire orders later reads after it; other blocks may write what follows
it), and an ordered load itself never moves. Nor does a read move above the
wait for the previous grid (grid_wait): what that grid writes is only
visible after it. A prefetch stays where it is
written (the kernel chose how far ahead it runs) and is no fence: it reads
nothing a later op sees, so reads move above it.
"""
from __future__ import annotations

from ..core import Block, Function, Op

__all__ = ["hoist_loads"]

_READS = ("load", "gather")
# Pure ops with no tile operands: safe to compute first, so that reads whose
# indices they give can move up too.
_LEAVES = ("constant", "bid", "num_blocks", "array_dim", "array_stride")
_WRITES = ("store", "scatter")


def _fence(op: Op) -> bool:
    """An atomic, a load/store with a memory order, or the wait for the previous grid."""
    return op.name in ("atomic_rmw", "atomic_cas", "grid_wait") or "memory_order" in op.attrs


def _hoist_block(block: Block) -> None:
    for op in block.ops:
        for region in op.regions:
            _hoist_block(region)
    leaves = [op for op in block.ops if op.name in _LEAVES]
    new: list[Op] = list(leaves)
    for op in block.ops:
        if op.name in _LEAVES:
            continue
        pos = len(new)
        if op.name in _READS and not _fence(op):
            needs = {v.id for v in op.operands}
            array = op.operands[0].id
            while pos > 0:
                prev = new[pos - 1]
                if prev.name in _READS or prev.regions or _fence(prev) or \
                        any(r.id in needs for r in prev.results) or \
                        (prev.name in _WRITES and prev.operands[0].id == array):
                    break  # reads keep their order; see the module docstring for the rest
                pos -= 1
        new.insert(pos, op)
    block.ops[:] = new


def hoist_loads(fn: Function) -> None:
    """Move reads of global memory up, in every block of `fn`."""
    _hoist_block(fn.body)
