"""Rules for reduce and argreduce. A reduction to one element runs thread ->
warp shuffles -> shared memory (tc::block_allreduce, with partials of its own
per call site) and leaves the result in every thread; other reductions stage
the tile in shared memory and fold the reduced extent of each output element
in a fixed order: by one thread, or by a group of lanes and shuffles when the
block has threads to spare (a (16, 128) tile summed along its rows by 128
threads: 8 lanes per row).

In a compact kernel (emit.Ctx.compact) a reduction to one element folds its
operand in the fused loop that computes it (fusion.py: begin_fold, fold_step,
end_fold) and calls one shared copy of the block-wide steps (tc_allreduce);
another reduction calls one `__noinline__` function per distinct reduction
that stages, folds and waits (_fold_staged_call)."""
from __future__ import annotations

import hashlib
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
    """Stage the input; each output element folds term(smem_index, r) over r:
    by one thread, or, when the block has at least two threads per output
    element, by a group of G lanes (G a power of two up to 32) that fold every
    G-th value and combine their partials with shuffles, in a fixed order."""
    x = op.operands[0]
    if ctx.compact and x.id not in ctx.packed:
        _fold_staged_call(ctx, op, axes, term, result)
        return
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
    outputs = op.result.type.size
    spare = ctx.threads // outputs   # threads per output element
    group = min(32, 1 << spare.bit_length() - 1, 1 << extent.bit_length() - 1) if spare else 1
    fold = f"acc = {r}::combine(acc, {term(f'{sm}[base + {off}]')});"
    if group >= 2 and not ctx.compact:
        _fold_grouped(ctx, op, r, sm, base, fold, group, extent, result, out)
    else:
        body = [
            f"const int base = {base};",
            f"auto acc = {r}::identity();",
            *([ctx.unroll(extent)] if ctx.compact else []),  # else NVVM unrolls it, 64 loads
            f"for (int r = 0; r < {extent}; ++r) {fold}",
            f"{out}.v[k] = {result};",
        ]
        if lay.partial:  # threads without an output element must not read smem
            body = [f"if ({lay.valid('e')}) {{"] + ["  " + b for b in body] + ["}"]
        ctx.for_each(lay, body)
    ctx.unstage()
    ctx.close()


def _fold_grouped(ctx: Ctx, op: Op, r: str, sm: str, base: str, fold: str, group: int,
                  extent: int, result: str, out: str) -> None:
    """The group form of _fold_staged: output element e is folded by threads
    [e * group, (e + 1) * group), each over r = lane, lane + group, ...; the
    partials meet in a butterfly of shuffles (the reducers' combine is
    commutative) and go through shared memory, after the staged input, to the
    threads that hold the output element in the result's layout."""
    x = op.operands[0]
    staged = (x.type.size * x.type.dtype.itemsize + 15) // 16 * 16
    outputs = op.result.type.size
    ctx.need_smem(staged + outputs * 16)   # 16 bytes: the widest accumulator (a value, an index)
    ctx.line(f"auto acc = {r}::identity();")
    ctx.open("")
    ctx.line(f"const int e = (int)threadIdx.x / {group};")
    ctx.open(f"if (e < {outputs})")
    ctx.line(f"const int base = {base};")
    ctx.line(f"for (int r = (int)threadIdx.x % {group}; r < {extent}; r += {group}) {fold}")
    ctx.close()
    ctx.close()
    ctx.line(f"for (int m = {group // 2}; m >= 1; m >>= 1) acc = {r}::combine(acc, tc::shfl_xor(acc, m));")
    ctx.line(f"auto* part = reinterpret_cast<decltype(acc)*>(tc_smem + {staged});")
    ctx.line(f"if ((int)threadIdx.x % {group} == 0 && (int)threadIdx.x < {outputs * group}) "
             f"part[threadIdx.x / {group}] = acc;")
    ctx.line("__syncthreads();")
    lay = ctx.layout(op.result.type)
    body = ["acc = part[e];", f"{out}.v[k] = {result};"]
    if lay.partial:
        body = [f"if ({lay.valid('e')}) {{"] + ["  " + b for b in body] + ["}"]
    ctx.for_each(lay, body)


# -- compact kernels: a staged reduction in a function of its own

