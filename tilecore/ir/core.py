"""The tile IR: plain data. Values in SSA form, ops with structured regions.

A `Function` is one kernel specialization: runtime parameters (arrays and
scalars) and a body `Block`. Each `Op` has a name from `ir.ops.OPS`, operand
and result `Value`s, constant `attrs`, nested `regions` (if/for/while) and a
`Loc`. Control flow is structured: `if` yields its results, loops carry
values through block arguments and end with `yield`/`continue`/`break`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..errors import Loc
from .types import ArrayType, TileType

__all__ = ["Value", "Op", "Block", "Function", "Param"]

Type = Union[TileType, ArrayType]


class Value:
    """An SSA value; `id` is unique within its Function."""

    __slots__ = ("type", "id", "hint")

    def __init__(self, type: Type, id: int, hint: str = ""):
        self.type = type
        self.id = id
        self.hint = hint  # source variable name, for readable dumps

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(eq=False)
class Op:
    name: str
    operands: tuple[Value, ...]
    results: tuple[Value, ...]
    attrs: dict[str, Any]
    regions: tuple["Block", ...] = ()
    loc: Optional[Loc] = None

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self.name
        return self.results[0]


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)

    @property
    def terminator(self) -> Optional[Op]:
        if self.ops and self.ops[-1].name in ("yield", "break", "continue"):
            return self.ops[-1]
        return None


@dataclass(frozen=True)
class Param:
    """A runtime kernel parameter (constant-embedded ones are folded away)."""

    name: str
    value: Value
    index: int  # position in the Python signature


@dataclass(eq=False)
class Function:
    name: str
    params: list[Param]
    body: Block
    loc: Optional[Loc] = None
    num_values: int = 0

    def walk(self):
        """Every op, depth first, in program order."""
        yield from _walk(self.body)


def _walk(block: Block):
    for op in block.ops:
        yield op
        for r in op.regions:
            yield from _walk(r)
