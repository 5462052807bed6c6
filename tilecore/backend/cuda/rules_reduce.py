"""Rules for reduce and argreduce. A reduction to one element runs thread ->
warp shuffles -> shared memory (tc::block_allreduce, with partials of its own
per call site) and leaves the result in every thread; other reductions stage the tile in shared memory and each
thread folds the reduced extent for its own output elements, in order.

In a compact kernel (emit.Ctx.compact) a reduction to one element folds its
operand in the fused loop that computes it (fusion.py: begin_fold, fold_step,
end_fold) and calls one shared copy of the block-wide steps (tc_allreduce)."""
from __future__ import annotations

import math
import re

from ...ir.core import Op
from .emit import Ctx, unravel
from .layout import row_strides

__all__ = ["RULES", "fusible_fold", "begin_fold", "fold_step", "end_fold"]

_REDUCERS = {"sum": "RSum", "prod": "RProd", "max": "RMax", "min": "RMin",
             "argmax": "RArgMax", "argmin": "RArgMin"}


def _reducer(ctx: Ctx, fn: str, x) -> str:
    return f"tc::{_REDUCERS[fn]}<{ctx.uses(x.type.dtype)}>"


# A compact kernel (emit.Ctx.compact) calls one copy of the warp and block
# steps per reducer and block size instead of inlining them at every call site
# (a third of the PTX of a kernel that reduces every third line). The calls
# share one set of partials, so each waits a second time before returning.
_ALLREDUCE_CALL = """template <class R, int NT>
static __device__ __noinline__ typename R::A tc_allreduce(typename R::A x) {
  return tc::block_allreduce<R, NT, 0, true>(x);
}
"""


def _block_reduce(ctx: Ctx, op: Op, term: str, result: str) -> None:
    """Fold `term` (in k, e) over the whole tile; result expression in `acc`."""
    x = op.operands[0]
    r = _reducer(ctx, op.attrs["fn"], x)
    lay = ctx.layout(x.type)
    out = ctx.declare(op.result)
    ctx.open("")
    step = f"acc = {r}::combine(acc, {term});"
    guard = lay.valid("e")
    uses_e = bool(guard) or re.search(r"\be\b", term) is not None
    # 0.0 + x is not x for x = -0.0: a float sum starts from the identity (a sum of
    # -0.0 is +0.0, as NumPy's); every other fold can start from the first element.
    float_sum = op.attrs["fn"] == "sum" and x.type.dtype.is_float
    if uses_e or float_sum:
        ctx.line(f"auto acc = {r}::identity();")
        ctx.for_each(lay, [f"if ({guard}) {step}" if guard else step], need_e=uses_e)
    else:
        first = re.sub(r"\bk\b", "0", term)
        ctx.line(f"auto acc = {first};")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int k = 1; k < {lay.per_thread}; ++k) {step}")
    _allreduce(ctx, r, "acc")
    ctx.for_each(ctx.layout(op.result.type), [f"{out}.v[k] = {result};"], need_e=False)
    ctx.close()


def _allreduce(ctx: Ctx, r: str, acc: str) -> None:
    """Combine `acc` over the block (every thread gets the result)."""
    if ctx.compact:
        ctx.helper(_ALLREDUCE_CALL)
        ctx.line(f"{acc} = tc_allreduce<{r}, {ctx.threads}>({acc});")
    else:
        reused = "true" if ctx.in_loop() else "false"
        ctx.line(f"{acc} = tc::block_allreduce<{r}, {ctx.threads}, {ctx.new_slot()}, {reused}>({acc});")


# -- a reduction to one element fused with the loop computing its operand (fusion.py)

def fusible_fold(op: Op) -> bool:
    """Whether `op` reduces a tile to one element: its per-thread fold can then
    run in the fused loop that computes its operand."""
    return op.name in RULES and op.result.type.size == 1 and op.operands[0].type.size > 1


def begin_fold(ctx: Ctx, op: Op) -> None:
    """Before the loop: the accumulator, at the reducer's identity."""
    r = _reducer(ctx, op.attrs["fn"], op.operands[0])
    ctx.line(f"auto acc{op.result.id} = {r}::identity();")


