"""Structured control flow: `if`, `for ... in range(...)`, `while`, `break`,
`continue`, and early `return` in tile functions.

Names assigned inside a construct become results of the IR op (if) or values
carried by the loop. A loop-carried variable keeps one type through the
loop; a variable that starts as a loosely typed constant takes the type the
loop body gives it (the body is lowered again with that type), wherever in
the body it changes: directly, in a nested loop, on one branch of an `if`,
or in an inlined tile function.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..errors import TileSyntaxError, TileTypeError, TileValueError
from ..ir.core import Block, Value
from ..ir.types import TileType
from ..language import dtypes as D
from .builder import describe
from .values import Const, FrontVal, TupleVal, Undefined

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["LoopFrame", "lower_if", "lower_for", "lower_while", "lower_jump",
           "returns_in_one_branch", "fold_rest_into_if", "assigned_names"]

_RETURN = "__return__"


@dataclass
class LoopFrame:
    """A loop being lowered: its carried names, their types, their values before
    the loop and which of them were loosely typed constants (their type is the
    one the loop body gives them); `args` are the body's block arguments."""

    names: list[str]
    types: list[TileType]
    inits: list[FrontVal]
    init_was_const: list[bool] = field(default_factory=list)
    args: list[Value] = field(default_factory=list)


class _Retype(Exception):
    """A loop-carried variable of `frame` needs another type: lower that loop's
    body again (raised from its body, from a nested loop or an `if` join)."""

    def __init__(self, frame: LoopFrame, index: int, new_type: TileType):
        self.frame = frame
        self.index = index
        self.new_type = new_type


def _loose_owner(lw: "Lowerer", name: str, value: FrontVal,
                 inner: Optional[LoopFrame] = None) -> Optional[tuple[LoopFrame, int]]:
    """The enclosing loop (outside `inner`) whose carried variable decides the type
    of `name` (holding `value`) because it entered that loop as a loosely typed
    constant: by name among this function's loops, or by identity (a block
    argument passed to an inlined function)."""
    frames = lw.loops if inner is None else lw.loops[:lw.loops.index(inner)]
    for frame in reversed(frames):
        if name in frame.names:
            i = frame.names.index(name)
            if frame.init_was_const[i]:
                return frame, i
    return lw.b.loose_args.get(value) if isinstance(value, Value) else None


def _retype_owner(lw: "Lowerer", name: str, value: FrontVal, new_type: TileType,
                  inner: Optional[LoopFrame] = None) -> None:
    """Raise `_Retype` for the loop that owns `name`'s type, if it changes it."""
    owner = _loose_owner(lw, name, value, inner)
    if owner is not None:
        _retype(*owner, new_type)


def _retype_join(lw: "Lowerer", name: str, a: Value, b: Value) -> None:
    """`name` is `a` on one branch of an `if` and `b` on another, of two types:
    if one of them is the type of a loop that owns `name`'s type (it entered that
    loop as a constant), that loop takes the other one."""
    owner = _loose_owner(lw, name, a) or _loose_owner(lw, name, b)
    if owner is not None:
        t = owner[0].types[owner[1]]
        if t in (a.type, b.type):
            _retype(*owner, b.type if a.type == t else a.type)


def _retype(frame: LoopFrame, index: int, new_type: TileType) -> None:
    t = frame.types[index]
    if new_type != t and (t.shape == () or new_type.shape == t.shape):
        raise _Retype(frame, index, new_type)


# --- AST analysis ------------------------------------------------------------------------
def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Return):
                names.add(_RETURN)
    return names


def _always_returns(stmts: list[ast.stmt]) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False


def returns_in_one_branch(stmt: ast.If) -> bool:
    return _always_returns(stmt.body) != _always_returns(stmt.orelse)


def fold_rest_into_if(stmt: ast.If, rest: list[ast.stmt]) -> ast.If:
    """`if c: return a; rest` -> `if c: return a; else: rest` (and symmetrically)."""
    new = copy.copy(stmt)
    if _always_returns(stmt.body):
        new.orelse = list(stmt.orelse) + list(rest)
    else:
        new.body = list(stmt.body) + list(rest)
    return new


