"""Value-producing ops of the generator: element-wise arithmetic, comparisons,
bitwise ops, unary math, where, astype, reductions, shape ops and factories
(memory ops are in memops.py, scans and custom folds in scans.py,
constant-folding checks in folding.py). Each
function takes the generator, emits zero or more statements and returns
whether it did anything.

Every operand choice follows the tolerance rules of tolerance.py: carrier-only
values (math results, float sums) never feed arithmetic; values exact only up
to the sign of zero never reach a divisor, pow, atan2 or rsqrt; products of
float32/float64 never reach add/sub (FMA contraction). Operations whose result
the IR leaves unspecified are sanitized in the source: integer exponents
masked, floats clamped into range before a conversion to an integer. Integer
divisors and shift counts are defined for every value (x // 0 and x % 0 are 0; a
count outside [0, bits) gives 0 or the sign's fill): they are made non-zero or
masked into range three times in four and otherwise left as they are,
out-of-range constant counts included.
"""
from __future__ import annotations

import math
from typing import Optional

import ml_dtypes
import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from . import atomics, memops, scans
from .consts import literal, loose_const
from .folding import fold_check
from .generate import Gen, carrier_ok
from .model import Var
from .tolerance import (APPROX_EXP_LIMIT, DIV_APPROX_TOL, EXACT, ZSIGN, Tol, join, math_tol,
                        narrowed, reduce_tol)
from .typerules import ARITH, INTS, STORAGE_ONLY, broadcast, fits, promote, result_dtype

__all__ = ["OPS", "readable", "same_type_update"]

_BINARY_W = {"add": 4, "sub": 3, "mul": 3, "truediv": 2, "floordiv": 1.5, "mod": 1.5, "pow": 1,
             "atan2": 0.7, "minimum": 1.5, "maximum": 1.5, "bitand": 1, "bitor": 1, "bitxor": 1,
             "lshift": 1, "rshift": 1}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>"}
_FUNC = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "floordiv": "floordiv",
         "mod": "mod", "pow": "pow", "atan2": "atan2", "minimum": "minimum",
         "maximum": "maximum", "bitand": "bitwise_and", "bitor": "bitwise_or",
         "bitxor": "bitwise_xor"}
_COMPARE = {"eq": ("==", "equal"), "ne": ("!=", "not_equal"), "lt": ("<", "less"),
            "le": ("<=", "less_equal"), "gt": (">", "greater"), "ge": (">=", "greater_equal")}
_UNARY_W = {"neg": 2, "invert": 1, "abs": 1.5, "exp": 1, "exp2": 0.6, "log": 0.8, "log2": 0.6,
            "sqrt": 1, "rsqrt": 0.6, "sin": 0.6, "cos": 0.6, "tan": 0.4, "sinh": 0.4,
            "cosh": 0.4, "tanh": 0.6, "floor": 0.8, "ceil": 0.8, "isnan": 0.8}
_NO_ZSIGN = ("pow", "atan2")


def readable(v: Var, fn: str, divisor: bool = False) -> bool:
    """Whether `v` may be an operand of `fn` under the tolerance rules."""
    if not carrier_ok(v) or v.dtype not in ARITH:
        return False
    if v.tol.kind == "zsign" and (fn in _NO_ZSIGN or divisor):
        return False
    if v.product and fn in ("add", "sub"):
        return False
    return True


def _typed_const(g: Gen, dtype: DType) -> tuple[str, DType]:
    value = loose_const(g, dtype)
    if dtype.is_integer and isinstance(value, float):
        value = int(value)
    g.feature("const", "typed")
    return f"ct.{dtype.name}({literal(value)})", dtype


def _other_operand(g: Gen, a: Var, fn: str, divisor: bool):
    """(source, operand dtype or constant, Var or None) for the second operand."""
    r = g.rng.random()
    if r < 0.45:
        b = g.pick(lambda v: v is not a and readable(v, fn, divisor)
                   and result_dtype(fn, a.dtype, v.dtype) is not None
                   and _fits_shape(g, a.shape, v.shape))
        if b is not None:
            return b.name, b.dtype, b
    if r < 0.75:
        c = loose_const(g, a.dtype, nonzero=divisor)
        g.feature("const", "loose")
        return literal(c), c, None
    if r < 0.85:
        dt = g.dtype()
        if result_dtype(fn, a.dtype, dt) is not None:
            src, dt = _typed_const(g, dt)
            return src, dt, None
    s = g.pick(lambda v: v.is_scalar and v is not a and readable(v, fn, divisor)
               and result_dtype(fn, a.dtype, v.dtype) is not None)
    if s is not None:
        return s.name, s.dtype, s
    c = loose_const(g, a.dtype, nonzero=divisor)
    return literal(c), c, None