def fold_step(ctx: Ctx, op: Op, arg: str) -> str:
    """In the loop: the statement folding `arg`, this thread's k-th element of
    the operand (with e, its linear index, in scope)."""
    x = op.operands[0]
    r = _reducer(ctx, op.attrs["fn"], x)
    acc = f"acc{op.result.id}"
    term = f"{r}::in({arg})" if op.name == "reduce" else f"{r}::make({arg}, e)"
    guard = ctx.layout(x.type).valid("e")
    step = f"{acc} = {r}::combine({acc}, {term});"
    return f"if ({guard}) {step}" if guard else step


def end_fold(ctx: Ctx, op: Op) -> None:
    """After the loop: the block-wide steps and the one-element result."""
    r = _reducer(ctx, op.attrs["fn"], op.operands[0])
    acc = f"acc{op.result.id}"
    out = ctx.declare(op.result)
    _allreduce(ctx, r, acc)
    ctx.line(f"{out}.v[0] = {f'{r}::out({acc})' if op.name == 'reduce' else f'{acc}.i'};")


def _fold_staged(ctx: Ctx, op: Op, axes: tuple[int, ...], term, result: str) -> None:
    """Stage the input; each output element folds term(smem_index, r) over r."""
    x = op.operands[0]
    shape = x.type.shape
    rs = row_strides(shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    r = _reducer(ctx, op.attrs["fn"], x)
    out = ctx.declare(op.result)
    ctx.open("")
    sm = ctx.stage(x)
    m = unravel("e", op.result.type.shape)
    if op.attrs["keepdims"]:
        m = [m[i] for i in kept]
    base = " + ".join(f"{mi} * {rs[a]}" for mi, a in zip(m, kept) if mi != "0") or "0"
    red_shape = tuple(shape[a] for a in axes)
    mr = unravel("r", red_shape)
    off = " + ".join(f"{mi} * {rs[a]}" for mi, a in zip(mr, axes) if mi != "0") or "0"
    lay = ctx.layout(op.result.type)
    extent = math.prod(red_shape)
    body = [
        f"const int base = {base};",
        f"auto acc = {r}::identity();",
        *([ctx.unroll(extent)] if ctx.compact else []),  # else NVVM unrolls it, 64 loads
        f"for (int r = 0; r < {extent}; ++r) "
        f"acc = {r}::combine(acc, {term(f'{sm}[base + {off}]')});",
        f"{out}.v[k] = {result};",
    ]
    if lay.partial:  # threads without an output element must not read smem
        body = [f"if ({lay.valid('e')}) {{"] + ["  " + b for b in body] + ["}"]
    ctx.for_each(lay, body)
    ctx.unstage()
    ctx.close()


def _reduce(ctx: Ctx, op: Op) -> None:
    x = op.operands[0]
    r = _reducer(ctx, op.attrs["fn"], x)
    if x.type.size == 1:
        ctx.line(f"const {ctx.frag(op.result.type)} {ctx.name(op.result)} = "
                 f"{{{{{r}::out({r}::in({ctx.name(x)}.v[0]))}}}};")
    elif op.result.type.size == 1:
        _block_reduce(ctx, op, f"{r}::in({ctx.name(x)}.v[k])", f"{r}::out(acc)")
    else:
        _fold_staged(ctx, op, tuple(op.attrs["axes"]), lambda v: f"{r}::in({v})", f"{r}::out(acc)")


def _argreduce(ctx: Ctx, op: Op) -> None:
    x = op.operands[0]
    r = _reducer(ctx, op.attrs["fn"], x)
    axis = op.attrs["axis"]
    if x.type.size == 1:
        ctx.line(f"const {ctx.frag(op.result.type)} {ctx.name(op.result)} = {{{{0}}}};")
    elif op.result.type.size == 1:
        _block_reduce(ctx, op, f"{r}::make({ctx.name(x)}.v[k], e)", "acc.i")
    else:
        _fold_staged(ctx, op, (axis,), lambda v: f"{r}::make({v}, r)", "acc.i")


RULES = {"reduce": _reduce, "argreduce": _argreduce}