# --- helpers -----------------------------------------------------------------------------------
def _flatten(v: FrontVal) -> list[FrontVal]:
    if isinstance(v, TupleVal):
        out = []
        for item in v.items:
            out.extend(_flatten(item))
        return out
    return [v]


def _unflatten(template: FrontVal, it) -> FrontVal:
    if isinstance(template, TupleVal):
        return TupleVal(tuple(_unflatten(t, it) for t in template.items))
    return next(it)


def _is_runtime(v: FrontVal) -> bool:
    return isinstance(v, Value) or (isinstance(v, Const) and v.is_number)


def _type_of(v: FrontVal) -> TileType:
    if isinstance(v, Value):
        return v.type
    return TileType(v.dtype or D.constant_dtype(v.value), ())


def _zero_of(lw: "Lowerer", t: TileType, loc) -> Value:
    return lw.b.broadcast(lw.b.constant(0, t.dtype, loc), t.shape, loc)


def _ensure_terminator(lw: "Lowerer", block: Block, types: list[TileType], loc) -> None:
    """A region whose every path already jumped still needs a last terminator
    (unreachable); give it a yield of zeros of the right types."""
    if block.terminator is None:
        with lw.b.block(block):
            lw.b.emit("yield", [_zero_of(lw, t, loc) for t in types], (), loc=loc)


# --- if ------------------------------------------------------------------------------------------
def lower_if(lw: "Lowerer", node: ast.If) -> Optional[str]:
    loc = lw.loc(node)
    cond = lw.truth(lw.expr(node.test), lw.loc(node.test))
    if isinstance(cond, Const):
        return lw.lower_body(node.body if cond.value else node.orelse)
    if cond.type.shape != ():
        raise TileTypeError(f"The condition of 'if' must be a scalar, got a tile of shape "
                            f"{cond.type.shape} (use tilecore.where for element-wise selection)",
                            lw.loc(node.test))
    before = lw.scope
    branches = []
    for stmts in (node.body, node.orelse):
        block = Block()
        lw.scope = dict(before)
        with lw.b.block(block):
            ended = lw.lower_body(stmts)
        branches.append((block, lw.scope, ended))
    lw.scope = before
    live = [(blk, sc) for blk, sc, ended in branches if ended in (None, "return")]
    names = sorted(n for n in assigned_names(node.body + node.orelse))

    merged: dict[str, FrontVal] = {}
    result_names: list[tuple[str, FrontVal, list[FrontVal], TileType]] = []
    for name in names:
        vals = [sc.get(name) for _, sc in live]
        if not live:
            break
        if any(v is None or isinstance(v, Undefined) for v in vals):
            if name in before and not isinstance(before[name], Undefined) and \
                    all(v is not None for v in vals):
                pass
            merged[name] = Undefined(name, "is assigned only on some paths through an 'if'")
            continue
        if all(_same(v, vals[0]) for v in vals):
            merged[name] = vals[0]
            continue
        flats = [_flatten(v) for v in vals]
        if len({len(f) for f in flats}) != 1 or not all(
                isinstance(v, TupleVal) == isinstance(vals[0], TupleVal) for v in vals):
            raise TileTypeError(f"Variable '{name}' has different structures on the branches of "
                                f"the 'if': " + ", ".join(describe(v) for v in vals), loc)
        for parts in zip(*flats):
            if not all(_is_runtime(p) for p in parts):
                if all(_same(p, parts[0]) for p in parts):
                    continue
                raise TileTypeError(f"Variable '{name}' is the compile-time object "
                                    f"{describe(parts[0])} on one branch of the 'if' and "
                                    f"{describe(parts[1])} on another", loc)
        result_names.append((name, vals[0], flats, _join_types(lw, name, flats, loc)))

    result_types: list[TileType] = []
    for name, _, flats, types in result_names:
        result_types.extend(t for t in types if t is not None)
    for (blk, sc) in live:
        with lw.b.block(blk):
            outs = []
            for name, _, _, types in result_names:
                for part, t in zip(_flatten(sc[name]), types):
                    if t is not None:
                        outs.append(lw.b.to_typed(part, t.dtype, t.shape, loc))
            lw.b.emit("yield", outs, (), loc=loc)
    for blk, _, ended in branches:
        if ended not in (None, "return"):
            _ensure_terminator(lw, blk, result_types, loc)
    op = lw.b.emit("if", [cond], result_types, None, [branches[0][0], branches[1][0]], loc)
    it = iter(op.results)
    for name, template, flats, types in result_names:
        parts = [next(it) if t is not None else p for p, t in zip(flats[0], types)]
        merged[name] = _unflatten(template, iter(parts))
    lw.scope = {**before, **merged}
    ends = [ended for _, _, ended in branches]
    if all(e is not None for e in ends):
        return "return" if "return" in ends else "break"
    return None


