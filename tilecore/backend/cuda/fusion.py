"""Element-wise fusion for compact kernels (see emit.Ctx.compact).

A run of consecutive element-wise ops on tiles of one element count N > 1 is
emitted as one loop over the thread's elements, computing every op of the run
for element k before element k + 1, in scalar temporaries. Only results used
after the run get a fragment. Ops on one-element tiles (scalars, constants)
inside a run are emitted where they stand, before the loop: they read no
tile of the run. Any other op ends the run.

Why: NVVM's optimizer takes time superlinear in the straight-line code of a
function. Fully unrolled per-op loops give it ops x elements-per-thread
statements; a fused loop kept rolled (emit.Ctx.unroll) gives it one copy of
the run, so large kernels compile in time linear in their length.
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.types import TileType
from .emit import Ctx
from .rules_elementwise import ELEMENT_EXPRS, element_arg
from .rules_reduce import begin_fold, end_fold, fold_step

__all__ = ["fusible", "uniform", "emit_run"]

# ops whose result element k is an operand's element k (or its only element)
_ALIASES = ("broadcast", "reshape", "permute")
# pure ops that an op on one-element tiles may be (emitted in place within a run)
_PURE = frozenset(ELEMENT_EXPRS) | {"constant", "bid", "num_blocks", "array_dim",
                                    "array_stride", *_ALIASES}


def _tile_sizes(values) -> list[int]:
    return [v.type.size for v in values if isinstance(v.type, TileType)]


def _alias_source(op: Op):
    """For a broadcast, reshape or permute that moves no element between
    threads, the operand whose element it reads; else None."""
    x = op.operands[0]
    if op.name == "reshape":
        return x
    if op.name == "broadcast" and x.type.size in (1, op.result.type.size):
        return x
    if op.name == "permute" and list(op.attrs["axes"]) == sorted(op.attrs["axes"]):
        return x
    return None


def fusible(op: Op) -> bool:
    """Whether `op` can join a fused run: an element-wise op (or a data
    movement that is one) whose result has N > 1 elements and whose tile
    operands have N elements or one."""
    if len(op.results) != 1 or not isinstance(op.result.type, TileType):
        return False
    n = op.result.type.size
    if n == 1 or any(s not in (1, n) for s in _tile_sizes(op.operands)):
        return False
    if op.name in _ALIASES:
        return _alias_source(op) is not None
    return op.name in ELEMENT_EXPRS


def uniform(op: Op) -> bool:
    """Whether `op` is a pure op on one-element tiles: it reads nothing a run
    computes, so it may be emitted before the run's loop."""
    return op.name in _PURE and all(s == 1 for s in _tile_sizes(op.operands)) \
        and all(s == 1 for s in _tile_sizes(op.results))


def emit_run(ctx: Ctx, ops: list[Op], fold: Op | None = None) -> None:
    """Emit a run of fusible ops (in program order, one element count) as one
    loop over the thread's elements. Results used by any op outside the run
    are stored to their fragments; the others stay scalar temporaries. `fold`,
    a reduction to one element of a result of the run (rules_reduce.fusible_fold),
    folds each element in the same loop."""
    members = {id(op) for op in (*ops, fold) if op is not None}
    outputs = {op.result.id for op in ops
               if any(id(user) not in members for user in ctx.users(op.result))}
    computed = sum(op.name not in _ALIASES for op in ops) + (fold is not None)
    for op in ops:
        if op.result.id in outputs:
            ctx.declare(op.result)
    if fold is not None:
        begin_fold(ctx, fold)
    lay = ctx.layout(ops[0].result.type)
    ctx.line(ctx.unroll(lay.per_thread, computed + len(outputs)))
    ctx.open(f"for (int k = 0; k < {lay.per_thread}; ++k)")
    if any(op.name == "iota" for op in ops) or (fold is not None and (
            fold.name == "argreduce" or lay.partial)):
        ctx.line(f"const int e = {lay.elem('k')};")
    local: dict[int, str] = {}  # value id -> C++ expression of its element k

    def arg(v) -> str:
        if v.id in local:
            return local[v.id]
        return f"{ctx.name(v)}.v[0]" if v.type.size == 1 else element_arg(ctx, v)

    for op in ops:
        if op.name in _ALIASES:
            local[op.result.id] = arg(_alias_source(op))
        else:
            ctx.loc(op)
            expr = ELEMENT_EXPRS[op.name](ctx, op, [arg(v) for v in op.operands])
            name = f"u{op.result.id}"
            ctx.line(f"const {ctx.uses(op.result.type.dtype)} {name} = {expr};")
            local[op.result.id] = name
        if op.result.id in outputs:
            ctx.line(f"{ctx.name(op.result)}.v[k] = {local[op.result.id]};")
    if fold is not None:
        ctx.loc(fold)
        ctx.line(fold_step(ctx, fold, local[fold.operands[0].id]))
    ctx.close()
    if fold is not None:
        end_fold(ctx, fold)
