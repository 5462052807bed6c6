"""Private shared-memory windows for the atomics that ir/privatize.py allows:
the kernel fills each window with the op's identity when it starts, its
atomics update the window (each thread first combines its consecutive updates
of one element, and a warp whose lanes all update one element combines them
into one update), and when the block ends every element of the window that
changed is combined into the array with one global atomic.
"""
from __future__ import annotations

from typing import Callable, Optional

from ...ir.core import Op
from ...ir.privatize import Private, private_atomics
from .cnames import literal
from .emit import Ctx

__all__ = ["private_window", "emit_prologue", "emit_epilogue", "emit_private_atomic"]

HEADER = "tilecore/atomic.cuh"
_FN_CODE = {"add": 0, "and": 1, "or": 2, "xor": 3, "max": 4, "min": 5}


def _windows(ctx: Ctx) -> dict[int, Private]:
    if ctx.private is None:
        ctx.private = private_atomics(ctx.fn)
    return ctx.private


def private_window(ctx: Ctx, op: Op) -> Optional[Private]:
    """The window `op` updates, or None when it updates the array directly."""
    return _windows(ctx).get(id(op))


def _arrays(ctx: Ctx) -> list[tuple[Op, Private]]:
    """One (atomic op, window) per privatized array, in program order."""
    ops = {id(op): op for op in ctx.fn.walk()}
    seen, out = set(), []
    for key, window in _windows(ctx).items():
        op = ops[key]
        if op.operands[0].id not in seen:
            seen.add(op.operands[0].id)
            out.append((op, window))
    return out


def _identity(op: Op) -> str:
    dtype = op.operands[0].type.dtype
    fn = op.attrs["fn"]
    if fn in ("add", "or", "xor"):
        return literal(dtype, 0)
    if fn == "and":
        return literal(dtype, -1 if dtype.signed else (1 << dtype.bits) - 1)
    bits = dtype.bits
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.signed else (0, (1 << bits) - 1)
    return literal(dtype, lo if fn == "max" else hi)


def _name(op: Op) -> str:
    return f"tc_private{op.operands[0].id}"


def emit_prologue(ctx: Ctx) -> None:
    """Declare each window (at file scope: outlined functions use it too) and
    fill it with its identity."""
    arrays = _arrays(ctx)
    for op, window in arrays:
        ctx.headers.add(HEADER)
        ct = ctx.uses(op.operands[0].type.dtype)
        ctx.helper(f"__shared__ {ct} {_name(op)}[{window.size}];")
        ctx.line(f"for (int i = threadIdx.x; i < {window.size}; i += {ctx.threads}) "
                 f"{_name(op)}[i] = {_identity(op)};")
    if arrays:
        ctx.line("__syncthreads();")


def emit_epilogue(ctx: Ctx, global_update: Callable[[Op, str, str], str]) -> None:
    """Combine every changed element of each window into its array;
    global_update(op, pointer, value) is the C++ of one global atomic update."""
    arrays = _arrays(ctx)
    if arrays:
        ctx.line("__syncthreads();")
    for op, window in arrays:
        arr = ctx.arrays[op.operands[0].id]
        ctx.open(f"for (int i = threadIdx.x; i < {window.size}; i += {ctx.threads})")
        ctx.line(f"const auto v = {_name(op)}[i];")
        where = f"{arr.ptr} + (long long)({window.lo} + i) * {arr.stride(0)}"
        ctx.line(f"if (v != {_identity(op)}) {global_update(op, where, 'v')};")
        ctx.close()


def emit_private_atomic(ctx: Ctx, op: Op, window: Private, cond: str, index: str,
                        value: str, replicated: bool) -> None:
    """The window updates of one atomic_rmw: `cond`, `index` and `value` are the
    C++ expressions of element k's guard, array index and update."""
    code = _FN_CODE[op.attrs["fn"]]
    ct = ctx.uses(op.operands[0].type.dtype)
    at = f"({index}) - {window.lo}"   # the element's place in the window
    ctx.open("")
    if replicated:   # a one-element tile: thread 0 applies the block's update
        guard = " && ".join(c for c in ("threadIdx.x == 0", cond) if c)
        ctx.line("const int k = 0;")
        ctx.line(f"if ({guard}) tc::private_update<{code}>({_name(op)} + {at}, {value});")
        ctx.close()
        return
    lay = ctx.layout(op.result.type)
    ctx.line("long long run_i = -1;")
    ctx.line(f"{ct} run_v = {_identity(op)};")
    body = [f"const long long i = {at};",
            f"const {ct} u = {value};",
            f"if (i == run_i) run_v = tc::private_combine<{code}>(run_v, u);",
            f"else {{ if (run_i >= 0) tc::private_update<{code}>({_name(op)} + run_i, run_v); "
            f"run_i = i; run_v = u; }}"]
    if cond:
        body = [f"if ({cond}) {{"] + ["  " + b for b in body] + ["}"]
    ctx.for_each(lay, body, need_e=lay.partial)
    ctx.line(f"tc::private_flush<{code}>({_name(op)}, run_i, run_v);")
    ctx.close()