def _fits_shape(g: Gen, a: tuple, b: tuple) -> bool:
    out = broadcast(a, b)
    return out is not None and math.prod(out) <= g.max_elems


def _sanitize(g: Gen, fn: str, dtype: DType, src: str) -> str:
    """An integer second operand made safe where the IR leaves the result
    unspecified (a negative exponent), and divisors and shift counts mostly kept
    from their edge (a zero divisor gives 0; a count outside [0, bits) gives 0 or
    the sign's fill), so that most results are not those edges' constants."""
    if fn in ("floordiv", "mod"):
        return f"ct.where({src} == 0, 1, {src})" if g.chance(0.75) else src
    if fn == "pow":
        return f"({src} & 7)"
    if fn in ("lshift", "rshift") and g.chance(0.75):
        return f"({src} & {dtype.bits - 1})"
    return src


_DIVISOR_LIKE = ("truediv", "floordiv", "mod", "pow", "atan2", "lshift", "rshift")
_SANITIZED = ("floordiv", "mod", "pow", "lshift", "rshift")


def binary(g: Gen) -> bool:
    fns, ws = zip(*_BINARY_W.items())
    fn = g.rng.choices(fns, ws)[0]
    divisor_like = fn in _DIVISOR_LIKE
    a = g.pick(lambda v: readable(v, fn))
    if a is None:
        return False
    b_src, operand, b = _other_operand(g, a, fn, divisor=divisor_like)
    swap = g.chance(0.3) and readable(a, fn, divisor=divisor_like)
    x_src, y_src, y_var = (b_src, a.name, a) if swap else (a.name, b_src, b)
    x_operand, y_operand = (operand, a.dtype) if swap else (a.dtype, operand)
    dtype = result_dtype(fn, x_operand, y_operand)
    if dtype is None:
        return False
    if fn in _SANITIZED and dtype.is_integer:
        if y_var is None:      # a constant second operand: pick a safe one
            y_operand = _safe_const(g, fn, dtype)
            y_src = literal(y_operand)
            dtype = result_dtype(fn, x_operand, y_operand)
            if dtype is None or not dtype.is_integer:
                return False
        elif y_var.dtype.is_bool:
            return False   # (y & 7) or where(y == 0, 1, y) would make a bool y an int32
        else:
            y_src = _sanitize(g, fn, dtype, y_src)
    if dtype.is_bool and fn not in ("add", "sub", "mul", "minimum", "maximum", "bitand",
                                    "bitor", "bitxor"):
        return False
    shape = broadcast(a.shape, b.shape if b is not None else ())
    expr = _binary_expr(g, fn, x_src, y_src, dtype, y_is_var=y_var is not None)
    tol, product = _binary_tol(fn, dtype, a, b, y_var is None)
    if "RoundingMode.FULL" in expr or "RoundingMode.APPROX" in expr:
        if a.tol.kind != "exact" or (b is not None and b.tol.kind != "exact"):
            return False
        tol = DIV_APPROX_TOL
    g.use(a, *([b] if b is not None else []))
    g.define(Var(g.name("t"), dtype, shape, tol, product), expr)
    g.feature("binary", fn, dtype.name)
    return True


def _safe_const(g: Gen, fn: str, dtype: DType) -> int:
    if fn in ("lshift", "rshift"):   # `dtype` may be wider than the result: counts of 0..63
        return g.rng.randint(0, 63) if g.chance(0.3) else g.rng.randint(0, 7)
    if fn == "pow":
        return g.rng.randint(0, 5)
    return g.rng.choice([c for c in (1, 2, 3, 7, -1, -3, 100) if fits(c, dtype)])


