"""Rules for scan and fold, ops whose region is a combining function.

The region becomes a C++ lambda over a struct holding one element of each
operand (a tuple scan combines all its tiles at once). The scan itself is
tc::tile_scan (include/tilecore/scan.cuh): sequential within each thread's
chunks, warp shuffles and one exchange through shared memory across threads,
on the tile's own register layout, so a scan along the last axis moves no
data. A scan along another axis first lays the tile out with that axis last
(through shared memory) and back afterwards. A fold is a scan whose segment
totals (the last element of each) go through shared memory to the result's
layout. A fold along the last axis in segments of whole chunks skips the
scan: tc::tile_fold combines each segment's chunks pairwise in order, and
a fold of a whole tile to one value, tc::tile_allfold, leaves it in every
thread (no put, no broadcast: the barriers of a built-in reduction). A
sequential fold (left to right) runs in one warp or one thread a segment.
"""
from __future__ import annotations

import math

from ...ir.core import Op
from .cnames import literal
from .emit import Ctx
from .rules_elementwise import ELEMENT_EXPRS, element_arg

__all__ = ["RULES"]

_HEADER = "tilecore/scan.cuh"


def _expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    """C++ expression of a region op's value (ir/ops.py lists what a region holds)."""
    if op.name == "constant":
        return literal(op.result.type.dtype, op.attrs["value"])
    if op.name in ("bid", "num_blocks"):
        return f"(int){'blockIdx' if op.name == 'bid' else 'gridDim'}.{'xyz'[op.attrs['axis']]}"
    return ELEMENT_EXPRS[op.name](ctx, op, args)


def _combiner(ctx: Ctx, op: Op) -> tuple[str, str]:
    """Emit the element struct and the combining lambda of `op`; their names."""
    n = len(op.operands)
    a, f = f"tc_a{op.results[0].id}", f"tc_f{op.results[0].id}"
    members = " ".join(f"{ctx.uses(x.type.dtype)} m{i};" for i, x in enumerate(op.operands))
    ctx.line(f"struct {a} {{ {members} }};")
    region = op.regions[0]
    names = {arg.id: f"{side}.m{i % n}" for i, (arg, side)
             in enumerate(zip(region.args, ["l"] * n + ["r"] * n))}
    ctx.open(f"const auto {f} = [](const {a}& l, const {a}& r) -> {a}")
    for rop in region.ops:
        args = [names[v.id] for v in rop.operands]
        if rop.name == "yield":
            ctx.line(f"return {a}{{{', '.join(args)}}};")
        elif rop.name in ("reshape", "broadcast"):
            names[rop.result.id] = args[0]
        else:
            name = f"c{rop.result.id}"
            ctx.line(f"const {ctx.uses(rop.result.type.dtype)} {name} = {_expr(ctx, rop, args)};")
            names[rop.result.id] = name
            if rop.name == "constant":  # for the exact cheaper forms of ELEMENT_EXPRS
                ctx.constants[rop.result.id] = rop.attrs["value"]
    ctx.close("};")
    return a, f


def _permuted(shape: tuple[int, ...], axis: int, p: str) -> str:
    """Row-major index in `shape` of element `p` of the tile with `axis` moved last."""
    length = shape[axis]
    inner = math.prod(shape[axis + 1:])
    return f"((({p}) / {length * inner}) * {length} + ({p}) % {length}) * {inner} + " \
           f"(({p}) / {length}) % {inner}"


def _smem_arrays(ctx: Ctx, op: Op, count: int, tag: str, start: int = 0) -> list[str]:
    """Typed pointers into dynamic shared memory holding `count` elements of
    each operand's dtype, one after another (16-byte aligned), from byte `start`."""
    ptrs, offset = [], start
    for i, x in enumerate(op.operands):
        ct = ctx.uses(x.type.dtype)
        ptr = f"{tag}{op.results[0].id}_{i}"
        ctx.line(f"{ct}* {ptr} = reinterpret_cast<{ct}*>(tc_smem + {offset});")
        ptrs.append(ptr)
        offset += (count * x.type.dtype.itemsize + 15) // 16 * 16
    ctx.need_smem(offset)
    return ptrs


