"""A second oracle, inside the kernel: constant folding against run time.

The front end folds ops on strictly typed constants (`ct.float16(a) * ct.float16(b)`,
`ct.bfloat16(x)`) in Python; the interpreter and the GPU compute the same op at
run time. Both sides of the differential oracle see only the folded value, so a
folding bug (a constant rounded twice) is invisible to it. Here the generator
emits the op twice, on constants and on scalar parameters holding the same
values, and stores `folded == computed` (or both NaN) into an output that must
be all True.
"""
from __future__ import annotations

import math
from typing import Optional

from ...language import dtypes as D
from ...language.dtypes import DType
from . import data
from .generate import Gen
from .model import Param, Var

__all__ = ["fold_check"]

_BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>",
           "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
_UNARY = {"neg": "-{}", "abs": "abs({})", "invert": "~{}", "sqrt": "ct.sqrt({})",
          "floor": "ct.floor({})", "ceil": "ct.ceil({})"}
_INT_ONLY = ("bitand", "bitor", "bitxor", "lshift", "rshift", "invert")
_FLOAT_ONLY = ("sqrt", "floor", "ceil")


def _source(value, dtype: DType) -> str:
    """A Python literal of `value` (ints exactly, floats round-tripping)."""
    if dtype.is_bool:
        return repr(bool(value))
    if dtype.is_integer:
        return repr(int(value))
    f = float(value)
    if math.isnan(f):
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else '(-float("inf"))'
    return f"({f!r})" if f < 0 or (f == 0 and math.copysign(1, f) < 0) else repr(f)


def _param(g: Gen, value, dtype: DType) -> str:
    """A run-time scalar holding `value` as `dtype`: a parameter of that dtype,
    or a float32 one converted (an ml_dtypes scalar is refused as an argument)."""
    name = g.name("s")
    exact_in = dtype if dtype.numpy_dtype.kind in "biuf" else D.float32
    g.params.append(Param(name, "scalar", value=exact_in.numpy_dtype.type(value)))
    g.scopes[0].append(Var(name, exact_in, ()))
    return name if exact_in is dtype else f"{name}.astype(ct.{dtype.name})"


def _operands(g: Gen, dtype: DType, fn: str) -> Optional[tuple]:
    a = data.scalar(g.np, dtype, 0.3)
    b = data.scalar(g.np, dtype, 0.3)
    if dtype.is_integer:
        if fn in ("floordiv", "mod") and int(b) == 0:
            b = dtype.numpy_dtype.type(1)
        if fn in ("lshift", "rshift"):
            b = dtype.numpy_dtype.type(int(b) % dtype.bits)
    return a, b


def fold_check(g: Gen) -> bool:
    r = g.rng.random()
    if r < 0.4:
        # a conversion of a wide value, folded from a literal and done at run time
        dst = g.dtype(storage=0.3, floats_only=g.chance(0.7))
        src = g.rng.choice((D.float64, D.float64, D.int64, D.uint64, D.float32))
        value = data.scalar(g.np, src, 0.3)
        if src.is_float and dst.is_float and g.chance(0.5):
            target = dst.name if dst is not D.float64 else "float32"
            if dst is not D.float4_e2m1fn or src is not D.float64:
                value = src.numpy_dtype.type(data.tie(g.np, src, target))
        folded = f"ct.{dst.name}({_source(value, src)})"
        computed = f"{_param(g, value, src)}.astype(ct.{dst.name})"
        if dst.is_integer and src.is_float:
            return False   # NaN/inf/out of range float -> int is unspecified
        if not dst.arithmetic:
            folded = f"ct.astype({folded}, ct.float32)"
            computed = f"({computed}).astype(ct.float32)"
        what = f"astype.{src.name}.{dst.name}"
    elif r < 0.8:
        dtype = g.dtype()
        fn = g.rng.choice(tuple(_BINARY))
        if (fn in _INT_ONLY and dtype.is_float) or (dtype.is_bool and fn not in (
                "bitand", "bitor", "bitxor", "eq", "ne", "lt", "le")):
            return False
        a, b = _operands(g, dtype, fn)
        op = _BINARY[fn]
        folded = f"ct.{dtype.name}({_source(a, dtype)}) {op} ct.{dtype.name}({_source(b, dtype)})"
        computed = f"{_param(g, a, dtype)} {op} {_param(g, b, dtype)}"
        what = f"binary.{fn}.{dtype.name}"
    else:
        dtype = g.dtype()
        fn = g.rng.choice(tuple(_UNARY))
        if (fn in _INT_ONLY and dtype.is_float) or (fn in _FLOAT_ONLY and not dtype.is_float):
            return False
        a = data.scalar(g.np, dtype, 0.3)
        folded = _UNARY[fn].format(f"ct.{dtype.name}({_source(a, dtype)})")
        computed = _UNARY[fn].format(_param(g, a, dtype))
        what = f"unary.{fn}.{dtype.name}"
    f, c, ok = g.name("f"), g.name("r"), g.name("ok")
    g.emit(f"{f} = {folded}")
    g.emit(f"{c} = {computed}")
    g.emit(f"{ok} = ({f} == {c}) | (({f} != {f}) & ({c} != {c}))")
    out = g.assert_array()
    g.emit(f"ct.store({out}, index=(bl,), tile={ok})")
    g.feature("fold", what)
    return True
