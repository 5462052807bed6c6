"""Where one block's threads must wait for each other between two accesses to
the same array.

Tile code is sequential: a load after a store of the same array in one block
sees what the store wrote, and a store after a load does not change what the
load read. On the GPU a tile is spread over the block's threads, so when two
such accesses map elements to threads differently (another tile shape, index,
order, a gather or a one-element tile), a thread may read an element another
thread wrote, or overwrite one another thread has yet to read. Such an access
gets a block barrier (`__syncthreads()`, which also makes the block's global
writes visible to the block) in front of it.

Two tile-space accesses with the same index values, shape, order and steps touch
the same elements in the same threads and need no barrier; neither do two
atomics (each element is its own atomic operation) nor two reads. An earlier
access conflicts in program order, and any access in a loop enclosing both
conflicts across iterations. A prefetch is no access here: it changes no value
a thread reads, so it needs no barrier and gives no other access one.
"""
from __future__ import annotations

from .core import Block, Function, Op

__all__ = ["barrier_before"]

_READS = frozenset({"load", "gather"})
_ATOMICS = frozenset({"atomic_rmw", "atomic_cas"})
_WRITES = frozenset({"store", "scatter"}) | _ATOMICS
_LOOPS = frozenset({"for", "while"})


def _mapping(op: Op):
    """What decides which thread touches which element: for a tile-space access
    its index values and addressing attrs; None (compare by identity) else."""
    if op.name not in ("load", "store"):
        return None
    first = 1 if op.name == "load" else 2
    attrs = tuple(op.attrs.get(k) for k in ("shape", "order", "steps"))
    return tuple(v.id for v in op.operands[first:]), attrs


def _conflict(a: Op, b: Op) -> bool:
    if a.name in _READS and b.name in _READS:
        return False
    if a.name in _ATOMICS and b.name in _ATOMICS:
        return False
    ma, mb = _mapping(a), _mapping(b)
    return ma is None or ma != mb


def barrier_before(fn: Function) -> frozenset[int]:
    """ids (Python `id`) of the memory ops that need a block barrier before them."""
    accesses: list[tuple[Op, int, tuple[int, ...]]] = []  # (op, position, enclosing loops)

    def visit(block: Block, loops: tuple[int, ...]) -> None:
        for op in block.ops:
            if op.name in _READS or op.name in _WRITES:
                accesses.append((op, len(accesses), loops))
            inner = loops + (id(op),) if op.name in _LOOPS else loops
            for region in op.regions:
                visit(region, inner)

    visit(fn.body, ())
    need = set()
    for op, pos, loops in accesses:
        array = op.operands[0]
        for other, other_pos, other_loops in accesses:
            if other is op or other.operands[0] is not array:
                continue
            shared_loop = bool(set(loops) & set(other_loops))
            if (other_pos < pos or shared_loop) and _conflict(op, other):
                need.add(id(op))
                break
    return frozenset(need)
