"""Spin-waits that can never end in the interpreter.

The interpreter runs the blocks of a grid one after another, so a block that
waits in a `while` loop for something a block running after it will write
(a flag, a counter) would wait forever; on the GPU the other block runs
concurrently and the wait ends. The interpreter runs deterministically: if
one iteration of a `while` loop wrote nothing to memory (no store or scatter
ran, no atomic changed an element) and ended with the loop's variables as it
began them, every later iteration repeats it exactly, so the loop never ends.
That case is reported as a TileRuntimeError at the loop's line instead of
hanging. It is exact (no false alarm); a loop whose variables change on every
iteration (a retry counter) is not detected.
"""
from __future__ import annotations

import numpy as np

from ..errors import TileRuntimeError
from ..ir.core import Op
from .context import BlockContext

__all__ = ["check_progress"]


def _same(a: tuple, b: tuple) -> bool:
    """Bitwise equality of two tuples of tiles (a NaN equals itself)."""
    return all(x.shape == y.shape and x.dtype == y.dtype and
               np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes()
               for x, y in zip(a, b))


def check_progress(ctx: BlockContext, op: Op, writes_before: int, carried_before: tuple,
                   carried_after: tuple) -> None:
    """Raise if one iteration of the `while` loop `op` changed nothing."""
    if ctx.writes != writes_before or not _same(carried_before, carried_after):
        return
    block = tuple(int(b) for b in ctx.bid)
    raise TileRuntimeError(
        f"This while loop can never end in the interpreter: in block {block} one iteration "
        f"wrote nothing to memory and left the loop's variables unchanged, so every later "
        f"iteration repeats it. If the loop waits for a value that another block writes (a "
        f"flag, a counter), note that the interpreter runs blocks one after another, in full: "
        f"a block can only see what the blocks that ran before it wrote, so it can wait for "
        f"those but not for blocks that run after it (on the GPU they run concurrently)",
        loc=op.loc)
