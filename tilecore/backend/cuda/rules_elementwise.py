"""Rules for scalars and element-wise ops: per-thread register loops."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ...ir.core import Op
from ...language import dtypes as D
from ...language.enums import RoundingMode
from .cnames import literal
from .emit import Ctx

__all__ = ["RULES", "ELEMENT_EXPRS", "element_arg"]


def _constant(ctx: Ctx, op: Op) -> None:
    t = op.result.type
    ctx.uses(t.dtype)
    ctx.line(f"const {ctx.frag(t)} {ctx.name(op.result)} = {{{{{literal(t.dtype, op.attrs['value'])}}}}};")


def _bid(ctx: Ctx, op: Op) -> None:
    ctx.line(f"const tc::Frag<int, 1> {ctx.name(op.result)} = {{{{(int)blockIdx.{'xyz'[op.attrs['axis']]}}}}};")


def _num_blocks(ctx: Ctx, op: Op) -> None:
    ctx.line(f"const tc::Frag<int, 1> {ctx.name(op.result)} = {{{{(int)gridDim.{'xyz'[op.attrs['axis']]}}}}};")


def _array_dim(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(op.result.type.dtype)
    ctx.line(f"const tc::Frag<{ct}, 1> {ctx.name(op.result)} = {{{{{arr.dims[op.attrs['axis']]}}}}};")


def _array_stride(ctx: Ctx, op: Op) -> None:
    """A stride parameter is 64-bit; int32 holds it unless the array is wide
    (the launch checks)."""
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(op.result.type.dtype)
    ctx.line(f"const tc::Frag<{ct}, 1> {ctx.name(op.result)} = "
             f"{{{{({ct}){arr.strides[op.attrs['axis']]}}}}};")


def element_arg(ctx: Ctx, v) -> str:
    """C++ expression of this thread's k-th element of tile `v` as held in its
    fragment (a packed 16-bit load, see rules_memory._load, unpacked to float)."""
    if v.id in ctx.packed:
        return f"tc::unpack_float({ctx.name(v)}, k)"
    return f"{ctx.name(v)}.v[k]"


def _elementwise(ctx: Ctx, op: Op, need_e: bool = False) -> None:
    """Declare the result and fill it element by element with the op's
    ELEMENT_EXPRS expression (in k, e) of its operands' elements."""
    expr = ELEMENT_EXPRS[op.name](ctx, op, [element_arg(ctx, v) for v in op.operands])
    out = ctx.declare(op.result)
    ctx.for_each(ctx.layout(op.result.type), [f"{out}.v[k] = {expr};"], need_e=need_e)


def _iota_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    return f"({ctx.uses(op.result.type.dtype)})e"


def _iota(ctx: Ctx, op: Op) -> None:
    _elementwise(ctx, op, need_e=True)


def _astype_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    x = op.operands[0]
    ctx.uses(x.type.dtype)
    ct = ctx.uses(op.result.type.dtype)
    if x.id in ctx.packed:  # a load kept as packed words: the argument is its float
        return args[0]
    return f"tc::cvt<{ct}>({args[0]})"


def _bitcast_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    ctx.uses(op.operands[0].type.dtype)
    return f"tc::bitcast<{ctx.uses(op.result.type.dtype)}>({args[0]})"


def _unary_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    fn = op.attrs["fn"] + ("_approx" if op.attrs.get("rounding") is RoundingMode.APPROX else "")
    return f"tc::op_{fn}({args[0]})"


def _exact_reciprocal(ctx: Ctx, divisor) -> Optional[float]:
    """1/c when the divisor is a float constant c = 2**k whose reciprocal is a
    finite float of its dtype: then a / c and a * (1/c) round the same real
    number, so the product is bit-identical and far cheaper than IEEE division."""
    dtype = divisor.type.dtype
    c = ctx.constants.get(divisor.id)
    if not dtype.is_float or dtype.itemsize not in (4, 8) or not isinstance(c, (int, float)):
        return None
    c = float(c)
    if c == 0 or not math.isfinite(c):
        return None
    mantissa, exp = math.frexp(abs(c))
    if mantissa != 0.5:
        return None
    inv = 1.0 / c
    finfo = np.finfo(dtype.numpy_dtype)
    return inv if float(finfo.smallest_subnormal) <= abs(inv) <= float(finfo.max) else None


def _plain_division(op: Op) -> bool:
    """A truediv with the default IEEE rounding (no rounding_mode, no ftz)."""
    return op.attrs["fn"] == "truediv" and not (op.attrs.get("rounding") or op.attrs.get("ftz"))


def _reciprocal(ctx: Ctx, op: Op) -> Optional[str]:
    """The C++ literal 1/c when `op` is a plain division by a constant c whose
    reciprocal gives the identical product (see _exact_reciprocal)."""
    if not _plain_division(op):
        return None
    inv = _exact_reciprocal(ctx, op.operands[1])
    if inv is None or op.operands[0].type.dtype != op.operands[1].type.dtype:
        return None
    return literal(op.operands[1].type.dtype, inv)


def _binary_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    a, b = args
    fn = f"op_{op.attrs['fn']}"
    inv = _reciprocal(ctx, op)
    if op.attrs["fn"] == "truediv" and not _plain_division(op):
        mode = op.attrs.get("rounding") or RoundingMode.RN
        fn = f"div_{mode.name.lower()}" + ("_ftz" if op.attrs.get("ftz") else "")
    elif inv is not None:
        return f"tc::op_mul({a}, {inv})"
    return f"tc::{fn}({a}, {b})"


