"""The CPU interpreter of the tile IR: the executable spec of `ir.ops`.

`RULES` maps every op name to a NumPy implementation; `run_function` drives
them block by block over a grid.
"""
from .memory import OutOfBoundsTileWarning
from ..language.rounding import cast, round_to_tf32
from .rules import RULES
from .run import run_function

__all__ = ["run_function", "RULES", "round_to_tf32", "cast", "OutOfBoundsTileWarning"]
