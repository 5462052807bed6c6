"""Rules for element-wise ops: astype, bitcast, unary, binary, compare, where.

Operands are computed in `compute_dtype` (float32 for narrow floats, int32 for
bool) and each result is rounded once to the result dtype with `cast`, which
is what the CUDA backend does (`to_storage` skips a cast that would only copy).
Integer arithmetic wraps; NumPy's overflow and divide warnings are silenced
(by `run_block`, for every rule) because the IR defines (or leaves
unspecified, but never failing) those cases.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Op
from ..language.enums import RoundingMode
from .context import BlockContext
from ..language.rounding import cast, compute_dtype
from .storage import to_storage

__all__ = ["RULES"]


def _astype(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (cast(args[0], op.attrs["dtype"]),)


def _bitcast(ctx: BlockContext, op: Op, args: list) -> tuple:
    return (np.array(args[0], order="C").view(op.attrs["dtype"].numpy_dtype),)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


_FLOAT_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": _rsqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil,
}


def _unary(ctx: BlockContext, op: Op, args: list) -> tuple:
    fn = op.attrs["fn"]
    x = args[0]
    dtype = op.operands[0].type.dtype
    if fn == "isnan":
        return (np.isnan(x.astype(compute_dtype(dtype), copy=False)) if dtype.is_float
                else np.zeros(x.shape, np.bool_),)
    if fn == "invert" and dtype.is_bool:
        return (np.logical_not(x),)
    xc = x.astype(compute_dtype(dtype), copy=False)  # read, never written
    if fn == "neg":
        r = np.negative(xc)
    elif fn == "invert":
        r = np.invert(xc)
    elif fn == "abs":
        r = np.abs(xc)
    else:
        r = _FLOAT_UNARY[fn](xc)
    return (to_storage(r, dtype),)


def _int_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero = b == 0
    return np.where(zero, 0, np.floor_divide(a, np.where(zero, 1, b))).astype(a.dtype)


def _int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    zero = b == 0
    return np.where(zero, 0, np.remainder(a, np.where(zero, 1, b))).astype(a.dtype)


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # A negative exponent is outside the contract; give 0 rather than raise.
    neg = b < 0
    return np.where(neg, 0, np.power(a, np.where(neg, 0, b))).astype(a.dtype)


def _shift_counts(b: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(in-range mask, counts with out-of-range ones replaced by 0). Negative
    counts are out of range (they are huge as unsigned numbers)."""
    ok = (b >= 0) & (b < bits)
    return ok, np.where(ok, b, 0).astype(b.dtype)


def _lshift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ok, counts = _shift_counts(b, a.dtype.itemsize * 8)
    return np.where(ok, np.left_shift(a, counts), 0).astype(a.dtype)


def _rshift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits = a.dtype.itemsize * 8
    ok, counts = _shift_counts(b, bits)
    if a.dtype.kind == "i":
        # A count >= bits fills with the sign bit, as shifting by bits-1 does.
        counts = np.where(ok, counts, bits - 1).astype(b.dtype)
        return np.right_shift(a, counts)
    return np.where(ok, np.right_shift(a, counts), 0).astype(a.dtype)


_COMMON_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "atan2": np.arctan2, "minimum": np.minimum, "maximum": np.maximum,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
}
_INT_BINARY = {"floordiv": _int_floordiv, "mod": _int_mod, "pow": _int_pow,
               "lshift": _lshift, "rshift": _rshift}
_FLOAT_BINARY = {"floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power}


def _directed_divide(a: np.ndarray, b: np.ndarray, mode: RoundingMode) -> np.ndarray:
    """float32 a / b rounded toward zero, -inf or +inf. The float64 quotient of two
    float32 values never lands on a float32 value the exact quotient is not, so
    rounding it in the right direction gives the exact directed result."""
    q = a.astype(np.float64) / b.astype(np.float64)
    r = q.astype(np.float32)
    r64 = r.astype(np.float64)
    finite = np.isfinite(q)
    if mode is RoundingMode.RZ:
        step = finite & (np.abs(r64) > np.abs(q))
        return np.where(step, np.nextafter(r, np.float32(0)), r)
    if mode is RoundingMode.RM:
        return np.where(finite & (r64 > q), np.nextafter(r, np.float32(-np.inf)), r)
    return np.where(finite & (r64 < q), np.nextafter(r, np.float32(np.inf)), r)


def _flush(r: np.ndarray) -> np.ndarray:
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(r) < tiny, np.copysign(np.float32(0), r), r).astype(np.float32)


def _truediv(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Division with the op's rounding mode (FULL and APPROX, approximations on
    the GPU, are computed exactly here) and optional flush to zero, which (as
    PTX's .ftz) flushes subnormal operands as well as subnormal results."""
    mode = op.attrs.get("rounding") or RoundingMode.RN
    if op.attrs.get("ftz"):
        a, b = _flush(a), _flush(b)
    if mode in (RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP):
        r = _directed_divide(a, b, mode)
    else:
        r = np.true_divide(a, b)
    return _flush(r) if op.attrs.get("ftz") else r


def _binary(ctx: BlockContext, op: Op, args: list) -> tuple:
    fn = op.attrs["fn"]
    if fn == "truediv" and len(op.attrs) > 1:
        return (_truediv(op, args[0].astype(np.float32, copy=False),
                         args[1].astype(np.float32, copy=False)),)
    dtype = op.operands[0].type.dtype
    cdt = compute_dtype(dtype)
    impl = _COMMON_BINARY.get(fn) or (_FLOAT_BINARY if dtype.is_float else _INT_BINARY)[fn]
    # the operands are only read (every impl returns a new array): no copies
    a, b = args[0].astype(cdt, copy=False), args[1].astype(cdt, copy=False)
    return (to_storage(impl(a, b), dtype),)


_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


def _compare(ctx: BlockContext, op: Op, args: list) -> tuple:
    dtype = op.operands[0].type.dtype
    # bool compares as 0/1, exactly like its int32 compute form.
    cdt = compute_dtype(dtype)
    return (_COMPARE[op.attrs["fn"]](args[0].astype(cdt, copy=False),
                                     args[1].astype(cdt, copy=False)),)


def _where(ctx: BlockContext, op: Op, args: list) -> tuple:
    cond, a, b = args
    return (np.where(cond, a, b).astype(a.dtype, copy=False),)


RULES = {"astype": _astype, "bitcast": _bitcast, "unary": _unary, "binary": _binary, "compare": _compare,
         "where": _where}