def _binary(ctx: Ctx, op: Op) -> None:
    if _plain_division(op) and _reciprocal(ctx, op) is None:
        divisor = _broadcast_scalar(ctx, op.operands[1])
        if divisor is not None:
            _divide_by_scalar(ctx, op, ctx.name(op.operands[0]), divisor)
            return
    _elementwise(ctx, op)


_DIV_CHUNK = 4  # elements checked together: short live ranges, one branch per chunk (H100: 4 best)


def _divide_by_scalar(ctx: Ctx, op: Op, a: str, divisor) -> None:
    """IEEE division by one broadcast value through tc::DivBy: the quick form for
    a chunk of this thread's elements, redone exactly only when one of them
    does not fit."""
    out = ctx.declare(op.result)
    div = f"{out}_by"
    per_thread = ctx.layout(op.result.type).per_thread
    chunk = min(per_thread, _DIV_CHUNK)
    ctx.line(f"const tc::DivBy<{ctx.uses(divisor.type.dtype)}> {div}({ctx.scalar(divisor)});")
    ctx.line("#pragma unroll")
    ctx.open(f"for (int k0 = 0; k0 < {per_thread}; k0 += {chunk})")
    ctx.line(f"bool quick = {div}.fast;")
    ctx.line("#pragma unroll")
    ctx.open(f"for (int k = k0; k < k0 + {chunk}; ++k)")
    ctx.line(f"{out}.v[k] = {div}.quick({a}.v[k], quick);")
    ctx.close()
    ctx.open("if (!quick)")
    ctx.line("#pragma unroll")
    ctx.line(f"for (int k = k0; k < k0 + {chunk}; ++k) {out}.v[k] = {div}.exact({a}.v[k]);")
    ctx.close()
    ctx.close()


def _broadcast_scalar(ctx: Ctx, divisor) -> Optional[Any]:
    """The one-element tile that `divisor` broadcasts, when it is a float type
    computed in float32 (tc::DivBy divides by it with one reciprocal)."""
    dtype = divisor.type.dtype
    if not (dtype.is_float and dtype.itemsize in (2, 4)) or dtype == D.tfloat32:
        return None
    op = ctx.definer(divisor)
    if op is None or op.name != "broadcast" or op.operands[0].type.size != 1 \
            or divisor.type.size == 1:
        return None
    return op.operands[0]


def _compare_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    ctx.uses(op.operands[0].type.dtype)
    pick = _picks_one_element(ctx, op)
    if pick is not None:
        return pick
    return f"tc::op_{op.attrs['fn']}({args[0]}, {args[1]})"


def _picks_one_element(ctx: Ctx, op: Op) -> Optional[str]:
    """`arange(n) == c` (or !=) as the register and thread holding element c:
    after unrolling every other register's test is a constant, so no index is
    compared per element and nothing loop-invariant is hoisted out of a loop
    and held in registers (a `where(arange(n) == 0, p, x)` in DeviceScan's tile
    loop took 58 registers so). None for other compares."""
    fn = op.attrs["fn"]
    if fn not in ("eq", "ne"):
        return None
    for iota, other in (op.operands, op.operands[::-1]):
        definer = ctx.definer(iota)
        c = ctx.constants.get(other.id)
        dtype = iota.type.dtype
        if definer is None or definer.name != "iota" or not isinstance(c, int) or \
                isinstance(c, bool) or not dtype.is_integer or dtype.max < iota.type.size - 1:
            continue    # (a narrow arange wraps: then several elements hold c)
        where = ctx.layout(iota.type).holder(c)
        if where is None:
            hit = "false"
        elif where[1] < 0:
            hit = "true"
        else:
            hit = f"(k == {where[0]} && (int)threadIdx.x == {where[1]})"
        return hit if fn == "eq" else f"!{hit}"
    return None


def _where_expr(ctx: Ctx, op: Op, args: list[str]) -> str:
    if _select_after_float_compare(ctx, op):
        return f"tc::select_exact({args[0]}, {args[1]}, {args[2]})"
    return f"{args[0]} ? {args[1]} : {args[2]}"


def _select_after_float_compare(ctx: Ctx, op: Op) -> bool:
    """Whether a float32/float64 `where` selects by a float comparison: NVVM folds
    `x > y ? x : y` (and the like) into max.f32 / min.f32, which order -0.0 below
    +0.0 where the select would keep y (`where(t > -0.0, t, -0.0)` gave +0.0 for
    t = +0.0 on an H200, the interpreter -0.0; found by the differential fuzzer),
    so such a select is emitted opaque to it (tc::select_exact: one selp)."""
    dtype = op.result.type.dtype
    if not dtype.is_float or dtype.itemsize not in (4, 8) or dtype == D.tfloat32:
        return False
    cond = ctx.definer(op.operands[0])
    return cond is not None and cond.name == "compare" and cond.operands[0].type.dtype.is_float


# op name -> the C++ expression of one result element, given the C++
# expressions of the operands' corresponding elements (k and e in scope).
# Shared by the per-op loops here and the fused loops of fusion.py.
ELEMENT_EXPRS = {"iota": _iota_expr, "astype": _astype_expr, "bitcast": _bitcast_expr, "unary": _unary_expr,
                 "binary": _binary_expr, "compare": _compare_expr, "where": _where_expr}

RULES = {
    "constant": _constant, "bid": _bid, "num_blocks": _num_blocks, "array_dim": _array_dim,
    "array_stride": _array_stride, "iota": _iota, "astype": _elementwise, "bitcast": _elementwise, "unary": _elementwise,
    "binary": _binary, "compare": _elementwise, "where": _elementwise,
}
