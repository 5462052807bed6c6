"""Rules for global memory: tile-space load/store (vectorized when the array
is known aligned and unit-stride) and gather/scatter. Offsets are 64-bit."""
from __future__ import annotations

import math

from ...ir.core import Op
from .cnames import padding_value
from .emit import ArrayArg, Ctx, unravel
from .layout import Layout

__all__ = ["RULES"]


class _TileAccess:
    """Addressing of a tile-space load/store: tile axis k reads array axis
    order[k] at coordinate index[k] * steps[k] + t_k."""

    def __init__(self, ctx: Ctx, op: Op, arr: ArrayArg, shape, index_ops):
        self.ctx, self.arr, self.shape = ctx, arr, tuple(shape)
        ndim = len(self.shape)
        self.order = tuple(op.attrs.get("order") or range(ndim))
        self.steps = tuple(op.attrs.get("steps") or self.shape)
        self.check = op.attrs.get("check_bounds", True)
        self.layout = Layout(math.prod(self.shape), ctx.threads, ctx.vk)
        self.base = [f"o{k}" for k in range(ndim)]
        for k, v in enumerate(index_ops):
            ctx.line(f"const long long o{k} = (long long){ctx.scalar(v)} * {self.steps[k]};")

    def vector_width(self) -> int:
        """Elements per vector access (1: scalar accesses only)."""
        lay, arr, ndim = self.layout, self.arr, len(self.shape)
        v = lay.vec
        ok = (v > 1 and arr.aligned16 and arr.unit_stride and self.order[-1] == ndim - 1
              and self.shape[-1] % v == 0 and self.steps[-1] % v == 0
              and v * arr.dtype.itemsize in (4, 8, 16))
        return v if ok else 1

    def coords(self, e: str, extra_last: str = "") -> list[str]:
        """Coordinate per tile axis of element e (plus `extra_last` on the last axis)."""
        m = unravel(e, self.shape)
        out = [f"{b} + {mi}" for b, mi in zip(self.base, m)]
        if extra_last:
            out[-1] += f" + {extra_last}"
        return out

    def emit_coords(self, e: str) -> None:
        for k, c in enumerate(self.coords(e)):
            self.ctx.line(f"const long long c{k} = {c};")

    def _names(self, last: str) -> list[str]:
        names = [f"c{k}" for k in range(len(self.order))]
        if last:
            names[-1] = last
        return names

    def in_bounds(self, extent: int = 1, *, valid: str = "", last: str = "") -> str:
        """Condition that coordinates c* (the last one named `last` if given,
        spanning `extent` elements) are inside the array."""
        conds = [valid] if valid else []
        if self.check:
            for k, (c, ax) in enumerate(zip(self._names(last), self.order)):
                n = extent if k == len(self.order) - 1 else 1
                hi = f"{c} < {self.arr.dims[ax]}" if n == 1 else f"{c} + {n} <= {self.arr.dims[ax]}"
                conds.append(f"{c} >= 0 && {hi}")
        return " && ".join(conds)

    def offset(self, last: str = "") -> str:
        """Element offset of coordinates c* in the array (64-bit)."""
        terms = []
        for c, ax in zip(self._names(last), self.order):
            s = self.arr.stride(ax)
            terms.append(c if s == "1" else f"{c} * {s}")
        return " + ".join(terms)


def _open_chunk_loop(ctx: Ctx, op: Op, arr, index):
    """Open the scope and the unrolled loop over this thread's chunks of V
    elements, with each chunk's array coordinates computed; the caller
    closes both."""
    ctx.open("")
    acc = _TileAccess(ctx, op, arr, op.attrs["shape"], index)
    v, lay = acc.vector_width(), acc.layout
    ctx.line("#pragma unroll")
    ctx.open(f"for (int k0 = 0; k0 < {lay.per_thread}; k0 += {v})")
    ctx.line(f"const int e = {lay.elem('k0')};")
    acc.emit_coords("e")
    return acc, v, lay


