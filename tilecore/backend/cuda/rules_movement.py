"""Rules for data movement: broadcast, reshape, permute. Free when the layout
allows (reshape keeps N and the row-major order, so it is a register copy;
broadcasting a one-element tile reads the replicated value); otherwise the
tile is staged row-major in shared memory and each thread reads its elements."""
from __future__ import annotations

from ...ir.core import Op
from .emit import Ctx, unravel
from .layout import row_strides

__all__ = ["RULES"]


def _linear(terms: list[tuple[str, int]]) -> str:
    """C++ sum of index * stride terms (skipping zero indices)."""
    parts = [i if s == 1 else f"{i} * {s}" for i, s in terms if i != "0"]
    return " + ".join(parts) or "0"


def _copy(ctx: Ctx, op: Op) -> None:
    ctx.line(f"const {ctx.frag(op.result.type)} {ctx.name(op.result)} = {ctx.name(op.operands[0])};")


def _via_smem(ctx: Ctx, op: Op, src_index) -> None:
    """Result element e = staged source element src_index(multi-index of e)."""
    out = ctx.declare(op.result)
    ctx.open("")
    sm = ctx.stage(op.operands[0])
    m = unravel("e", op.result.type.shape)
    lay = ctx.layout(op.result.type)
    read = f"{out}.v[k] = {sm}[{src_index(m)}];"
    ctx.for_each(lay, [f"if ({lay.valid('e')}) {read}" if lay.partial else read])
    ctx.unstage()
    ctx.close()


def _broadcast(ctx: Ctx, op: Op) -> None:
    x = op.operands[0]
    src, dst = x.type.shape, tuple(op.attrs["shape"])
    lead = len(dst) - len(src)
    if x.type.size == 1:
        out = ctx.declare(op.result)
        ctx.for_each(ctx.layout(op.result.type), [f"{out}.v[k] = {ctx.name(x)}.v[0];"], need_e=False)
    elif x.type.size == op.result.type.size:
        _copy(ctx, op)
    else:
        rs = row_strides(src)
        _via_smem(ctx, op, lambda m: _linear(
            [(m[lead + j] if s != 1 else "0", rs[j]) for j, s in enumerate(src)]))


def _reshape(ctx: Ctx, op: Op) -> None:
    _copy(ctx, op)


def _permute(ctx: Ctx, op: Op) -> None:
    axes = op.attrs["axes"]
    rs = row_strides(op.operands[0].type.shape)
    if op.result.type.size == 1 or list(axes) == sorted(axes):
        _copy(ctx, op)
        return
    _via_smem(ctx, op, lambda m: _linear([(m[i], rs[a]) for i, a in enumerate(axes)]))


RULES = {"broadcast": _broadcast, "reshape": _reshape, "permute": _permute}
