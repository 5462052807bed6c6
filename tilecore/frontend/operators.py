"""The functions of Python's `operator` module in tile code: `operator.add(a, b)`
is `a + b`, and so on, so that they can be passed where tile code takes a
function (the combining function of scan() and reduce()).

HANDLERS has calls.py's form: function -> (signature, handler).
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable

from ..errors import Loc
from .values import FrontVal

__all__ = ["HANDLERS"]

_BINARY = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
           operator.truediv: "truediv", operator.floordiv: "floordiv", operator.mod: "mod",
           operator.pow: "pow", operator.and_: "bitand", operator.or_: "bitor",
           operator.xor: "bitxor", operator.lshift: "lshift", operator.rshift: "rshift"}
_COMPARE = {operator.eq: "eq", operator.ne: "ne", operator.lt: "lt", operator.le: "le",
            operator.gt: "gt", operator.ge: "ge"}
_UNARY = {operator.neg: "neg", operator.invert: "invert", operator.inv: "invert",
          operator.abs: "abs"}

_P = inspect.Parameter
_TWO = inspect.Signature([_P("a", _P.POSITIONAL_ONLY), _P("b", _P.POSITIONAL_ONLY)])
_ONE = inspect.Signature([_P("a", _P.POSITIONAL_ONLY)])

Handler = Callable[[Any, dict, Loc], FrontVal]


def _binary(fn: str) -> Handler:
    return lambda lw, a, loc: lw.b.binary(fn, a["a"], a["b"], loc)


def _compare(fn: str) -> Handler:
    return lambda lw, a, loc: lw.b.compare(fn, a["a"], a["b"], loc)


def _unary(fn: str) -> Handler:
    return lambda lw, a, loc: lw.b.unary(fn, a["a"], loc)


def _pos(lw, a: dict, loc: Loc) -> FrontVal:
    return a["a"]


HANDLERS: dict[Any, tuple[inspect.Signature, Handler]] = {
    **{f: (_TWO, _binary(fn)) for f, fn in _BINARY.items()},
    **{f: (_TWO, _compare(fn)) for f, fn in _COMPARE.items()},
    **{f: (_ONE, _unary(fn)) for f, fn in _UNARY.items()},
    operator.pos: (_ONE, _pos),
}
