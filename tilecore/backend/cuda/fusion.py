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

A broadcast of a tile of more than one element (a row or column of a 2-D
tile: staged through shared memory, see rules_movement) joins the run that
reads it: the source is staged before the loop (one barrier for all of the
run's broadcasts, each at its own offset, at most STAGE_BYTES in all) and
each element is read in the loop, so that a 2-D kernel's `x - sum(x, axis=1)`
costs no unrolled loops of its own (a third of the optimizer's time in a
long 2-D kernel went to them); such a loop stays rolled. A run on tiles of one
element per thread (a row of sums over a block of more threads) is emitted
without a loop.
"""
from __future__ import annotations

from ...ir.core import Op
from ...ir.types import TileType
from .emit import Ctx, unravel
from .layout import row_strides
from .rules_elementwise import ELEMENT_EXPRS, element_arg
from .rules_reduce import begin_fold, end_fold, fold_step

__all__ = ["fusible", "uniform", "emit_run", "STAGE_BYTES"]

# the most shared memory (bytes) the staged broadcasts of one fused loop take
STAGE_BYTES = 8192

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
    if _staged(op):
        return True
    if n == 1 or any(s not in (1, n) for s in _tile_sizes(op.operands)):
        return False
    if op.name in _ALIASES:
        return _alias_source(op) is not None
    return op.name in ELEMENT_EXPRS


def _staged(op: Op) -> bool:
    """Whether `op` broadcasts a tile of more than one element (staged through
    shared memory in the run's loop)."""
    if op.name != "broadcast" or not isinstance(op.result.type, TileType):
        return False
    x = op.operands[0].type
    return 1 < x.size < op.result.type.size and x.size * x.dtype.itemsize <= STAGE_BYTES


def uniform(op: Op) -> bool:
    """Whether `op` is a pure op on one-element tiles: it reads nothing a run
    computes, so it may be emitted before the run's loop."""
    return op.name in _PURE and all(s == 1 for s in _tile_sizes(op.operands)) \
        and all(s == 1 for s in _tile_sizes(op.results))


def emit_run(ctx: Ctx, ops: list[Op], fold: Op | None = None) -> None:
    """Emit a run of fusible ops (in program order, one element count) as one
    loop over the thread's elements (several loops, one after the other, when
    its staged broadcasts need more than STAGE_BYTES). Results used by any op
    outside a loop are stored to their fragments; the others stay scalar
    temporaries. `fold`, a reduction to one element of a result of the run
    (rules_reduce.fusible_fold), folds each element in the last loop."""
    chunks: list[list[Op]] = [[]]
    staged = 0
    for op in ops:
        nbytes = _staged_bytes(op)
        if staged + nbytes > STAGE_BYTES and chunks[-1]:
            chunks.append([])
            staged = 0
        staged += nbytes
        chunks[-1].append(op)
    for i, chunk in enumerate(chunks):
        _emit_loop(ctx, chunk, fold if i == len(chunks) - 1 else None)


def _staged_bytes(op: Op) -> int:
    if not _staged(op):
        return 0
    x = op.operands[0].type
    return (x.size * x.dtype.itemsize + 15) // 16 * 16


def _emit_loop(ctx: Ctx, ops: list[Op], fold: Op | None) -> None:
    members = {id(op) for op in (*ops, fold) if op is not None}
    outputs = {op.result.id for op in ops
               if any(id(user) not in members for user in ctx.users(op.result))}
    computed = sum(op.name not in _ALIASES or _staged(op) for op in ops) + (fold is not None)
    for op in ops:
        if op.result.id in outputs:
            ctx.declare(op.result)
    lay = ctx.layout(ops[0].result.type)
    smem = _stage(ctx, [op for op in ops if _staged(op)])
    if fold is not None:
        begin_fold(ctx, fold)
    if lay.per_thread == 1:  # one element per thread: no loop for NVVM to unroll
        ctx.open("")
        ctx.line("const int k = 0;")
    else:  # a loop that reads staged broadcasts stays rolled: unrolled, the
        # short `x - sum(x, axis=1)` loops of a 2-D kernel cost NVVM and ptxas 10%
        ctx.line("#pragma unroll 1" if smem else ctx.unroll(lay.per_thread, computed + len(outputs)))
        ctx.open(f"for (int k = 0; k < {lay.per_thread}; ++k)")
    if smem or any(op.name == "iota" for op in ops) or (fold is not None and (
            fold.name == "argreduce" or lay.partial)):
        ctx.line(f"const int e = {lay.elem('k')};")
    local: dict[int, str] = {}  # value id -> C++ expression of its element k

    def arg(v) -> str:
        if v.id in local:
            return local[v.id]
        return f"{ctx.name(v)}.v[0]" if v.type.size == 1 else element_arg(ctx, v)

    for op in ops:
        if op.result.id in smem:
            ctx.loc(op)
            name = f"u{op.result.id}"
            read = smem[op.result.id]
            ctx.line(f"const {ctx.uses(op.result.type.dtype)} {name} = {read};")
            local[op.result.id] = name
        elif op.name in _ALIASES:
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
        ctx.line(fold_step(ctx, fold, arg(fold.operands[0])))
    ctx.close()
    if smem:
        ctx.line("__syncthreads();")  # before shared memory is written again
    if fold is not None:
        end_fold(ctx, fold)


def _stage(ctx: Ctx, broadcasts: list[Op]) -> dict[int, str]:
    """Write the sources of a loop's staged broadcasts to shared memory (row
    major, each at its own offset) and wait; the C++ expression, in e, of each
    broadcast's element, by result id."""
    reads: dict[int, str] = {}
    offset = 0
    for op in broadcasts:
        x = op.operands[0]
        ct = ctx.uses(x.type.dtype)
        sm = f"sm{op.result.id}"
        ctx.loc(op)
        ctx.line(f"{ct}* {sm} = reinterpret_cast<{ct}*>(tc_smem + {offset});")
        src = ctx.layout(x.type)
        store = f"{sm}[e] = {element_arg(ctx, x)};"
        guard = src.valid("e")
        if src.per_thread == 1:
            ctx.open("")
            ctx.line("const int k = 0;")
            ctx.line(f"const int e = {src.elem('k')};")
            ctx.line(f"if ({guard}) {store}" if guard else store)
            ctx.close()
        else:
            ctx.for_each(src, [f"if ({guard}) {store}" if guard else store])
        src_shape, dst = x.type.shape, op.result.type.shape
        lead = len(dst) - len(src_shape)
        m = unravel("e", dst)
        terms = [(m[lead + j], rs) for j, (s, rs) in enumerate(zip(src_shape, row_strides(src_shape)))
                 if s != 1 and m[lead + j] != "0"]
        index = " + ".join(i if rs == 1 else f"{i} * {rs}" for i, rs in terms) or "0"
        dst_lay = ctx.layout(op.result.type)
        if dst_lay.partial and index != "0":  # a thread's element past the tile
            index = f"{dst_lay.valid('e')} ? {index} : 0"  # reads any staged element
        reads[op.result.id] = f"{sm}[{index}]"
        offset += _staged_bytes(op)
    if broadcasts:
        ctx.need_smem(offset)
        ctx.line("__syncthreads();")
    return reads