def _smem_bytes(op: Op, count: int) -> int:
    """The bytes _smem_arrays(ctx, op, count, ...) takes."""
    return sum((count * x.type.dtype.itemsize + 15) // 16 * 16 for x in op.operands)


def _stage(ctx: Ctx, op: Op, a: str) -> tuple[str, list[str]]:
    """Emit y, this thread's elements as structs of the tile with the axis laid
    out last (its element k is element e of that tile). Returns y's name and,
    when the axis was not last, the shared-memory arrays the operands were
    staged in (free again: read back into y)."""
    x0 = op.operands[0]
    shape, axis = x0.type.shape, op.attrs["axis"]
    lay = ctx.layout(x0.type)
    y = f"y{op.results[0].id}"
    ctx.line(f"{a} {y}[{lay.per_thread}];")
    guard = f"if ({lay.valid('e')}) " if lay.partial else ""
    sx: list[str] = []
    if math.prod(shape[axis + 1:]) == 1:  # the axis is last already: same layout
        parts = ", ".join(element_arg(ctx, x) for x in op.operands)
        ctx.for_each(lay, [f"{y}[k] = {a}{{{parts}}};"], need_e=False)
    else:
        sx = _smem_arrays(ctx, op, x0.type.size, "sx")
        ctx.for_each(lay, [f"{guard}{s}[e] = {element_arg(ctx, x)};"
                           for s, x in zip(sx, op.operands)])
        ctx.line("__syncthreads();")
        src = _permuted(shape, axis, "e")
        parts = ", ".join(f"{s}[src]" for s in sx)
        ctx.for_each(lay, [f"{guard}{{ const int src = {src}; {y}[k] = {a}{{{parts}}}; }}"])
        ctx.line("__syncthreads();")
    return y, sx


def _identity(op: Op, a: str) -> str:
    """The element struct `a` holding the op's identities."""
    values = ", ".join(literal(x.type.dtype, v)
                       for x, v in zip(op.operands, op.attrs["identities"]))
    return f"{a}{{{values}}}"


def _scan_core(ctx: Ctx, op: Op, a: str, f: str, reverse: bool) -> tuple[str, list[str]]:
    """_stage, then tc::tile_scan on y (exclusive with the identities where the op
    is); returns what _stage does."""
    y, sx = _stage(ctx, op, a)
    x0 = op.operands[0]
    shape, axis = x0.type.shape, op.attrs["axis"]
    reused = "true" if ctx.in_loop() else "false"
    excl = f", true>({y}, {f}, {_identity(op, a)});" if op.attrs.get("exclusive") else \
        f">({y}, {f});"
    ctx.line(f"tc::tile_scan<{ctx.threads}, {x0.type.size}, {ctx.layout(x0.type).vec}, "
             f"{shape[axis]}, {'true' if reverse else 'false'}, {reused}{excl}")
    return y, sx


def _trivial(ctx: Ctx, op: Op) -> bool:
    """A scan or fold of one element per segment is its operands (reshaped)."""
    x0 = op.operands[0]
    if x0.type.shape[op.attrs["axis"]] != 1 and x0.type.size != 1:
        return False
    for x, r in zip(op.operands, op.results):
        ctx.line(f"const {ctx.frag(r.type)} {ctx.name(r)} = {ctx.name(x)};")
    return True


def _scan(ctx: Ctx, op: Op) -> None:
    if op.attrs.get("exclusive") and op.operands[0].type.shape[op.attrs["axis"]] == 1:
        # one element a segment: no predecessor anywhere, every element the identity
        for r, v in zip(op.results, op.attrs["identities"]):
            out = ctx.declare(r)
            ctx.for_each(ctx.layout(r.type), [f"{out}.v[k] = {literal(r.type.dtype, v)};"],
                         need_e=False)
        return
    if _trivial(ctx, op):
        return
    ctx.headers.add(_HEADER)
    outs = [ctx.declare(r) for r in op.results]
    x0 = op.operands[0]
    shape, axis = x0.type.shape, op.attrs["axis"]
    lay = ctx.layout(x0.type)
    ctx.open("")
    a, f = _combiner(ctx, op)
    y, sx = _scan_core(ctx, op, a, f, op.attrs["reverse"])
    if not sx:
        ctx.for_each(lay, [f"{o}.v[k] = {y}[k].m{i};" for i, o in enumerate(outs)],
                     need_e=False)
    else:  # back to the tile's order, through the staging arrays
        guard = f"if ({lay.valid('e')}) " if lay.partial else ""
        dst = _permuted(shape, axis, "e")
        writes = " ".join(f"{s}[dst] = {y}[k].m{i};" for i, s in enumerate(sx))
        ctx.for_each(lay, [f"{guard}{{ const int dst = {dst}; {writes} }}"])
        ctx.line("__syncthreads();")
        ctx.for_each(lay, [f"{guard}{o}.v[k] = {s}[e];" for o, s in zip(outs, sx)])
        ctx.line("__syncthreads();")
    ctx.close()


def _fold(ctx: Ctx, op: Op) -> None:
    if _trivial(ctx, op):
        return
    ctx.headers.add(_HEADER)
    outs = [ctx.declare(r) for r in op.results]
    x0 = op.operands[0]
    length = x0.type.shape[op.attrs["axis"]]
    lay = ctx.layout(x0.type)
    ctx.open("")
    a, f = _combiner(ctx, op)
    rlay = ctx.layout(op.results[0].type)
    guard = f"if ({rlay.valid('e')}) " if rlay.partial else ""
    if not op.attrs.get("sequential") and _folds_to_every_thread(ctx, op):
        # the whole tile's total in every thread: no put, no broadcast (tc::tile_allfold)
        y, _ = _stage(ctx, op, a)
        reused = "true" if ctx.in_loop() else "false"
        ctx.line(f"const {a} tot = tc::tile_allfold<{ctx.threads}, {x0.type.size}, {lay.vec}, "
                 f"{ctx.new_slot()}, {reused}>({y}, {f});")
        ctx.for_each(rlay, [f"{guard}{o}.v[k] = tot.m{i};" for i, o in enumerate(outs)],
                     need_e=bool(guard))
        ctx.close()
        return
    if op.attrs.get("sequential"):
        totals = _fold_sequential(ctx, op, a, f)
    elif _folds_directly(ctx, op):
        # tc::tile_fold gives segment s's total to put(s, total)
        y, _ = _stage(ctx, op, a)
        totals = _smem_arrays(ctx, op, op.results[0].type.size, "st")
        writes = " ".join(f"{t}[s] = v.m{i};" for i, t in enumerate(totals))
        ctx.line(f"tc::tile_fold<{ctx.threads}, {x0.type.size}, {lay.vec}, {length}>("
                 f"{y}, {f}, [&](int s, const {a}& v) {{ {writes} }});")
    else:
        y, _ = _scan_core(ctx, op, a, f, False)
        # the last element of each segment (of the axis-last tile) is its total;
        # segment s is element s of the result, row-major
        totals = _smem_arrays(ctx, op, op.results[0].type.size, "st")
        writes = " ".join(f"{t}[e / {length}] = {y}[k].m{i};" for i, t in enumerate(totals))
        last = f"e % {length} == {length - 1}" + (f" && {lay.valid('e')}" if lay.partial else "")
        ctx.for_each(lay, [f"if ({last}) {{ {writes} }}"])
    ctx.line("__syncthreads();")
    ctx.for_each(rlay, [f"{guard}{o}.v[k] = {t}[e];" for o, t in zip(outs, totals)],
                 need_e=True)
    ctx.line("__syncthreads();")
    ctx.close()


def _fold_sequential(ctx: Ctx, op: Op, a: str, f: str) -> list[str]:
    """A left-to-right fold (ct.reduce(..., sequential=True)); returns the
    shared-memory arrays of the segment totals. A whole tile of at most 32
    elements, one a thread, folds in one warp (tc::tile_fold_sequential); else
    the tile goes to shared memory in row-major order and one thread folds each
    segment along the axis."""
    x0 = op.operands[0]
    shape, axis = x0.type.shape, op.attrs["axis"]
    length, size = shape[axis], x0.type.size
    lay = ctx.layout(x0.type)
    if length == size <= 32 and lay.per_thread == 1:
        y, _ = _stage(ctx, op, a)
        totals = _smem_arrays(ctx, op, 1, "st")
        writes = " ".join(f"{t}[s] = v.m{i};" for i, t in enumerate(totals))
        ctx.line(f"tc::tile_fold_sequential<{size}>({y}, {f}, "
                 f"[&](int s, const {a}& v) {{ {writes} }});")
        return totals
    sx = _smem_arrays(ctx, op, size, "sx")
    segments = op.results[0].type.size
    totals = _smem_arrays(ctx, op, segments, "st", _smem_bytes(op, size))
    guard = f"if ({lay.valid('e')}) " if lay.partial else ""
    ctx.for_each(lay, [f"{guard}{s}[e] = {element_arg(ctx, x)};"
                       for s, x in zip(sx, op.operands)])
    ctx.line("__syncthreads();")
    inner = math.prod(shape[axis + 1:])

    def at(i: str) -> str:
        return ", ".join(f"{s}[{i}]" for s in sx)
    writes = " ".join(f"{t}[s] = acc.m{i};" for i, t in enumerate(totals))
    ctx.open(f"for (int s = (int)threadIdx.x; s < {segments}; s += {ctx.threads})")
    ctx.line(f"const int b = (s / {inner}) * {length * inner} + s % {inner};")
    ctx.line(f"{a} acc{{{at('b')}}};")
    ctx.line(f"for (int j = 1; j < {length}; ++j) acc = {f}(acc, {a}{{{at(f'b + j * {inner}')}}});")
    ctx.line(writes)
    ctx.close()
    return totals


def _folds_directly(ctx: Ctx, op: Op) -> bool:
    """Whether tc::tile_fold can fold `op` (no scan first): along the last axis,
    in segments of whole chunks, with every thread holding whole chunks, or a
    whole tile of fewer elements than threads (a power of two of them). Large
    folds of three or more tiles keep the scan: in DeviceScan's by-key float kernel
    (a (flag, head, value) fold), tile_fold made NVRTC 13.0 spill 24 bytes for
    sm_80 where the scan did not (13.5 spills in neither)."""
    x0 = op.operands[0]
    shape, axis = x0.type.shape, op.attrs["axis"]
    lay = ctx.layout(x0.type)
    if math.prod(shape[axis + 1:]) != 1:
        return False
    size = x0.type.size
    if size < ctx.threads * lay.vec:   # tile_fold_small: the whole tile, one item a thread
        return lay.vec == 1 and shape[axis] == size and size > 1 and size & (size - 1) == 0
    return len(op.operands) <= 2 and shape[axis] > lay.vec


def _folds_to_every_thread(ctx: Ctx, op: Op) -> bool:
    """Whether `op` folds its whole tile of whole chunks a thread to one value that
    tc::tile_allfold hands to every thread (scan.cuh allfold_fits: the warps' totals
    at most 32, or a whole number a lane): a user operator's tile aggregate then
    waits at the barriers a built-in reduction's does (one, two in a loop) instead
    of three. A tile of fewer elements than threads (a look-back's window or group
    of status words) only in a loop, where the barrier saved is saved every tile
    (H200: a float32 user `a + b` at 2^27 97.7 -> 98.1% of the built-in sum);
    outside one (reduce-then-scan's partials, once a block) NVRTC 13.5 took the
    float32 downsweep (256 x 32) from 172 registers to 128 and 32 bytes of stack."""
    x0 = op.operands[0]
    size, threads, vec = x0.type.size, ctx.threads, ctx.layout(x0.type).vec
    if x0.type.shape[op.attrs["axis"]] != size or not _folds_directly(ctx, op):
        return False
    if size < threads * vec:
        return ctx.in_loop()
    totals = size // (threads * vec) * (threads // 32)
    return size % (threads * vec) == 0 and (totals <= 32 or totals % 32 == 0)


RULES = {"scan": _scan, "fold": _fold}
