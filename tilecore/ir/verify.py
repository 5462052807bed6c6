"""Checks that a Function keeps the invariants `ir/ops.py` promises both
backends: known ops, values defined before use (in the same block or an
enclosing one), one terminator ending every region, terminators carrying
the types their construct expects, and same-typed operands where the
catalog says so. A failure is a compiler bug, reported with the op's
location and the offending op printed."""
from __future__ import annotations

from typing import Optional

from .core import Block, Function, Op
from .ops import OPS, TERMINATORS
from .printer import format_function
from .types import TileType

__all__ = ["verify", "IRVerificationError"]

_SAME_TYPE_OPERANDS = ("binary", "compare")


class IRVerificationError(AssertionError):
    """The IR breaks an invariant of the op catalog (a compiler bug)."""


def _fail(op: Optional[Op], message: str) -> None:
    where = f" at {op.loc}" if op is not None and op.loc is not None else ""
    name = f" in op '{op.name}'" if op is not None else ""
    raise IRVerificationError(f"invalid IR{name}{where}: {message}")


def _check_op(op: Op) -> None:
    if op.name not in OPS:
        _fail(op, "unknown op (expected one of ir.ops.OPS)")
    if op.name in _SAME_TYPE_OPERANDS:
        a, b = op.operands
        if a.type != b.type:
            _fail(op, f"operands have different types {a.type} and {b.type}")
    if op.name == "where":
        c, a, b = op.operands
        if a.type != b.type or c.type.shape != a.type.shape or not c.type.dtype.is_bool:
            _fail(op, f"expected a bool condition and two operands of one type and shape, got "
                      f"{c.type}, {a.type}, {b.type}")
    if op.name == "if":
        if len(op.regions) != 2 or op.operands[0].type != TileType(op.operands[0].type.dtype, ()) \
                or not op.operands[0].type.dtype.is_bool:
            _fail(op, "expected a bool scalar condition and two regions")


def _check_terminator(block: Block, expected: list, owner: Op, kind: str) -> None:
    """A region's last op must be a terminator whose operands match `expected`."""
    term = block.terminator
    if term is None:
        _fail(owner, f"its {kind} region does not end with yield, continue or break")
    if term.name == "yield":
        types = [v.type for v in term.operands]
        if types != expected:
            _fail(term, f"yields {[str(t) for t in types]}, expected "
                        f"{[str(t) for t in expected]}")


def _walk(block: Block, visible: set, loops: list) -> None:
    visible = set(visible) | {a.id for a in block.args}
    for i, op in enumerate(block.ops):
        _check_op(op)
        for v in op.operands:
            if v.id not in visible:
                _fail(op, f"operand %{v.id} is used before it is defined or outside its region")
        if op.name in TERMINATORS:
            if i != len(block.ops) - 1:
                _fail(op, "a terminator must be the last op of its region")
            if op.name in ("break", "continue"):
                if not loops:
                    _fail(op, f"'{op.name}' outside a loop")
                carried = loops[-1]
                if [v.type for v in op.operands] != carried:
                    _fail(op, f"carries {[str(v.type) for v in op.operands]}, expected "
                              f"{[str(t) for t in carried]}")
        if op.name == "if":
            want = [r.type for r in op.results]
            for region in op.regions:
                _walk(region, visible, loops)
                _check_terminator(region, want, op, "if")
        elif op.name in ("for", "while"):
            carried = [r.type for r in op.results]
            inits = op.operands[3:] if op.name == "for" else op.operands
            if [v.type for v in inits] != carried:
                _fail(op, "initial values do not match the loop's result types")
            body = op.regions[0]
            _walk(body, visible, loops + [carried])
            _check_terminator(body, carried, op, "loop")
        visible |= {r.id for r in op.results}


def verify(fn: Function) -> Function:
    """Raise IRVerificationError (with the IR printed) if `fn` breaks an invariant."""
    visible = {p.value.id for p in fn.params}
    if fn.body.terminator is not None:
        _fail(fn.body.terminator, "the function body cannot end with a terminator")
    try:
        _walk(fn.body, visible, [])
    except IRVerificationError as e:
        raise IRVerificationError(f"{e}\n{format_function(fn)}") from None
    return fn