def _fold_index(op: Op, axes: tuple[int, ...]) -> tuple[str, str, int]:
    """C++ expressions, in e (an output element) and r (a step of the fold), of
    the staged input element's base and offset, and the fold's extent."""
    shape = op.operands[0].type.shape
    rs = row_strides(shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    m = unravel("e", op.result.type.shape)
    if op.attrs["keepdims"]:
        m = [m[i] for i in kept]
    base = " + ".join(f"{mi} * {rs[a]}" for mi, a in zip(m, kept) if mi != "0") or "0"
    red_shape = tuple(shape[a] for a in axes)
    mr = unravel("r", red_shape)
    off = " + ".join(f"{mi} * {rs[a]}" for mi, a in zip(mr, axes) if mi != "0") or "0"
    return base, off, math.prod(red_shape)


def _fold_staged_call(ctx: Ctx, op: Op, axes: tuple[int, ...], term, result: str) -> None:
    """_fold_staged in a compact kernel: the staging, the barriers and the folds
    in one `__noinline__` function per distinct reduction (named by a hash of
    its C++ text), called with the operand's and the result's fragments, so
    that a kernel reducing rows a hundred times optimizes that code once (NVVM
    spent half its time in a long 2-D kernel on the inline copies)."""
    x = op.operands[0]
    r = _reducer(ctx, op.attrs["fn"], x)
    ct = ctx.uses(x.type.dtype)
    ctx.need_smem(x.type.size * x.type.dtype.itemsize)
    src, lay = ctx.layout(x.type), ctx.layout(op.result.type)
    base, off, extent = _fold_index(op, axes)
    step = f"acc = {r}::combine(acc, {term(f'sm[base + {off}]')});"
    store = f"if ({src.valid('e')}) sm[e] = x.v[k];" if src.partial else "sm[e] = x.v[k];"
    body = [f"  {ct}* sm = reinterpret_cast<{ct}*>(tc_smem);",
            "  #pragma unroll",
            f"  for (int k = 0; k < {src.per_thread}; ++k) {{",
            f"    const int e = {src.elem('k')};",
            f"    {store}",
            "  }",
            "  __syncthreads();"]
    outputs = op.result.type.size
    spare = ctx.threads // outputs
    group = min(32, 1 << (spare.bit_length() - 1), 1 << (extent.bit_length() - 1)) if spare else 1
    if group >= 2:
        # G lanes per output element fold every G-th value; a butterfly of
        # shuffles combines them (the reducers' combine is commutative) and the
        # partials reach the threads holding the outputs through shared memory
        staged = (x.type.size * x.type.dtype.itemsize + 15) // 16 * 16
        ctx.need_smem(staged + outputs * 16)  # the widest accumulator: a value and an index
        fold = [f"auto acc = {r}::identity();",
                "{",
                f"  const int e = (int)threadIdx.x / {group};",
                f"  if (e < {outputs}) {{",
                f"    const int base = {base};",
                f"    for (int r = (int)threadIdx.x % {group}; r < {extent}; r += {group}) {step}",
                "  }",
                "}",
                f"for (int m = {group // 2}; m >= 1; m >>= 1) "
                f"acc = {r}::combine(acc, tc::shfl_xor(acc, m));",
                f"auto* part = reinterpret_cast<decltype(acc)*>(tc_smem + {staged});",
                f"if ((int)threadIdx.x % {group} == 0 && (int)threadIdx.x < {outputs * group}) "
                f"part[threadIdx.x / {group}] = acc;",
                "__syncthreads();"]
        each = ["acc = part[e];", f"out.v[k] = {result};"]
        body += ["  " + b for b in fold]
    else:
        each = [f"const int base = {base};",
                f"auto acc = {r}::identity();",
                "#pragma unroll" if extent <= 8 else "#pragma unroll 4",
                f"for (int r = 0; r < {extent}; ++r) {step}",
                f"out.v[k] = {result};"]
    if lay.partial:  # threads without an output element must not read smem
        each = [f"if ({lay.valid('e')}) {{"] + ["  " + b for b in each] + ["}"]
    body += ["  #pragma unroll",
             f"  for (int k = 0; k < {lay.per_thread}; ++k) {{",
             f"    const int e = {lay.elem('k')};",
             *["    " + b for b in each],
             "  }",
             "  __syncthreads();",
             "}", ""]
    params = f"(const {ctx.frag(x.type)}& x, {ctx.frag(op.result.type)}& out)"
    text = "\n".join(body)
    name = f"tc_fold_{hashlib.sha1((params + text).encode()).hexdigest()[:12]}"
    ctx.helper(f"static __device__ __noinline__ void {name}{params} {{\n{text}")
    out = ctx.declare(op.result)
    ctx.line(f"{name}({ctx.name(x)}, {out});")


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