def _binary_tol(fn: str, dtype: DType, a: Var, b: Optional[Var],
                const_divisor: bool) -> tuple[Optional[Tol], bool]:
    tol = math_tol(fn, dtype) if dtype.is_float else EXACT
    if tol.kind == "exact":
        tol = join(a.tol, b.tol) if b is not None else a.tol
        if fn in ("minimum", "maximum") and dtype.is_float:
            tol = ZSIGN
    wide = dtype in (D.float32, D.float64)
    product = wide and (fn == "mul" or (fn == "truediv" and const_divisor))
    return tol, product


def _binary_expr(g: Gen, fn: str, x: str, y: str, dtype: DType,
                 y_is_var: bool = True) -> str:
    if fn == "truediv" and dtype is D.float32 and g.chance(0.2):
        return _rounded_division(g, x, y, y_is_var)
    if fn in _SYMBOL and (fn not in _FUNC or g.chance(0.6)):
        return f"{x} {_SYMBOL[fn]} {y}"
    if fn in ("minimum", "maximum") and g.chance(0.2):
        return f"{'min' if fn == 'minimum' else 'max'}({x}, {y})"
    return f"ct.{_FUNC[fn]}({x}, {y})"


def _rounded_division(g: Gen, x: str, y: str, y_is_var: bool) -> str:
    # the hardware divisions (FULL, APPROX) are within 2 ulp only for divisors in
    # [2^-126, 2^126]: a variable divisor is kept inside by a where (a constant one
    # would fold the where to one of its operands, untyped)
    mode = g.rng.choice(("RN", "RZ", "RM", "RP") + (("FULL", "APPROX") if y_is_var else ()))
    ftz = g.chance(0.3)
    g.feature("truediv", "rounding", mode, "ftz" if ftz else "")
    if mode in ("FULL", "APPROX"):
        y = f"ct.where((abs({y}) >= 1e-30) & (abs({y}) <= 1e30), {y}, 3.0)"
    return (f"ct.truediv({x}, {y}, rounding_mode=ct.RoundingMode.{mode}"
            f"{', flush_to_zero=True' if ftz else ''})")


def compare(g: Gen) -> bool:
    fn = g.rng.choice(tuple(_COMPARE))
    a = g.pick(lambda v: readable(v, "compare"))
    if a is None:
        return False
    src, operand, b = _other_operand(g, a, "compare", divisor=False)
    if promote(a.dtype, operand) is None:
        return False
    shape = broadcast(a.shape, b.shape if b is not None else ())
    sym, func = _COMPARE[fn]
    expr = f"{a.name} {sym} {src}" if g.chance(0.7) else f"ct.{func}({a.name}, {src})"
    g.use(a, *([b] if b is not None else []))
    g.define(Var(g.name("t"), D.bool_, shape), expr)
    g.feature("compare", fn, a.dtype.name)
    return True


def unary(g: Gen) -> bool:
    fns, ws = zip(*_UNARY_W.items())
    fn = g.rng.choices(fns, ws)[0]
    if fn in ("neg", "abs"):
        x = g.pick(lambda v: v.dtype in ARITH)
    elif fn == "invert":
        x = g.pick(lambda v: carrier_ok(v) and (v.dtype.is_integer or v.dtype.is_bool))
    else:
        x = g.pick(lambda v: carrier_ok(v) and v.dtype in ARITH)
    if x is None:
        return False
    cdt = x.dtype if x.dtype.is_float or fn in ("neg", "abs", "invert") else D.float32
    tol = math_tol(fn, cdt)
    approx = fn == "exp" and cdt is D.float32 and g.chance(0.2)
    if tol.kind != "exact" and x.tol.kind != "exact":
        return False
    if fn == "rsqrt" and x.tol.kind != "exact":
        return False
    shadow, product = None, False
    if fn in ("neg", "abs"):
        tol = EXACT if fn == "abs" and x.tol.kind == "zsign" else x.tol
        shadow, product = x.shadow, x.product and fn == "neg"
    elif tol.kind == "exact":
        tol = x.tol if x.tol.kind == "zsign" and fn in ("sqrt", "floor", "ceil") else EXACT
    dtype = D.bool_ if fn == "isnan" else cdt
    if approx:
        tol = math_tol("exp", cdt, approx=True)
        lim = APPROX_EXP_LIMIT
        expr = (f"ct.exp(ct.minimum(ct.maximum({x.name}, {-lim}), {lim}), "
                f"rounding_mode=ct.RoundingMode.APPROX)")
        g.feature("unary", "exp_approx")
    else:
        expr = _unary_expr(g, fn, x.name)
    var = Var(g.name("t"), dtype, x.shape, tol, product, None)
    if shadow is not None:
        var.shadow = g.name("sh")
        g.emit(f"{var.shadow} = {shadow}")  # |x| bounds are unchanged by neg and abs
    g.use(x)
    g.define(var, expr)
    g.feature("unary", fn, x.dtype.name)
    return True