def _same(a: FrontVal, b: FrontVal) -> bool:
    if a is b:
        return True
    if isinstance(a, Const) and isinstance(b, Const):
        return type(a.value) is type(b.value) and a.value == b.value and a.dtype is b.dtype
    if isinstance(a, TupleVal) and isinstance(b, TupleVal):
        return len(a.items) == len(b.items) and all(_same(x, y) for x, y in zip(a.items, b.items))
    return False


def _join_types(lw: "Lowerer", name: str, flats: list[list[FrontVal]],
                loc) -> list[Optional[TileType]]:
    """The common type of each flattened part across branches (None: a constant part
    that is the same everywhere)."""
    out: list[Optional[TileType]] = []
    for parts in zip(*flats):
        if not _is_runtime(parts[0]):
            out.append(None)
            continue
        values = [p for p in parts if isinstance(p, Value)]
        if values:
            t = values[0].type
            for v in values[1:]:
                if v.type != t:
                    if len(flats[0]) == 1:
                        _retype_join(lw, name, values[0], v)
                    raise TileTypeError(f"Variable '{name}' has type {t} on one branch of the "
                                        f"'if' and {v.type} on another; convert explicitly "
                                        f"with astype()", loc)
            for p in parts:
                if isinstance(p, Const):
                    D.promote_with_constant(t.dtype, p.value)
            out.append(t)
        else:
            dtypes = {p.dtype or D.constant_dtype(p.value) for p in parts}
            dt = dtypes.pop()
            for other in dtypes:
                dt = D.promote_types(dt, other)
            out.append(TileType(dt, ()))
    return out


# --- loops -----------------------------------------------------------------------------------------
def _carried(lw: "Lowerer", body: list[ast.stmt], exclude: set[str]) -> list[str]:
    names = assigned_names(body) - exclude - {_RETURN}
    return sorted(n for n in names if n in lw.scope and not isinstance(lw.scope[n], Undefined))


def _convert_carried(lw: "Lowerer", frame: LoopFrame, loc) -> list[Value]:
    """Current values of the carried names, converted to the loop's types."""
    out = []
    for i, (name, t) in enumerate(zip(frame.names, frame.types)):
        v = lw.scope.get(name)
        if isinstance(v, Undefined) or v is None:
            raise TileSyntaxError(f"Variable '{name}' {v.reason if v else 'is not defined'}", loc)
        if isinstance(v, Value):
            if v.type != t:
                if frame.init_was_const[i]:
                    _retype(frame, i, v.type)
                _retype_owner(lw, name, frame.inits[i], v.type, frame)
                raise TileTypeError(f"Variable '{name}' changes type inside the loop: it is {t} "
                                    f"before the loop and {v.type} after an iteration; a "
                                    f"loop-carried variable must keep its dtype and shape", loc)
            out.append(v)
        elif isinstance(v, Const) and v.is_number:
            if t.dtype.category < D.constant_category(v.value):
                wider = TileType(v.dtype or D.constant_dtype(v.value), t.shape)
                if frame.init_was_const[i]:
                    _retype(frame, i, wider)
                _retype_owner(lw, name, frame.inits[i], wider, frame)
                raise TileTypeError(f"Variable '{name}' changes type inside the loop: it is {t} "
                                    f"before the loop and becomes {describe(v)}; a "
                                    f"loop-carried variable must keep its dtype and shape", loc)
            out.append(lw.b.to_typed(v, t.dtype, t.shape, loc))
        else:
            raise TileTypeError(f"Variable '{name}' is a tile before the loop but "
                                f"{describe(v)} inside it", loc)
    return out


