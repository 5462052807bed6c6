"""Operators and types of the reductions: which operators are well known, their
identities, and the accumulator rules (CUB's, documented in docs/algorithms.md).

- A well-known operator is one of "add", "mul", "min", "max", "and", "or",
  "xor", or the matching Python function (operator.add, operator.mul, min,
  max, operator.and_, operator.or_, operator.xor, tilecore.minimum,
  tilecore.maximum). Its kernels pad with its identity and use the tile
  language's own reductions. Floating-point min and max follow CUB's
  cuda::minimum / cuda::maximum, i.e. C's fmin / fmax: a NaN operand is
  ignored (the result is NaN only when both are NaN).
- Anything else callable is a user operator: a `def` function, a lambda or a
  `@tilecore.function` of two tiles, associative and commutative (as CUB
  requires for reductions), compiled into the kernels. `same_function` maps
  equal functions (a lambda written at a call in a loop is a new object every
  time) to one object, so that the plans and kernels made for the first are
  found again.
"""
from __future__ import annotations

import builtins
import functools
import operator
import types
from typing import Any, Optional

import numpy as np

from ..language import dtypes as D
from ..language import ops as L
from ..language.dtypes import DType

__all__ = ["WELL_KNOWN", "op_name", "same_function", "identity", "cxx_arithmetic", "work_dtype",
           "sum_accumulator", "op_accumulator", "check_operand_dtype", "NUMERIC", "scalar_dtype",
           "as_scalar"]

WELL_KNOWN = ("add", "mul", "min", "max", "and", "or", "xor")
_BY_FUNCTION = {operator.add: "add", operator.mul: "mul", builtins.min: "min",
                builtins.max: "max", operator.and_: "and", operator.or_: "or",
                operator.xor: "xor", L.minimum: "min", L.maximum: "max"}
_BITWISE = ("and", "or", "xor")

# dtypes the reductions take as input, output and accumulator
NUMERIC = (D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16, D.uint32, D.uint64,
           D.float16, D.bfloat16, D.float32, D.float64)


def op_name(op: Any, name: str = "op") -> Optional[str]:
    """The well-known name of `op`, None for a user function; TypeError for
    anything that is neither."""
    if isinstance(op, str):
        if op not in WELL_KNOWN:
            raise TypeError(f'Invalid argument "{name}": expected one of {list(WELL_KNOWN)} or a '
                            f"function of two tiles, got {op!r}")
        return op
    if not callable(op):
        raise TypeError(f'Invalid argument "{name}": expected one of {list(WELL_KNOWN)} or a '
                        f"function of two tiles, got {type(op).__name__}")
    try:
        return _BY_FUNCTION.get(op)
    except TypeError:   # the kernels made for an operator are found again by its hash
        raise TypeError(f'Invalid argument "{name}": expected one of {list(WELL_KNOWN)} or a '
                        f"function of two tiles, got an unhashable "
                        f"{type(op).__name__} object") from None


# (code, closure values, globals, defaults) -> the first function seen with them; and
# each function object seen -> that first one (the cached paths' lookup: one dict probe)
_SAME: dict = {}
_SEEN: dict = {}
_SAME_LIMIT = 4096


def same_function(f: Any) -> Any:
    """The first function seen with `f`'s code, closure values, globals and
    defaults (which is to say the same compiled kernels), or `f` itself when it
    is no plain function or something it closes over cannot be hashed. A
    function object is matched once; later calls with it cost one dict probe."""
    if type(f) is not types.FunctionType:
        return f
    first = _SEEN.get(f)
    if first is not None:
        return first
    try:
        cells = tuple(c.cell_contents for c in f.__closure__) if f.__closure__ else ()
        kw = tuple(sorted(f.__kwdefaults__.items())) if f.__kwdefaults__ else ()
        key = (f.__code__, cells, id(f.__globals__), f.__defaults__, kw)
        first = _SAME.get(key)
    except (TypeError, ValueError):   # unhashable, or a closure cell not filled yet
        return f
    if len(_SEEN) >= _SAME_LIMIT:
        _SAME.clear()
        _SEEN.clear()
    if first is None:
        first = _SAME[key] = f
    _SEEN[f] = first
    return first


def check_operand_dtype(op: str, dtype: DType, name: str) -> None:
    if op in _BITWISE and not dtype.is_integer:
        raise TypeError(f'Invalid argument "{name}": operator "{op}" needs an integer dtype, '
                        f"got {dtype.name}")


