"""User operators that are a well-known operator written out: `lambda a, b: a + b`,
`def f(x, y): return y * x`, `lambda a, b: ct.maximum(a, b)` on integers.

DeviceScan folds a user operator's look-back in order, as (ok, value) pairs,
because it may be neither commutative nor have a known identity; a
well-known operator combines the look-back's words lane by lane and folds
once. For an 8-byte `a + b` that order cost 5-7% of a 2^27 scan (H200). An
operator recognized here runs as the well-known one in the user operator's
own accumulator type, so it computes the same values: + and * are
commutative, integers are exact in any association, and float sums were
never promised one association (only a fixed one). Recognized: one `return`
of `p OP q` or `q OP p` for OP in + * & | ^ (the bitwise ones on integers),
or of minimum/maximum (tilecore's, or Python's min/max) of p and q on
integers (floats' built-in min/max ignore NaN, which the user's may not); and
only for 4- and 8-byte accumulators (narrower ones keep their per-step
rounding of the user operator).
"""
from __future__ import annotations

import ast
import builtins
import functools
import types
from typing import Any, Optional

from ..errors import TileSyntaxError
from ..frontend.source import parse_function
from ..kernel import TileFunction
from ..language import ops as L
from ..language.dtypes import DType

__all__ = ["recognized_operator"]

_BINARY = {ast.Add: "add", ast.Mult: "mul", ast.BitAnd: "and", ast.BitOr: "or",
           ast.BitXor: "xor"}
_CALLS = {L.minimum: "min", L.maximum: "max", builtins.min: "min", builtins.max: "max"}
_INTEGER_ONLY = ("and", "or", "xor", "min", "max")


def recognized_operator(op: Any, acc: DType) -> Optional[str]:
    """The well-known operator ("add", "mul", "and", "or", "xor", "min",
    "max") that the user operator `op` computes in accumulator `acc`, or None
    when it is anything else (or its source cannot be read: its compilation
    reports that)."""
    if acc.is_bool or acc.itemsize < 4 or not (acc.is_integer or acc.is_float):
        return None
    fn = op.pyfunc if isinstance(op, TileFunction) else op
    if not isinstance(fn, types.FunctionType):
        return None     # (callable objects, which may not hash; a @tilecore.kernel)
    return _recognized_function(fn, acc)


@functools.lru_cache(maxsize=1024)
def _recognized_function(fn: types.FunctionType, acc: DType) -> Optional[str]:
    try:
        parsed = parse_function(fn)
    except TileSyntaxError:
        return None
    params = _two_params(parsed.tree.args)
    expr = _returned(parsed.tree.body)
    if params is None or expr is None:
        return None
    name = _binary_name(expr, params)
    if name is None:
        name = _call_name(expr, params, parsed.globals, parsed.closure)
    if name is None or (name in _INTEGER_ONLY and not acc.is_integer):
        return None
    return name


def _two_params(args: ast.arguments) -> Optional[set[str]]:
    """The two plain positional parameters' names, or None."""
    plain = args.posonlyargs + args.args
    if (len(plain) != 2 or args.vararg or args.kwarg or args.kwonlyargs
            or plain[0].arg == plain[1].arg):
        return None
    return {plain[0].arg, plain[1].arg}


def _returned(body: list[ast.stmt]) -> Optional[ast.expr]:
    """The expression of a body that is one `return` (after a docstring)."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return body[0].value
    return None


def _both_params(a: ast.expr, b: ast.expr, params: set[str]) -> bool:
    return (isinstance(a, ast.Name) and isinstance(b, ast.Name)
            and {a.id, b.id} == params)


def _binary_name(expr: ast.expr, params: set[str]) -> Optional[str]:
    if isinstance(expr, ast.BinOp) and _both_params(expr.left, expr.right, params):
        return _BINARY.get(type(expr.op))
    return None


def _call_name(expr: ast.expr, params: set[str], globals_: dict, closure: dict
               ) -> Optional[str]:
    if not (isinstance(expr, ast.Call) and len(expr.args) == 2 and not expr.keywords
            and _both_params(expr.args[0], expr.args[1], params)):
        return None
    target = _resolve(expr.func, globals_, closure)
    try:
        return _CALLS.get(target)
    except TypeError:   # unhashable
        return None


def _resolve(node: ast.expr, globals_: dict, closure: dict) -> Any:
    """What a name, or an attribute of a module, refers to (None if neither)."""
    if isinstance(node, ast.Name):
        for scope in (closure, globals_, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return None
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, globals_, closure)
        if isinstance(base, types.ModuleType):
            return getattr(base, node.attr, None)
    return None
