"""From a kernel and the kinds of its arguments to one typed IR Function.

A specialization is fixed by each parameter's kind: an array (dtype, rank),
a run-time scalar (dtype), or a constant-embedded value. `lower_kernel`
turns the kernel's Python source into IR for one such signature.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence, Union

from ..errors import Loc
from ..ir.core import Block, Function, Param
from ..ir.types import ArrayType, TileType
from ..language import dtypes as D
from ..language.dtypes import DType
from .builder import Builder
from .lower import Lowerer, wrap_global
from .source import parse_function

__all__ = ["ArrayArg", "ScalarArg", "ConstArg", "ArgKind", "lower_kernel", "arg_key",
           "needs_wide_index", "WIDE_INDEX_BOUND"]


@dataclass(frozen=True)
class ArrayArg:
    """An array argument: dtype, rank and whether its shape and strides need
    64-bit indices (see `needs_wide_index`)."""

    dtype: DType
    ndim: int
    wide: bool = False


WIDE_INDEX_BOUND = 2**31  # a dimension or |stride| from here on needs 64-bit indices


def needs_wide_index(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether an array of `shape` and element `strides` must be specialized
    with 64-bit shape and stride values (a dimension or a stride beyond int32)."""
    return any(n >= WIDE_INDEX_BOUND for n in shape) or \
        any(s >= WIDE_INDEX_BOUND or s <= -WIDE_INDEX_BOUND for s in strides)


@dataclass(frozen=True)
class ScalarArg:
    dtype: DType


@dataclass(frozen=True)
class ConstArg:
    value: Any


ArgKind = Union[ArrayArg, ScalarArg, ConstArg]


def arg_key(kind: ArgKind) -> tuple:
    """Hashable, process-independent description of one argument kind."""
    if isinstance(kind, ArrayArg):
        return ("array", kind.dtype.name, kind.ndim) + (("wide",) if kind.wide else ())
    if isinstance(kind, ScalarArg):
        return ("scalar", kind.dtype.name)
    return ("const", type(kind.value).__name__, _const_repr(kind.value))


def _const_repr(v: Any) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, tuple):
        return "(" + ",".join(_const_repr(x) for x in v) + ")"
    if type(v) is int and v.bit_length() > 1024:  # Python prints no int of over 4300 digits
        return hex(v)
    return repr(v)


def lower_kernel(pyfunc: Any, kinds: list[ArgKind]) -> Function:
    """Typed IR of `pyfunc` specialized for `kinds` (one per Python parameter)."""
    parsed = parse_function(pyfunc)
    params = list(inspect.signature(pyfunc).parameters)
    b = Builder()
    body = Block()
    scope = {}
    ir_params = []
    for i, (name, kind) in enumerate(zip(params, kinds)):
        if isinstance(kind, ConstArg):
            scope[name] = wrap_global(kind.value)
            continue
        t = ArrayType(kind.dtype, kind.ndim, D.int64 if kind.wide else D.int32) \
            if isinstance(kind, ArrayArg) \
            else TileType(kind.dtype, ())
        v = b.new_value(t, name)
        scope[name] = v
        ir_params.append(Param(name, v, i))
    loc = Loc(parsed.filename, parsed.tree.lineno + parsed.line_offset, parsed.col_offset,
              None, parsed.name)
    with b.block(body):
        Lowerer(b, parsed, scope, None, 0, is_kernel=True).lower_body(parsed.tree.body)
    return Function(parsed.name, ir_params, body, loc, b.next_id)