def _unary_expr(g: Gen, fn: str, x: str) -> str:
    if fn == "neg":
        return f"-{x}" if g.chance(0.7) else f"ct.negative({x})"
    if fn == "invert":
        return f"~{x}" if g.chance(0.7) else f"ct.bitwise_not({x})"
    if fn == "abs":
        return f"abs({x})" if g.chance(0.5) else f"ct.abs({x})"
    return f"ct.{fn}({x})"


def where(g: Gen) -> bool:
    a = g.pick(lambda v: readable(v, "where"))
    if a is None:
        return False
    cond_var = g.pick(lambda v: v.dtype.is_bool and v.tol.kind == "exact"
                      and _fits_shape(g, v.shape, a.shape))
    if cond_var is not None and g.chance(0.7):
        cond, cvars = cond_var.name, [cond_var]
    else:
        c = g.pick(lambda v: readable(v, "compare") and _fits_shape(g, v.shape, a.shape))
        if c is None:
            return False
        cond, cvars = f"{c.name} > {literal(loose_const(g, c.dtype))}", [c]
    src, operand, b = _other_operand(g, a, "where", divisor=False)
    dtype = promote(a.dtype, operand)
    if dtype is None:
        return False
    shape = broadcast(a.shape, b.shape if b is not None else ())
    shape = broadcast(shape, cvars[0].shape)
    if shape is None or math.prod(shape) > g.max_elems:
        return False
    tol = join(a.tol, b.tol) if b is not None else a.tol
    product = a.product or (b is not None and b.product)
    x, y = (a.name, src) if g.chance(0.5) else (src, a.name)
    g.use(a, *cvars, *([b] if b is not None else []))
    g.define(Var(g.name("t"), dtype, shape, tol, product), f"ct.where({cond}, {x}, {y})")
    g.feature("where", dtype.name)
    return True


def _int_bounds(src: DType, dst: DType) -> tuple[float, float]:
    """The widest [lo, hi] of `src` floats that convert into `dst`'s range."""
    big = float(ml_dtypes.finfo(src.numpy_dtype).max)
    hi = _float_within(src, dst.max, big)
    lo = -_float_within(src, -dst.min, big) if dst.min else 0.0
    return lo, hi


def _float_within(dt: DType, limit: int, big: float) -> float:
    """The largest value of float dtype `dt` that is <= the integer `limit` and finite."""
    v = np.array([min(float(limit), big)], np.float64).astype(dt.numpy_dtype)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[v.itemsize]
    while int(float(v[0])) > limit:
        v = (v.view(uint) - uint(1)).view(dt.numpy_dtype)
    return float(v[0])


def astype(g: Gen) -> bool:
    x = g.pick(lambda v: v.dtype in ARITH + STORAGE_ONLY)
    if x is None:
        return False
    dst = D.tfloat32 if g.chance(0.05) else g.dtype(storage=0.3)
    if dst is x.dtype:
        return False
    tol = narrowed(x.tol, x.dtype, dst)
    if tol is None:
        return False
    src = x.name
    if x.dtype.is_float and dst.is_integer:
        if not x.dtype.arithmetic:
            src = f"{src}.astype(ct.float32)"
            fdt = D.float32
        else:
            fdt = x.dtype
        lo, hi = _int_bounds(fdt, dst)
        src = f"ct.where(ct.isnan({src}), 0, ct.minimum(ct.maximum({src}, {lo!r}), {hi!r}))"
        g.feature("astype", "clamped")
    r = g.rng.random()
    if r < 0.5:
        expr = f"{src}.astype(ct.{dst.name})" if src == x.name else f"({src}).astype(ct.{dst.name})"
    elif r < 0.8:
        expr = f"ct.astype({src}, ct.{dst.name})"
    elif r < 0.92 and dst not in STORAGE_ONLY:
        expr = f"ct.{dst.name}({src})"
    else:
        expr = f"ct.astype({src}, {g.const_param(dst)})"
    if dst is D.tfloat32:
        # tfloat32 has no NumPy dtype, so no array holds it: convert straight back
        expr, dst = f"({expr}).astype(ct.float32)", D.float32
        tol = narrowed(tol, D.tfloat32, D.float32)
    var = Var(g.name("t"), dst, x.shape, tol)
    if x.shadow is not None:
        var.shadow = g.name("sh")
        g.emit(f"{var.shadow} = {x.shadow}")
    g.use(x)
    g.define(var, expr)
    g.feature("astype", x.dtype.name, dst.name)
    return True