def identity(op: str, dtype: DType):
    """The identity of a well-known operator in `dtype` (a Python number).
    min/max of floats: NaN, the identity of fmin/fmax."""
    if op == "add" or op in ("or", "xor"):
        return 0.0 if dtype.is_float else 0
    if op == "mul":
        return 1.0 if dtype.is_float else 1
    if op == "and":
        return dtype.max if not dtype.signed else -1
    if op == "min":
        return float("nan") if dtype.is_float else dtype.max
    if op == "max":
        return float("nan") if dtype.is_float else dtype.min
    raise ValueError(op)


def _promoted(d: DType) -> DType:
    """C++ integer promotion: integers narrower than int promote to int."""
    return D.int32 if (d.is_integer or d.is_bool) and d.itemsize < 4 else d


def cxx_arithmetic(a: DType, b: DType) -> DType:
    """The type of `a + b` in C++ (usual arithmetic conversions) for CUDA's
    types: the result type CUB's accumulator takes for plus."""
    if a.is_float or b.is_float:
        floats = [d for d in (a, b) if d.is_float]
        if len(floats) == 1 or floats[0] is floats[1]:
            return floats[0]
        if floats[0].itemsize != floats[1].itemsize:
            return max(floats, key=lambda d: d.itemsize)
        return D.float32  # __half with __nv_bfloat16: both convert to float
    a, b = _promoted(a), _promoted(b)
    if a is b:
        return a
    if a.signed == b.signed:
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if not a.signed else (b, a)
    return u if u.itemsize >= s.itemsize else s


@functools.lru_cache(maxsize=None)
def sum_accumulator(in_dtype: DType, out_dtype: DType) -> DType:
    """DeviceReduce.sum's accumulator: CUB's `decltype(out{} + in)`, except that
    float16/bfloat16 accumulators accumulate in float32 (rounded once, to the
    output) as every tilecore reduction of narrow floats does."""
    acc = cxx_arithmetic(in_dtype, out_dtype)
    return D.float32 if acc in (D.float16, D.bfloat16) else acc


_SUM_LIKE = ("add", "mul", "and", "or", "xor")


def work_dtype(acc: DType, op: Any) -> DType:
    """The dtype the kernels combine and compare accumulators of `acc` in under
    the well-known operator `op` (arg_min/arg_max pass "min"/"max"): float32 for
    min and max of floats narrower than it, else `acc`. Widening such a float is
    exact and keeps its order (and NaNs), so every result is the one the value
    type gives, while a compare of 16-bit floats costs conversions per item on
    the GPU (a bfloat16 max ran at 81% of the sum's bandwidth, arg_max at 65%,
    H200)."""
    if op in ("min", "max") and acc.is_float and acc.itemsize < 4:
        return D.float32
    return acc


def op_accumulator(values: DType, name: Optional[str]) -> DType:
    """The accumulator of op(value, value), as CUB's scans and reduce-by-key
    take it: the sum's for add/mul/and/or/xor (integers narrower than int in
    int32, narrow floats in float32), the value type for min/max and user
    operators."""
    return sum_accumulator(values, values) if name in _SUM_LIKE else values


def scalar_dtype(value: Any) -> Optional[DType]:
    """The dtype of a typed scalar (NumPy / ml_dtypes scalar or 0-d / 1-element
    NumPy array), None for a Python number."""
    if isinstance(value, (np.generic, np.ndarray)):
        return D.from_numpy(value.dtype)
    return None


def as_scalar(value: Any, dtype: DType, name: str):
    """`value` as a NumPy scalar of `dtype` (the kernels' init argument)."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f'Invalid argument "{name}": expected a scalar or a 1-element '
                             f"array, got an array of shape {value.shape}")
        value = value.reshape(()).item() if value.dtype.kind != "V" else value.reshape(())[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.generic)):
        raise TypeError(f'Invalid argument "{name}": expected a number, got '
                        f"{type(value).__name__}")
    if dtype.is_integer and isinstance(value, (float, np.floating)):
        raise TypeError(f'Invalid argument "{name}": expected an integer for the {dtype.name} '
                        f"accumulator, got {value!r}")
    if dtype.is_integer and not dtype.min <= int(value) <= dtype.max:
        raise ValueError(f'Invalid argument "{name}": {value} is out of the range of the '
                         f"{dtype.name} accumulator")
    return dtype.numpy_dtype.type(value)
