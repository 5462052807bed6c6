"""Run a Function over a grid on the CPU: bind the arguments, then run the
body once per block, in x-fastest order or in a seeded random permutation
(to expose kernels that wrongly depend on block order).

Blocks are generated lazily (`block_order`), so a huge grid runs in constant
memory, and the loop is plain Python over NumPy calls, so Ctrl-C
(KeyboardInterrupt) stops it between two ops. A grid with a zero extent runs
no block; the arguments are still bound and checked."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..ir.core import Function, Value
from ..ir.types import ArrayType
from .block_order import BLOCK_ORDERS, block_ids
from .context import BlockContext, BoundsReport
from ..language.rounding import cast
from .rules import RULES

__all__ = ["run_function"]


def run_function(fn: Function, grid: tuple[int, int, int], args: Sequence[object], *,
                 block_order: str = "sequential", seed: Optional[int] = None,
                 strict_bounds: Optional[bool] = None) -> None:
    """Execute `fn` for every block of the 3-D `grid`.

    `args[i]` binds `fn.params[i]`: a NumPy array for an array parameter
    (written in place by store/scatter; any strides), a Python or NumPy scalar
    for a scalar parameter (converted to its dtype like `astype`).
    `strict_bounds` (default: TILECORE_STRICT_BOUNDS) warns once per load or
    store op of the launch that addresses a tile wholly outside its array."""
    if block_order not in BLOCK_ORDERS:
        raise ValueError(f'block_order must be one of {BLOCK_ORDERS}, got {block_order!r}')
    if len(args) != len(fn.params):
        raise TypeError(f"{fn.name}() takes {len(fn.params)} runtime arguments, "
                        f"got {len(args)}")
    bindings = {p.value: _bind(p.name, p.value, a) for p, a in zip(fn.params, args)}
    names = {p.value: p.name for p in fn.params if isinstance(p.value.type, ArrayType)}
    grid = tuple(int(g) for g in grid)
    bounds = BoundsReport(strict_bounds)
    constants: dict = {}  # shared by the blocks: each constant op is made once a launch
    for bid in block_ids(grid, block_order, seed):
        ctx = BlockContext(bid, grid, names, RULES, dict(bindings), bounds, constants=constants)
        ctx.run_block(fn.body, ())


def _bind(name: str, value: Value, arg: object) -> object:
    ty = value.type
    if isinstance(ty, ArrayType):
        if (not isinstance(arg, np.ndarray) or arg.ndim != ty.ndim
                or arg.dtype != ty.dtype.numpy_dtype):
            got = (f"an array of {arg.dtype} with {arg.ndim} dimensions"
                   if isinstance(arg, np.ndarray) else type(arg).__name__)
            raise TypeError(f'Invalid argument "{name}": expected a NumPy array of '
                            f"{ty.dtype.numpy_dtype} with {ty.ndim} dimensions, got {got}")
        return arg
    return cast(np.asarray(arg), ty.dtype)