def bitcast(g: Gen) -> bool:
    """The bits of an exact value read as an integer dtype of the same width
    (float or integer source): integer results compare bit for bit, so the
    bits of a float (-0.0, infinities) must match the interpreter's. NaNs are
    replaced by 0 first: the payload of a NaN that arithmetic or padding
    produces is unspecified (the GPU's is 0x7fffffff, NumPy's 0x7fc00000)."""
    x = g.pick(lambda v: v.tol.kind == "exact" and not v.dtype.is_bool
               and v.dtype.name not in ("tfloat32", "float4_e2m1fn"))
    if x is None:
        return False
    choices = [d for d in (D.int8, D.uint8, D.int16, D.uint16, D.int32, D.uint32, D.int64,
                           D.uint64) if d.itemsize == x.dtype.itemsize and d is not x.dtype]
    dst = g.rng.choice(choices)
    var = Var(g.name("t"), dst, x.shape, x.tol)
    g.use(x)
    src = f"ct.where(ct.isnan({x.name}), 0, {x.name})" if x.dtype.is_float else x.name
    g.define(var, f"ct.bitcast({src}, ct.{dst.name})")
    g.feature("bitcast", x.dtype.name, dst.name)
    return True


def _axes(g: Gen, rank: int) -> tuple[str, tuple[int, ...]]:
    """(source of an axis argument, the normalized axes)."""
    r = g.rng.random()
    if r < 0.3:
        return "None", tuple(range(rank))
    if r < 0.75 or rank < 2:
        a = g.rng.randrange(rank)
        return str(a - rank if g.chance(0.3) else a), (a,)
    axes = tuple(sorted(g.rng.sample(range(rank), 2)))
    return str(axes), axes


def reduce(g: Gen) -> bool:
    fn = g.rng.choice(("sum", "prod", "max", "min", "sum", "max"))
    x = g.pick(lambda v: v.shape and readable(v, "reduce"))
    if x is None:
        return False
    axis_src, axes = _axes(g, len(x.shape))
    keepdims = g.chance(0.3)
    dtype = D.int32 if x.dtype.is_bool and fn in ("sum", "prod") else x.dtype
    terms = math.prod(x.shape[a] for a in axes)
    shape = tuple((1 if i in axes else s) for i, s in enumerate(x.shape) if keepdims or
                  i not in axes)
    kw = f", keepdims=True" if keepdims else ""
    var = Var(g.name("t"), dtype, shape, reduce_tol(fn, dtype, terms))
    if var.tol.kind in ("sum", "prod"):
        var.shadow = g.name("sh")
        ax = f"ct.abs({x.name}).astype(ct.float64)"
        if fn == "sum":
            g.emit(f"{var.shadow} = ct.sum({ax}, axis={axis_src}{kw})")
        else:
            t = g.name("sh")
            g.emit(f"{t} = {ax}")
            g.emit(f"{var.shadow} = ct.max(ct.maximum({t}, 1.0 / {t}), axis={axis_src}{kw})")
    if g.chance(0.3):
        arg = "" if axis_src == "None" and not keepdims else (
            axis_src if not keepdims else f"axis={axis_src}{kw}")
        expr = f"{x.name}.{fn}({arg})"
    else:
        expr = f"ct.{fn}({x.name}, axis={axis_src}{kw})"
    g.use(x)
    g.define(var, expr)
    g.feature("reduce", fn, x.dtype.name)
    return True


