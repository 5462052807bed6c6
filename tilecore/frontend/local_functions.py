"""Functions written inside tile code: `lambda a, b: a + b`, and `def f(a, b):`
nested in a kernel or a tile function, most often as the combining function
of scan() and reduce().

Evaluating the lambda (or running the def statement) gives a `LocalFunction`;
calling it lowers its body in place, like an inlined tile function, with its
parameters bound to the arguments and every other name resolved in the
function it was written in, at call time (as Python's closures do).
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from ..errors import Loc, TileSyntaxError, TileTypeError
from .values import Const, FrontVal, Undefined

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["LocalFunction", "make_local_function", "as_local_function", "call_local_function"]


@dataclass(frozen=True, eq=False)
class LocalFunction:
    """A lambda or a nested def evaluated in tile code."""

    node: Union[ast.Lambda, ast.FunctionDef]
    definer: "Lowerer"             # the function body it appears in: where its names resolve
    signature: inspect.Signature   # its parameters, defaults evaluated at definition
    loc: Loc

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    def __repr__(self) -> str:
        return f"<function {self.name} at line {self.loc.line}>"


def make_local_function(lw: "Lowerer", node: Union[ast.Lambda, ast.FunctionDef]
                        ) -> LocalFunction:
    """The value of a lambda expression or a nested def (defaults evaluated
    now, as Python does)."""
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        raise TileSyntaxError("A decorated nested function is not supported in tile code",
                              lw.loc(node.decorator_list[0]))
    a = node.args
    if a.vararg is not None or a.kwarg is not None:
        raise TileSyntaxError("'*args' and '**kwargs' parameters of a nested function or a "
                              "lambda are not supported in tile code", lw.loc(node))
    P = inspect.Parameter
    positional = [(p, P.POSITIONAL_ONLY) for p in a.posonlyargs] + \
                 [(p, P.POSITIONAL_OR_KEYWORD) for p in a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [P(arg.arg, kind, default=P.empty if d is None else lw.expr(d))
              for (arg, kind), d in zip(positional, defaults)]
    params += [P(arg.arg, P.KEYWORD_ONLY, default=P.empty if d is None else lw.expr(d))
               for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
    return LocalFunction(node, lw, inspect.Signature(params), lw.loc(node))


def as_local_function(value: Any) -> Optional[LocalFunction]:
    """`value` as a LocalFunction (also when wrapped as a compile-time Const), else None."""
    if isinstance(value, Const):
        value = value.value
    return value if isinstance(value, LocalFunction) else None


def call_local_function(lw: "Lowerer", fn: LocalFunction, args: list, kwargs: dict,
                        loc: Loc) -> FrontVal:
    """Lower a call of `fn`: its body with the parameters bound to the arguments."""
    from .lower import MAX_INLINE_DEPTH, RETURN, Lowerer
    if lw.depth >= MAX_INLINE_DEPTH:
        raise TileSyntaxError(f"Tile function calls nest deeper than {MAX_INLINE_DEPTH} levels "
                              f"at the call to {fn.name}() (recursion must end at compile "
                              f"time)", loc)
    try:
        bound = fn.signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TileTypeError(f"Invalid call to {fn.name}(): {e}", loc) from None
    bound.apply_defaults()
    scope = {k: v for k, v in fn.definer.scope.items() if k != RETURN}
    scope.update(bound.arguments)
    inner = Lowerer(lw.b, fn.definer.fn, scope, loc, lw.depth + 1)
    with lw.b.calling(None):
        if isinstance(fn.node, ast.Lambda):
            return inner.expr(fn.node.body)
        inner.lower_body(fn.node.body)
    result = inner.scope.get(RETURN, Const(None))
    if isinstance(result, Undefined):
        raise TileSyntaxError(f"Not every path through {fn.name}() returns a value", loc)
    return result