def _check_constants_unchanged(lw: "Lowerer", before: dict, body: list[ast.stmt], loc):
    for name in assigned_names(body):
        old = before.get(name)
        if isinstance(old, (Const, TupleVal)) and not _is_runtime(old):
            new = lw.scope.get(name)
            if new is not None and not _same(new, old):
                raise TileTypeError(f"Variable '{name}' holds the compile-time object "
                                    f"{describe(old)} and cannot be reassigned inside a loop",
                                    loc)


def _lower_loop(lw: "Lowerer", node, names: list[str], head, extra_args: list[TileType],
                bind_extra) -> tuple[list[TileType], Block]:
    """Lower a loop body until the carried types are stable. `head(lw)` emits the
    body's first ops (the while condition check); `bind_extra(args)` binds the
    body's leading block arguments (the for-loop index)."""
    loc = lw.loc(node)
    before = lw.scope
    init = [before[n] for n in names]
    for n, v in zip(names, init):
        if not _is_runtime(v):
            raise TileTypeError(f"Variable '{n}' is {describe(v)} before the loop and is "
                                f"reassigned inside it; loop-carried variables must be tiles, "
                                f"scalars or numbers", loc)
    types = [_type_of(v) for v in init]
    frame = LoopFrame(names, types, init, [isinstance(v, Const) for v in init])
    for _ in range(len(names) + 2):
        body = Block()
        for t in extra_args:
            body.args.append(lw.b.new_value(t))
        for n, t in zip(names, types):
            body.args.append(lw.b.new_value(t, n))
        lw.scope = dict(before)
        bind_extra(body.args[:len(extra_args)])
        frame.args = body.args[len(extra_args):]
        for i, (n, a) in enumerate(zip(names, frame.args)):
            lw.scope[n] = a
            owner = (frame, i) if frame.init_was_const[i] else _loose_owner(lw, n, init[i])
            if owner is not None:
                lw.b.loose_args[a] = owner
        lw.loops.append(frame)
        try:
            with lw.b.block(body):
                head(lw, frame)
                ended = lw.lower_body(node.body)
                if ended is None:
                    lw.b.emit("yield", _convert_carried(lw, frame, loc), (), loc=loc)
            _ensure_terminator(lw, body, types, loc)
        except _Retype as r:
            if r.frame is not frame:
                raise
            types[r.index] = r.new_type
            continue
        finally:
            lw.loops.pop()
            for a in frame.args:
                lw.b.loose_args.pop(a, None)
        _check_constants_unchanged(lw, before, node.body, loc)
        lw.scope = before
        return types, body
    raise TileTypeError("Could not settle the types of the loop-carried variables "
                        + ", ".join(names), loc)


def _finish_loop(lw: "Lowerer", node, op, names, local_names) -> None:
    for n, r in zip(names, op.results):
        r.hint = n
        lw.scope[n] = r
    for n in local_names:
        if n not in names:
            lw.scope[n] = Undefined(n, "is assigned only inside a loop and is not available "
                                       "after it")


def _range_args(lw: "Lowerer", node: ast.For):
    it = node.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)):
        raise TileSyntaxError("Only 'for ... in range(...)' loops are supported in tile code",
                              lw.loc(it))
    callee = lw.lookup(it.func.id, it.func)
    if not (isinstance(callee, Const) and callee.value is range):
        raise TileSyntaxError("Only 'for ... in range(...)' loops are supported in tile code",
                              lw.loc(it))
    if it.keywords or not 1 <= len(it.args) <= 3:
        raise TileTypeError(f"range() takes 1 to 3 positional arguments, got {len(it.args)}",
                            lw.loc(it))
    args = [lw.expr(a) for a in it.args]
    if len(args) == 1:
        args = [Const(0), args[0], Const(1)]
    elif len(args) == 2:
        args.append(Const(1))
    for a, a_node in zip(args, it.args + [it] * 3):
        ok = (isinstance(a, Const) and isinstance(a.value, (int,)) and not isinstance(a.value, bool)) \
            or (isinstance(a, Value) and a.type.shape == () and a.type.dtype.is_integer)
        if not ok:
            raise TileTypeError(f"range() arguments must be integer scalars, got {describe(a)}",
                                lw.loc(a_node))
    step = args[2]
    if isinstance(step, Const) and step.value <= 0:
        raise TileValueError(f"The step of range() must be strictly positive, got {step.value}",
                             lw.loc(it.args[2]))
    return args


