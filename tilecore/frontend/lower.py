"""Python AST -> typed tile IR: statements, expressions and control flow.

One `Lowerer` per (inlined) Python function. Names map to front-end values
in a flat scope dict; control flow is turned into structured IR (`if`,
`for`, `while`) whose results re-bind the names assigned inside. Calls to
tilecore functions go to the handlers in `calls`, methods to `methods`, and
calls to other Python functions are inlined as tile functions.
"""
from __future__ import annotations

import ast
import builtins
import inspect
from typing import Any, Optional

from ..errors import Loc, TileSyntaxError, TileTypeError, TileValueError
from ..ir.core import Value
from ..language import dtypes as D
from .builder import Builder, describe
from .folding import INT_BITS, check_int_bound
from .source import ParsedFunction, parse_function
from .values import BoundMethod, Const, FrontVal, TupleVal, Undefined
from . import control
from .calls import call_object
from .local_functions import as_local_function, call_local_function, make_local_function
from .methods import call_method, get_attribute, subscript

__all__ = ["Lowerer", "RETURN"]

RETURN = "__return__"
MAX_INLINE_DEPTH = 32

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bitand",
           ast.BitOr: "bitor", ast.BitXor: "bitxor", ast.LShift: "lshift",
           ast.RShift: "rshift"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
           ast.GtE: "ge"}


# Friendly names of common constructs outside the subset (the rest: "The statement 'X'").
_UNSUPPORTED = {
    "Try": "Exception handling ('try')", "TryStar": "Exception handling ('try')",
    "Raise": "'raise'", "With": "'with'", "AsyncWith": "'async with'",
    "AsyncFor": "'async for'", "ListComp": "A list comprehension",
    "SetComp": "A set comprehension", "DictComp": "A dict comprehension",
    "GeneratorExp": "A generator expression", "Dict": "A dict", "Set": "A set",
    "JoinedStr": "An f-string", "Yield": "'yield'", "YieldFrom": "'yield from'",
    "Await": "'await'", "NamedExpr": "The assignment expression ':='",
    "Global": "'global'", "Nonlocal": "'nonlocal'", "Delete": "'del'",
    "Import": "'import'", "ImportFrom": "'import'",
    "AsyncFunctionDef": "A nested function definition", "ClassDef": "A class definition",
    "Match": "'match'", "Starred": "Unpacking with '*' here", "Slice": "A slice here",
}


