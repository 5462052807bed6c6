"""Per-block execution state and the loop that runs a block of ops.

A rule is `rule(ctx, op, args) -> tuple of result arrays | Signal`, called
with NumPy's floating-point error reports off (`run_block`). Terminators
return a `Signal`; `run_block` stops at the first one and hands it to the
enclosing control-flow rule, which is how `break`/`continue` inside nested
`if` regions reach their loop without Python exceptions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import numpy as np

from .. import config
from ..errors import TileRuntimeError
from ..ir.core import Block, Op, Value
from ..ir.types import TileType

__all__ = ["Signal", "BlockContext", "BoundsReport", "Rule"]


@dataclass(frozen=True)
class Signal:
    """How a region ended: kind is 'yield', 'continue' or 'break'."""

    kind: str
    values: tuple[np.ndarray, ...]


Rule = Callable[["BlockContext", Op, list], Union[tuple, Signal]]


class BoundsReport:
    """Strict bounds mode of one launch, shared by its blocks: whether it is on
    and which ops already reported a tile wholly outside its array (each op
    reports its first such tile of the launch, not one per block).

    `strict=None` reads TILECORE_STRICT_BOUNDS at the launch's first such tile,
    so launches without one never pay for the read (`tilecore.launch` has
    validated the variable before running any block)."""

    __slots__ = ("strict", "warned")

    def __init__(self, strict: Optional[bool] = None):
        self.strict = strict
        self.warned: set[int] = set()

    def first_outside(self, op: Op) -> bool:
        """True when strict mode is on and this is the first tile wholly
        outside its array that `op` addresses in the launch."""
        if self.strict is None:
            self.strict = config.strict_bounds()
        if not self.strict or id(op) in self.warned:
            return False
        self.warned.add(id(op))
        return True


@dataclass
class BlockContext:
    """Everything one block of the grid sees while it runs."""

    bid: tuple[int, int, int]
    grid: tuple[int, int, int]
    array_names: dict[Value, str]  # array param Value -> its name, for error messages
    rules: dict[str, Rule]
    env: dict[Value, object]       # Value -> np.ndarray (tiles) or the bound array
    bounds: BoundsReport = field(default_factory=BoundsReport)  # one per launch
    writes: int = 0  # memory writes so far (stores, scatters, atomics that changed memory)
    # constant op -> its read-only value: one per launch, made by its first block
    constants: dict[Op, np.ndarray] = field(default_factory=dict)

    def run_block(self, block: Block, args: Sequence[np.ndarray]) -> Optional[Signal]:
        """Bind the block arguments, run its ops in order; return the signal of
        its terminator (None for a block without one, i.e. the function body).

        The rules run with NumPy's floating-point error reports off: the IR
        defines integer wrapping, division by zero, overflow and NaN results
        (or leaves them unspecified, but never failing). Set once here rather
        than in each rule, as entering np.errstate costs more than most ops."""
        env = self.env
        for arg, value in zip(block.args, args):
            env[arg] = value
        rules = self.rules
        with np.errstate(all="ignore"):
            for op in block.ops:
                out = rules[op.name](self, op, [env[v] for v in op.operands])
                if type(out) is Signal:
                    return out
                for res, value in zip(op.results, out):
                    value = np.asarray(value)  # NumPy ops on 0-d arrays return scalars
                    _check_result(op, res, value)
                    env[res] = value
        return None


def _check_result(op: Op, res: Value, value: np.ndarray) -> None:
    """The interpreter is the IR's executable spec: a result that disagrees
    with its declared type is a bug in the IR (or a rule), reported at once."""
    ty = res.type
    if isinstance(ty, TileType) and (value.shape != ty.shape
                                     or value.dtype != ty.dtype.numpy_dtype):
        raise TileRuntimeError(
            f"{op.name}() produced a {value.dtype} array of shape {value.shape}, "
            f"but its IR result {res!r} has type {ty}", loc=op.loc)
