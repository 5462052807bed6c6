"""Outlining for compact kernels (see emit.Ctx.compact): a block's ops are
emitted in segments of at most SEGMENT_OPS consecutive ops, each a
`__noinline__` device function that the kernel calls.

Why: NVVM's optimizer takes time superlinear in the size of one function
(NVRTC 13.5, 2 cores: 2000, 4000 and 8000 element-wise statements in rolled
loops took 0.5, 1.4 and 7 s of CPU in one function, 0.3, 0.8 and 1.9 s in
functions of 250 each), so a long kernel compiles in linear time only in
pieces. A call costs a few instructions and passes the tiles the segment reads
(one-element tiles by value, others by const reference) and those it defines
for later ops (by reference); arrays are passed as the kernel's parameters,
with their declarations (Ctx.array_params). A segment defines the constants
it reads again, so the caller defines only those that its own code reads.

What stays in the caller: ops with regions (if/for/while: their blocks are
segmented in turn) and terminators, so that `break`, `continue` and the
kernel's `return` of a device check keep their meaning; a segment whose code
returns anyway stays inline. Ops without tile operands (constants, block
indices, array shapes) are emitted ahead of the segment being collected: they
read nothing it computes.
"""
from __future__ import annotations

import re
from typing import Callable

from ...ir.core import Op
from ...ir.types import ArrayType, TileType
from .emit import Ctx

__all__ = ["emit_outlined", "SEGMENT_OPS", "MIN_SEGMENT"]

SEGMENT_OPS = 256  # the most ops one outlined function takes
MIN_SEGMENT = 16   # shorter segments are not worth a call: emitted inline
_HOISTABLE = frozenset({"constant", "bid", "num_blocks", "array_dim", "array_stride"})
_TERMINATORS = frozenset({"yield", "break", "continue"})
_RETURN = re.compile(r"\breturn\b")

EmitOps = Callable[[Ctx, list[Op]], None]

# The dynamic shared memory, declared once at file scope ahead of the outlined
# functions and helpers that use it (a declaration in each function and again
# in the kernel drew NVRTC's warning "name linkage conflicts with previous
# declaration").
SMEM_DECL = "extern __shared__ __align__(16) unsigned char tc_smem[];\n"


def emit_outlined(ctx: Ctx, ops: list[Op], emit_ops: EmitOps) -> None:
    """Emit `ops` (one block's, in program order) with `emit_ops`, segments of
    them through outlined functions."""
    parts = _partition(ops)
    outlined = {id(op) for part in parts if _is_segment(part) for op in part}
    in_caller: set[int] = set()  # constants defined in the caller's scope
    for part in parts:
        if _is_segment(part):
            _emit_segment(ctx, part, emit_ops, in_caller)
            continue
        # a constant that only segments read is defined by each of them
        part = [op for op in part if op.name != "constant"
                or not all(id(u) in outlined for u in ctx.users(op.result))]
        emit_ops(ctx, part)
        in_caller.update(op.result.id for op in part if op.name == "constant")
    if ops is ctx.fn.body.ops and any("tc_smem" in f for f in ctx.functions):
        ctx.functions.insert(0, SMEM_DECL)  # ahead of every function that uses it


def _partition(ops: list[Op]) -> list[list[Op]]:
    """Consecutive segments and the ops emitted in the caller, in emission
    order (ops without tile operands ahead of the segment being collected)."""
    parts: list[list[Op]] = []
    segment: list[Op] = []
    for op in ops:
        if op.name in _HOISTABLE:
            parts.append([op])
        elif op.regions or op.name in _TERMINATORS:
            parts += [segment, [op]] if segment else [[op]]
            segment = []
        else:
            segment.append(op)
            if len(segment) == SEGMENT_OPS:
                parts.append(segment)
                segment = []
    return parts + [segment] if segment else parts


def _is_segment(part: list[Op]) -> bool:
    return len(part) >= MIN_SEGMENT


def _emit_segment(ctx: Ctx, ops: list[Op], emit_ops: EmitOps, in_caller: set[int]) -> None:
    members = {id(op) for op in ops}
    defined = {r.id for op in ops for r in op.results}
    tiles, arrays = {}, {}  # C++ name -> value read by the segment, defined before it
    params: list[str] = []  # the C++ parameters of the function
    constants: dict[int, Op] = {}  # constants it reads that the caller does not define
    for op in ops:
        for v in op.operands:
            if v.id in defined:
                continue
            definer = ctx.definer(v)
            if isinstance(v.type, ArrayType):
                if v.id not in arrays:
                    arrays[v.id] = ctx.arrays[v.id]
                    params.extend(ctx.array_params[v.id])
            elif definer is not None and definer.name == "constant" and v.id not in in_caller:
                constants[v.id] = definer
            else:
                tiles.setdefault(ctx.name(v), v)
    outputs = [r for op in ops for r in op.results
               if any(id(user) not in members for user in ctx.users(r))]

    lines, depth = ctx.lines, ctx.depth
    ctx.lines, ctx.depth = [], 1
    emit_ops(ctx, list(constants.values()) + ops)
    body, ctx.lines, ctx.depth = ctx.lines, lines, depth
    if any(_RETURN.search(line) for line in body if not line.lstrip().startswith(("//", "#"))):
        # a device check ends the kernel here: a function could only end itself
        ctx.lines.extend("  " * (depth - 1) + line if line else line for line in body)
        in_caller.update(constants)
        return

    name = f"tc_s{len(ctx.functions)}"
    args = [a for arr in arrays.values() for a in (arr.ptr, *arr.dims, *arr.strides)]
    for n, v in tiles.items():
        params.append(f"const {_tile_type(ctx, v)}{' ' if v.type.size == 1 else '& '}{n}")
        args.append(n)
    for v in outputs:
        params.append(f"{_tile_type(ctx, v)}& out_{ctx.name(v)}")
        args.append(ctx.name(v))
        ctx.line(f"{_tile_type(ctx, v)} {ctx.name(v)};")
    ctx.line(f"{name}({', '.join(args)});")

    head = [f"static __device__ __noinline__ void {name}({', '.join(params)}) {{"]
    tail = [f"  out_{ctx.name(v)} = {ctx.name(v)};" for v in outputs]
    ctx.functions.append("\n".join(head + body + tail + ["}", ""]))


def _tile_type(ctx: Ctx, v) -> str:
    """C++ type of a tile value's variable (packed 16-bit loads: see rules_memory)."""
    t: TileType = v.type
    if v.id in ctx.packed:
        return f"tc::Packed16<{ctx.uses(t.dtype)}, {ctx.layout(t).per_thread}>"
    return ctx.frag(t)