def argreduce(g: Gen) -> bool:
    fn = g.rng.choice(("argmax", "argmin"))
    x = g.pick(lambda v: v.shape and readable(v, "reduce"))
    if x is None:
        return False
    rank = len(x.shape)
    keepdims = g.chance(0.3)
    if g.chance(0.3):
        axis, shape = "None", ((1,) * rank if keepdims else ())
    else:
        a = g.rng.randrange(rank)
        axis = str(a)
        shape = tuple(1 if i == a else s for i, s in enumerate(x.shape) if keepdims or i != a)
    kw = ", keepdims=True" if keepdims else ""
    expr = (f"{x.name}.{fn}({'' if axis == 'None' and not kw else 'axis=' + axis + kw})"
            if g.chance(0.3) else f"ct.{fn}({x.name}, axis={axis}{kw})")
    g.use(x)
    g.define(Var(g.name("t"), D.int32, shape), expr)
    g.feature("argreduce", fn, x.dtype.name)
    return True


def _factor(g: Gen, n: int, rank: int) -> tuple[int, ...]:
    dims = []
    for _ in range(rank - 1):
        d = g.rng.choice([d for d in (1, 2, 4, 8, 16, 32) if n % d == 0])
        dims.append(d)
        n //= d
    return tuple(dims) + (n,)


def shape_op(g: Gen) -> bool:
    x = g.pick(lambda v: v.dtype in ARITH + STORAGE_ONLY)
    if x is None:
        return False
    rank = len(x.shape)
    kind = g.rng.choice(("reshape", "permute", "broadcast", "expand", "item"))
    if kind == "reshape":
        shape = _factor(g, x.size, g.rng.choice((1, 2, 3)))
        dims = list(shape)
        if len(dims) > 1 and g.chance(0.15):
            dims[g.rng.randrange(len(dims))] = -1
        spec = str(tuple(dims))
        r = g.rng.random()
        code = (f"{{}}.reshape({spec})" if r < 0.4 else f"ct.reshape({{}}, {spec})" if r < 0.8
                else f"{{}}.reshape({spec[1:-1].rstrip(',')})")
    elif kind == "permute":
        if rank < 2:
            return False
        perm = tuple(g.rng.sample(range(rank), rank))
        if perm == tuple(range(rank)):
            perm = tuple(reversed(range(rank)))
        shape = tuple(x.shape[p] for p in perm)
        r = g.rng.random()
        if rank == 2 and r < 0.3:
            code = "{}.T" if g.chance(0.5) else "ct.transpose({})"
        elif rank == 3 and r < 0.3:
            a0, a1 = g.rng.sample(range(3), 2)
            perm = list(range(3))
            perm[a0], perm[a1] = perm[a1], perm[a0]
            shape = tuple(x.shape[p] for p in perm)
            code = f"ct.transpose({{}}, {a0}, {a1})"
        else:
            code = f"ct.permute({{}}, {perm})" if g.chance(0.6) else f"{{}}.permute({perm})"
    elif kind == "broadcast":
        dims = [d if d != 1 or g.chance(0.3) else g.rng.choice((2, 4, 8)) for d in x.shape]
        if len(dims) < 3 and g.chance(0.4):
            dims.insert(0, g.rng.choice((1, 2, 4)))
        shape = tuple(dims)
        if shape == x.shape or math.prod(shape) > g.max_elems:
            return False
        code = (f"ct.broadcast_to({{}}, {shape})" if g.chance(0.7)
                else f"{{}}.broadcast_to({shape})")
    elif kind == "expand":
        if rank >= 3:
            return False
        axis = g.rng.randint(0, rank)
        shape = x.shape[:axis] + (1,) + x.shape[axis:]
        if rank >= 1 and g.chance(0.5):
            items = [":"] * rank
            items.insert(axis, "None")
            code = "{}[" + ", ".join(items) + "]"
        else:
            code = f"ct.expand_dims({{}}, {axis})"
    else:
        if x.size != 1 or not x.shape:
            return False
        shape = ()
        code = "{}.item()"
    var = Var(g.name("t"), x.dtype, shape, x.tol, x.product)
    if x.shadow is not None:
        var.shadow = g.name("sh")
        g.emit(f"{var.shadow} = {code.format(x.shadow)}")
    g.use(x)
    g.define(var, code.format(x.name))
    g.feature("shape", kind)
    return True