class Lowerer:
    """Lowers one Python function body into the builder's current block."""

    def __init__(self, builder: Builder, fn: ParsedFunction, scope: dict[str, FrontVal],
                 caller: Optional[Loc] = None, depth: int = 0, is_kernel: bool = False):
        self.b = builder
        self.fn = fn
        self.scope = scope
        self.caller = caller
        self.depth = depth
        self.is_kernel = is_kernel
        self.loops: list[control.LoopFrame] = []

    # --- helpers ------------------------------------------------------------------------
    def loc(self, node: ast.AST) -> Loc:
        return self.fn.loc(node, self.caller)

    def syntax_error(self, what: str, node: ast.AST):
        return TileSyntaxError(f"{what} is not supported in tile code", self.loc(node))

    def unsupported(self, node: ast.AST):
        """The error for a statement or expression outside the tile-code subset."""
        kind = type(node).__name__
        what = _UNSUPPORTED.get(kind)
        if what is None:
            what = f"The {'statement' if isinstance(node, ast.stmt) else 'expression'} '{kind}'"
        return self.syntax_error(what, node)

    # --- statements ---------------------------------------------------------------------
    def lower_body(self, stmts: list[ast.stmt]) -> Optional[str]:
        """Lower a statement list; returns how it ended: None (falls through),
        'return', 'break' or 'continue' (the rest would be dead code)."""
        i = 0
        while i < len(stmts):
            stmt = stmts[i]
            rest = stmts[i + 1:]
            if isinstance(stmt, ast.If) and rest and control.returns_in_one_branch(stmt):
                # `if c: return a` followed by more code: the rest runs on the other branch.
                stmt = control.fold_rest_into_if(stmt, rest)
                rest = []
                stmts = stmts[:i] + [stmt]
            ended = self.lower_stmt(stmt)
            if ended is not None:
                return ended
            i += 1
        return None

    def lower_stmt(self, node: ast.stmt) -> Optional[str]:
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        try:
            return method(node)
        except RecursionError:   # deeper than `deep.run_deep` makes room for
            raise TileSyntaxError("This statement nests expressions too deeply for the tile "
                                  "compiler (more levels than Python itself compiles at the "
                                  "current recursion limit)", self.loc(node)) from None

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        self.expr(node.value)
        return None

    def stmt_Pass(self, node) -> None:
        return None

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value, node)
        return None

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return None
        self.assign(node.target, self.expr(node.value), node)
        return None

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise TileSyntaxError("Augmented assignment is only supported to a variable name "
                                  "(tiles and arrays are immutable in tile code; use "
                                  "tilecore.store to write an array)", self.loc(node.target))
        current = self.lookup(node.target.id, node.target)
        value = self.binop(type(node.op), current, self.expr(node.value), node)
        self.scope[node.target.id] = value
        return None

    def assign(self, target: ast.expr, value: FrontVal, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, Value) and not value.hint:
                value.hint = target.id
            self.scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                if isinstance(elt, ast.Starred):
                    raise TileSyntaxError("'*' in an assignment target: starred assignment is "
                                          "not supported in tile code (unpack into one name "
                                          "per item, or index the tuple)", self.loc(elt))
            if not isinstance(value, TupleVal):
                raise TileTypeError(f"Cannot unpack {describe(value)} into "
                                    f"{len(target.elts)} names", self.loc(node))
            if len(value.items) != len(target.elts):
                raise TileValueError(f"Cannot unpack a tuple of {len(value.items)} item(s) into "
                                     f"{len(target.elts)} names", self.loc(node))
            for t, v in zip(target.elts, value.items):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            raise TileSyntaxError("Item assignment is not supported: tiles are immutable and "
                                  "arrays are written with tilecore.store or tilecore.scatter",
                                  self.loc(target))
        elif isinstance(target, ast.Attribute):
            raise TileSyntaxError("Attribute assignment is not supported: objects in tile code "
                                  "are immutable", self.loc(target))
        else:
            raise self.syntax_error(f"Assignment to '{type(target).__name__}'", target)

    def stmt_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scope[node.name] = make_local_function(self, node)
        return None

    def stmt_Return(self, node: ast.Return) -> str:
        if self.loops:
            raise TileSyntaxError("'return' inside a loop is not supported in tile code",
                                  self.loc(node))
        value = Const(None) if node.value is None else self.expr(node.value)
        if self.is_kernel and not (isinstance(value, Const) and value.value is None):
            raise TileTypeError(f"A kernel cannot return a value (got {describe(value)})",
                                self.loc(node))
        self.scope[RETURN] = value
        return "return"

    def stmt_If(self, node: ast.If) -> Optional[str]:
        return control.lower_if(self, node)

    def stmt_For(self, node: ast.For) -> None:
        return control.lower_for(self, node)

    def stmt_While(self, node: ast.While) -> None:
        return control.lower_while(self, node)

    def stmt_Break(self, node: ast.Break) -> str:
        return control.lower_jump(self, node, "break")

    def stmt_Continue(self, node: ast.Continue) -> str:
        return control.lower_jump(self, node, "continue")

    def stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.expr(node.test)
        if not (isinstance(cond, Const) and cond.is_number):
            raise TileSyntaxError("'assert' in tile code needs a compile-time condition",
                                  self.loc(node.test))
        if not cond.value:
            msg = ""
            if node.msg is not None:
                m = self.expr(node.msg)
                msg = f": {m.value}" if isinstance(m, Const) else ""
            raise TileValueError(f"Compile-time assertion failed{msg}", self.loc(node))
        return None

    # --- names ----------------------------------------------------------------------------
    def lookup(self, name: str, node: ast.AST) -> FrontVal:
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, Undefined):
                raise TileSyntaxError(f"Variable '{name}' {v.reason}", self.loc(node))
            return v
        if name in self.fn.closure:
            return wrap_global(self.fn.closure[name])
        if name in self.fn.globals:
            return wrap_global(self.fn.globals[name])
        if hasattr(builtins, name):
            return Const(getattr(builtins, name))
        raise TileSyntaxError(f"Name '{name}' is not defined", self.loc(node))

    # --- expressions ----------------------------------------------------------------------
    def expr(self, node: ast.expr) -> FrontVal:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.unsupported(node)
        value = method(node)
        if isinstance(value, (Const, TupleVal)):
            self._check_int_bound(value, node)
        return value

    def _check_int_bound(self, value: FrontVal, node: ast.expr) -> None:
        """Loosely typed integers (literals, globals, folded results, tuple items)
        stay below 2**INT_BITS in magnitude: see `folding`."""
        pending = [value]
        while pending:
            v = pending.pop()
            if isinstance(v, TupleVal):
                pending.extend(v.items)
            elif isinstance(v, Const) and type(v.value) is int and \
                    v.value.bit_length() > INT_BITS:
                check_int_bound(v.value, self.loc(node))

    def expr_Constant(self, node: ast.Constant) -> FrontVal:
        return Const(node.value)

    def expr_Name(self, node: ast.Name) -> FrontVal:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> FrontVal:
        items: list[FrontVal] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):   # (*t.shape, 1)
                items.extend(self.unpack(e))
            else:
                items.append(self.expr(e))
        return TupleVal(tuple(items))

    def unpack(self, node: ast.Starred) -> tuple[FrontVal, ...]:
        """The items of `*t` (in a call or a tuple display): `t` must be a tuple."""
        v = self.expr(node.value)
        if not isinstance(v, TupleVal):
            raise TileTypeError(f"Cannot unpack {describe(v)} with *", self.loc(node))
        return v.items

    expr_List = expr_Tuple

    def expr_BinOp(self, node: ast.BinOp) -> FrontVal:
        # A left-deep chain (`a + b + c + ...`, as long sums parse) is lowered in a
        # loop, in Python's order of evaluation: its length costs no recursion.
        chain = []
        while isinstance(node, ast.BinOp):
            chain.append(node)
            node = node.left
        value = self.expr(node)
        for link in reversed(chain):
            value = self.binop(type(link.op), value, self.expr(link.right), link)
        return value

    def binop(self, op_type, a: FrontVal, b: FrontVal, node: ast.AST) -> FrontVal:
        fn = _BINOPS.get(op_type)
        if fn is None:
            raise self.syntax_error(f"The operator '{op_type.__name__}'", node)
        if isinstance(a, TupleVal) and isinstance(b, TupleVal) and fn == "add":
            return TupleVal(a.items + b.items)
        if fn == "mul" and (isinstance(a, TupleVal) or isinstance(b, TupleVal)):
            tup, n = (a, b) if isinstance(a, TupleVal) else (b, a)
            if isinstance(n, Const) and isinstance(n.value, int) and not isinstance(n.value, bool):
                return TupleVal(tup.items * max(n.value, 0))   # (0,) * ndim
            raise TileTypeError(f"A tuple can only be repeated by a constant int, got "
                                f"{describe(n)}", self.loc(node))
        return self.b.binary(fn, a, b, self.loc(node))

    def expr_UnaryOp(self, node: ast.UnaryOp) -> FrontVal:
        x = self.expr(node.operand)
        loc = self.loc(node)
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(node.op, ast.USub):
            return self.b.unary("neg", x, loc)
        if isinstance(node.op, ast.Invert):
            return self.b.unary("invert", x, loc)
        return self.logical_not(x, loc)

    def logical_not(self, x: FrontVal, loc: Loc) -> FrontVal:
        if isinstance(x, Const):
            return Const(not x.value)
        v = self.b.materialize(x, loc)
        if v.type.dtype.is_bool:
            return self.b.unary("invert", v, loc)
        return self.b.compare("eq", v, Const(0), loc)

    def truth(self, x: FrontVal, loc: Loc) -> FrontVal:
        """`x` as a bool (a Const for constants)."""
        if isinstance(x, Const):
            return Const(bool(x.value))
        v = self.b.materialize(x, loc)
        if v.type.dtype.is_bool:
            return v
        return self.b.compare("ne", v, Const(0), loc)

    def expr_BoolOp(self, node: ast.BoolOp) -> FrontVal:
        loc = self.loc(node)
        is_and = isinstance(node.op, ast.And)
        result: Optional[FrontVal] = None
        for value_node in node.values:
            v = self.truth(self.expr(value_node), self.loc(value_node))
            if isinstance(v, Const):
                if is_and and not v.value:
                    return Const(False)   # short-circuit at compile time
                if not is_and and v.value:
                    return Const(True)
                continue
            if isinstance(v, Value) and v.type.shape != ():
                raise TileTypeError("'and'/'or' need scalar operands; use & or | for tiles",
                                    self.loc(value_node))
            result = v if result is None else self.b.binary("bitand" if is_and else "bitor",
                                                            result, v, loc)
        return Const(is_and) if result is None else result

    def expr_Compare(self, node: ast.Compare) -> FrontVal:
        loc = self.loc(node)
        left = self.expr(node.left)
        result: Optional[FrontVal] = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp)
            if type(op) in (ast.Is, ast.IsNot):
                if not (isinstance(left, Const) and isinstance(right, Const)):
                    raise TileSyntaxError("'is' is only supported between compile-time "
                                          "constants (e.g. `x is None`)", loc)
                same = left.value is right.value
                r: FrontVal = Const(same if isinstance(op, ast.Is) else not same)
            elif type(op) in _CMPOPS and (isinstance(left, TupleVal) or
                                          isinstance(right, TupleVal)):
                r = self.compare_tuples(type(op), left, right, loc)
            elif type(op) in _CMPOPS:
                if isinstance(left, Const) and isinstance(right, Const) and not (
                        left.is_number and right.is_number):
                    eq = left.value == right.value
                    if type(op) not in (ast.Eq, ast.NotEq):
                        raise TileTypeError(f"Cannot order {describe(left)} and "
                                            f"{describe(right)}", loc)
                    r = Const(eq if isinstance(op, ast.Eq) else not eq)
                else:
                    r = self.b.compare(_CMPOPS[type(op)], left, right, loc)
            else:
                raise self.syntax_error(f"The comparison '{type(op).__name__}'", node)
            result = r if result is None else self.b.binary("bitand", result, r, loc)
            left = right
        return result

    def compare_tuples(self, op_type, left: FrontVal, right: FrontVal, loc: Loc) -> Const:
        """`==`/`!=` between compile-time tuples (e.g. `t.shape == (2, 4)`)."""
        def value(v):
            if isinstance(v, TupleVal):
                return tuple(value(i) for i in v.items)
            if isinstance(v, Const):
                return v.value
            raise TileTypeError(f"Tuples can only be compared when every item is a "
                                f"compile-time constant, got {describe(v)}", loc)
        if op_type not in (ast.Eq, ast.NotEq):
            raise TileTypeError(f"Cannot order {describe(left)} and {describe(right)}", loc)
        eq = value(left) == value(right)
        return Const(eq if op_type is ast.Eq else not eq)

    def expr_IfExp(self, node: ast.IfExp) -> FrontVal:
        cond = self.truth(self.expr(node.test), self.loc(node.test))
        if isinstance(cond, Const):
            return self.expr(node.body if cond.value else node.orelse)
        return self.b.where(cond, self.expr(node.body), self.expr(node.orelse), self.loc(node))

    def expr_Attribute(self, node: ast.Attribute) -> FrontVal:
        return get_attribute(self, self.expr(node.value), node.attr, self.loc(node))

    def expr_Subscript(self, node: ast.Subscript) -> FrontVal:
        return subscript(self, self.expr(node.value), node.slice, self.loc(node))

    def expr_Call(self, node: ast.Call) -> FrontVal:
        callee = self.expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.unpack(a))
            else:
                args.append(self.expr(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.syntax_error("'**' in a call", kw)
            kwargs[kw.arg] = self.expr(kw.value)
        return self.call(callee, args, kwargs, self.loc(node))

    def expr_Lambda(self, node: ast.Lambda) -> FrontVal:
        return make_local_function(self, node)

    def call(self, callee: FrontVal, args: list, kwargs: dict, loc: Loc) -> FrontVal:
        local = as_local_function(callee)
        if local is not None:
            return call_local_function(self, local, args, kwargs, loc)
        if isinstance(callee, BoundMethod):
            with self.b.calling(callee.name):
                return call_method(self, callee.obj, callee.name, args, kwargs, loc)
        if isinstance(callee, Const):
            with self.b.calling(getattr(callee.value, "__name__", None)):
                return call_object(self, callee.value, args, kwargs, loc)
        raise TileTypeError(f"{describe(callee)} is not callable", loc)

    # --- inlining ---------------------------------------------------------------------------
    def inline(self, pyfunc: Any, args: list, kwargs: dict, loc: Loc) -> FrontVal:
        """Inline a call to a Python function used as a tile function."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise TileSyntaxError(f"Tile function calls nest deeper than {MAX_INLINE_DEPTH} "
                                  f"levels at the call to {pyfunc.__name__}() (recursion must "
                                  f"end at compile time)", loc)
        parsed = parse_function(pyfunc)
        try:
            bound = inspect.signature(pyfunc).bind(*args, **kwargs)
        except TypeError as e:
            raise TileTypeError(f"Invalid call to {pyfunc.__name__}(): {e}", loc) from None
        scope: dict[str, FrontVal] = {}
        for name, param in inspect.signature(pyfunc).parameters.items():
            if name in bound.arguments:
                v = bound.arguments[name]
                if param.kind == param.VAR_POSITIONAL:
                    v = TupleVal(tuple(v))
                elif param.kind == param.VAR_KEYWORD:
                    raise TileSyntaxError("'**kwargs' parameters are not supported in tile "
                                          "functions", loc)
                scope[name] = v
            elif param.default is not inspect.Parameter.empty:
                scope[name] = wrap_global(param.default)
            elif param.kind == param.VAR_POSITIONAL:
                scope[name] = TupleVal(())
        inner = Lowerer(self.b, parsed, scope, loc, self.depth + 1)
        with self.b.calling(None):
            inner.lower_body(parsed.tree.body)
        result = inner.scope.get(RETURN, Const(None))  # control flow rebinds inner.scope
        if isinstance(result, Undefined):
            raise TileSyntaxError(f"Not every path through {pyfunc.__name__}() returns a value",
                                  loc)
        return result


def wrap_global(obj: Any) -> FrontVal:
    """A Python object seen from tile code: numbers and everything else are constants."""
    import numpy as np
    if isinstance(obj, (Value, Const, TupleVal)):
        return obj
    if isinstance(obj, tuple):  # a list display, not a generator: no C-level recursion
        return TupleVal(tuple([wrap_global(o) for o in obj]))
    if isinstance(obj, (np.bool_, np.integer, np.floating)):
        return Const(obj.item(), D.from_numpy(obj.dtype))
    return Const(obj)