def _load(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    out = ctx.declare(op.result)
    ct = ctx.uses(arr.dtype)
    pad = padding_value(arr.dtype, op.attrs["padding"])
    acc, v, lay = _open_chunk_loop(ctx, op, arr, op.operands[1:])
    if v > 1:
        cond = acc.in_bounds(v)
        ctx.open(f"if ({cond})" if cond else "")
        ctx.line(f"const tc::Vec<{ct}, {v}> w = *reinterpret_cast<const tc::Vec<{ct}, {v}>*>("
                 f"{arr.ptr} + ({acc.offset()}));")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int j = 0; j < {v}; ++j) {out}.v[k0 + j] = w.v[j];")
        ctx.close("} else {")
        ctx.depth += 1
        ctx.line("#pragma unroll")
        ctx.open(f"for (int j = 0; j < {v}; ++j)")
        last = len(acc.shape) - 1
        ctx.line(f"const long long c{last}j = c{last} + j;")
        ctx.line(f"const bool ok = {acc.in_bounds(last=f'c{last}j') or 'true'};")
        ctx.line(f"{out}.v[k0 + j] = ok ? {arr.ptr}[{acc.offset(f'c{last}j')}] : {pad};")
        ctx.close()
        ctx.close()
    else:
        cond = acc.in_bounds(valid=lay.valid("e"))
        load = f"{arr.ptr}[{acc.offset()}]"
        ctx.line(f"{out}.v[k0] = {f'({cond}) ? {load} : {pad}' if cond else load};")
    ctx.close()
    ctx.close()


def _store(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    src = ctx.name(op.operands[1])
    ct = ctx.uses(arr.dtype)
    acc, v, lay = _open_chunk_loop(ctx, op, arr, op.operands[2:])
    if v > 1:
        cond = acc.in_bounds(v)
        ctx.open(f"if ({cond})" if cond else "")
        ctx.line(f"tc::Vec<{ct}, {v}> w;")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int j = 0; j < {v}; ++j) w.v[j] = {src}.v[k0 + j];")
        ctx.line(f"*reinterpret_cast<tc::Vec<{ct}, {v}>*>({arr.ptr} + ({acc.offset()})) = w;")
        ctx.close("} else {")
        ctx.depth += 1
        ctx.line("#pragma unroll")
        ctx.open(f"for (int j = 0; j < {v}; ++j)")
        last = len(acc.shape) - 1
        ctx.line(f"const long long c{last}j = c{last} + j;")
        cond = acc.in_bounds(last=f"c{last}j")
        st = f"{arr.ptr}[{acc.offset(f'c{last}j')}] = {src}.v[k0 + j];"
        ctx.line(f"if ({cond}) {st}" if cond else st)
        ctx.close()
        ctx.close()
    else:
        cond = acc.in_bounds(valid=lay.valid("e"))
        if lay.replicated:  # one element: thread 0 writes it
            cond = " && ".join(c for c in ("threadIdx.x == 0", cond) if c)
        st = f"{arr.ptr}[{acc.offset()}] = {src}.v[k0];"
        ctx.line(f"if ({cond}) {st}" if cond else st)
    ctx.close()
    ctx.close()


def _gather_scatter_terms(ctx: Ctx, op: Op, arr: ArrayArg, indices, mask, layout: Layout):
    """(condition, offset) C++ expressions for this thread's element k."""
    conds = [layout.valid("e")] if layout.partial else []
    terms = []
    for d, iv in enumerate(indices):
        i = f"(long long){ctx.name(iv)}.v[k]"
        if op.attrs.get("check_bounds", True):
            conds.append(f"{i} >= 0 && {i} < {arr.dims[d]}")
        s = arr.stride(d)
        terms.append(i if s == "1" else f"{i} * {s}")
    if mask is not None:
        conds.append(f"{ctx.name(mask)}.v[k]")
    return " && ".join(c for c in conds if c), " + ".join(terms)


def _split_mask(op: Op, first: int):
    rest = op.operands[first:]
    if op.attrs.get("has_mask"):
        return rest[:-1], rest[-1]
    return rest, None


def _gather(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    pad = ctx.scalar(op.operands[1])
    indices, mask = _split_mask(op, 2)
    out = ctx.declare(op.result)
    lay = ctx.layout(op.result.type)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    load = f"{arr.ptr}[{off}]"
    ctx.for_each(lay, [f"{out}.v[k] = {f'({cond}) ? {load} : {pad}' if cond else load};"],
                 need_e=lay.partial)


def _scatter(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    vals = ctx.name(op.operands[1])
    indices, mask = _split_mask(op, 2)
    lay = ctx.layout(op.operands[1].type)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    if lay.replicated:
        cond = " && ".join(c for c in ("threadIdx.x == 0", cond) if c)
    st = f"{arr.ptr}[{off}] = {vals}.v[k];"
    ctx.for_each(lay, [f"if ({cond}) {st}" if cond else st], need_e=lay.partial)


RULES = {"load": _load, "store": _store, "gather": _gather, "scatter": _scatter}