def lower_for(lw: "Lowerer", node: ast.For) -> None:
    loc = lw.loc(node)
    if node.orelse:
        raise TileSyntaxError("'for ... else' is not supported in tile code", loc)
    if not isinstance(node.target, ast.Name):
        raise TileSyntaxError("The target of a for loop must be a single name", lw.loc(node.target))
    lb, ub, step = _range_args(lw, node)
    if all(isinstance(a, Const) for a in (lb, ub, step)) and lb.value >= ub.value:
        return None  # zero trips: nothing to emit
    idx_dtype = D.int32
    for a in (lb, ub, step):
        if isinstance(a, Value):
            idx_dtype = D.promote_types(idx_dtype, a.type.dtype) \
                if a.type.dtype.signed else D.int64 if a.type.dtype.bits >= 32 else idx_dtype
        elif not -2**31 <= a.value < 2**31:
            idx_dtype = D.int64
    bounds = [lw.b.to_typed(a, idx_dtype, (), loc) for a in (lb, ub, step)]
    target = node.target.id
    local = assigned_names(node.body) | {target}
    names = _carried(lw, node.body, {target})

    def bind(args):
        args[0].hint = target
        lw.scope[target] = args[0]

    types, body = _lower_loop(lw, node, names, lambda lw, f: None,
                              [TileType(idx_dtype, ())], bind)
    inits = [lw.b.to_typed(lw.scope[n], t.dtype, t.shape, loc) for n, t in zip(names, types)]
    op = lw.b.emit("for", bounds + inits, types, None, [body], loc)
    _finish_loop(lw, node, op, names, local)
    lw.scope[target] = Undefined(target, "is the variable of a for loop and is not available "
                                         "after it")
    return None


def lower_while(lw: "Lowerer", node: ast.While) -> None:
    loc = lw.loc(node)
    if node.orelse:
        raise TileSyntaxError("'while ... else' is not supported in tile code", loc)
    with lw.b.block(Block()):  # only to see whether it is a constant: its ops are dropped
        first = lw.truth(lw.expr(node.test), lw.loc(node.test))  # (an atomic runs once)
    if isinstance(first, Const) and not first.value:
        return None
    names = _carried(lw, node.body, set())

    def head(lw, frame):
        c = lw.truth(lw.expr(node.test), lw.loc(node.test))
        if isinstance(c, Const):
            if c.value:
                return
            raise TileValueError("The loop condition became a false constant", loc)
        if c.type.shape != ():
            raise TileTypeError(f"The condition of 'while' must be a scalar, got a tile of shape "
                                f"{c.type.shape}", lw.loc(node.test))
        exit_block, stay_block = Block(), Block()
        with lw.b.block(exit_block):
            lw.b.emit("break", _convert_carried(lw, frame, loc), (), loc=loc)
        with lw.b.block(stay_block):
            lw.b.emit("yield", [], (), loc=loc)
        lw.b.emit("if", [lw.logical_not(c, loc)], [], None, [exit_block, stay_block], loc)

    types, body = _lower_loop(lw, node, names, head, [], lambda args: None)
    inits = [lw.b.to_typed(lw.scope[n], t.dtype, t.shape, loc) for n, t in zip(names, types)]
    op = lw.b.emit("while", inits, types, None, [body], loc)
    _finish_loop(lw, node, op, names, assigned_names(node.body))
    return None


def lower_jump(lw: "Lowerer", node: ast.stmt, kind: str) -> str:
    loc = lw.loc(node)
    if not lw.loops:
        raise TileSyntaxError(f"'{kind}' outside a loop", loc)
    lw.b.emit(kind, _convert_carried(lw, lw.loops[-1], loc), (), loc=loc)
    return kind