def factory(g: Gen) -> bool:
    kind = g.rng.choice(("arange", "full", "zeros", "ones", "full_scalar"))
    if kind == "arange":
        n = g.rng.choice((1, 2, 4, 8, 16, 32, 64))
        dt = g.rng.choice((D.int32, D.int32, D.int64, D.uint8, D.int16, D.float32, D.float16))
        expr = f"ct.arange({n})" if dt is D.int32 and g.chance(0.5) else \
            f"ct.arange({n}, dtype=ct.{dt.name})"
        shape = (n,)
    else:
        shape = g.shape()
        dt = g.dtype()
        if kind == "full":
            expr = f"ct.full({shape}, {literal(loose_const(g, dt))}, ct.{dt.name})"
        elif kind == "full_scalar":
            s = g.pick(lambda v: v.is_scalar and carrier_ok(v) and v.dtype in ARITH)
            if s is None:
                return False
            dt = s.dtype
            expr = f"ct.full({shape}, {s.name})"
            g.use(s)
        else:
            expr = f"ct.{kind}({shape}, dtype=ct.{dt.name})" if g.chance(0.5) else \
                f"ct.{kind}({shape}, ct.{dt.name})"
    g.define(Var(g.name("t"), dt, shape), expr)
    g.feature("factory", kind)
    return True


def same_type_update(g: Gen, t: Var) -> Optional[tuple[str, Tol, bool]]:
    """(expression, tolerance, product) of a value with exactly t's dtype and
    shape computed from `t` (for if-branches and loop-carried variables)."""
    dt = t.dtype
    r = g.rng.random()
    if r < 0.55:
        ops = ["bitand", "bitor", "bitxor", "minimum", "maximum"]
        if not dt.is_bool:
            ops = ["add", "sub", "mul", "minimum", "maximum"] + (ops[:3] if dt in INTS else [])
        fn = g.rng.choice(ops)
        if not readable(t, fn):
            return None
        other = g.pick(lambda v: v is not t and v.dtype is dt and readable(v, fn)
                       and broadcast(v.shape, t.shape) == t.shape)
        if other is not None and g.chance(0.6):
            src, otol, oprod = other.name, other.tol, other.product
            g.use(other)
        else:
            c = loose_const(g, dt) if not dt.is_integer else g.rng.choice(
                [c for c in (1, 2, 3, -1, 7) if fits(c, dt)])
            if dt.is_integer and isinstance(c, float):
                c = 1
            src, otol, oprod = literal(c), EXACT, False
        expr = _binary_expr(g, fn, t.name, src, dt)
        tol = join(t.tol, otol)
        if fn in ("minimum", "maximum") and dt.is_float:
            tol = ZSIGN
        product = dt in (D.float32, D.float64) and fn == "mul"
        return expr, tol, product
    if r < 0.7 and dt.is_integer or dt.is_bool and r < 0.7:
        return f"~{t.name}", t.tol, False
    if r < 0.8:
        return (f"-{t.name}" if not dt.is_bool else f"~{t.name}"), t.tol, t.product
    if r < 0.9:
        cond = g.pick(lambda v: v.dtype.is_bool and v.tol.kind == "exact"
                      and broadcast(v.shape, t.shape) == t.shape)
        other = g.pick(lambda v: v is not t and v.dtype is dt and carrier_ok(v)
                       and broadcast(v.shape, t.shape) == t.shape)
        if cond is not None and other is not None:
            g.use(cond, other)
            return f"ct.where({cond.name}, {t.name}, {other.name})", join(t.tol, other.tol), \
                t.product or other.product
    return t.name, t.tol, t.product


OPS = {
    "binary": (30, binary), "compare": (8, compare), "unary": (10, unary), "where": (6, where),
    "astype": (8, astype), "bitcast": (2, bitcast), "reduce": (7, reduce), "argreduce": (3, argreduce),
    "shape": (10, shape_op), "factory": (3, factory), "fold": (2, fold_check),
    **memops.OPS, **scans.OPS, **atomics.OPS,
}
