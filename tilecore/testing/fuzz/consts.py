"""Loosely typed constants for generated programs: values that promote with a
given dtype without an error, and their Python source."""
from __future__ import annotations

import math

from ...language.dtypes import DType
from .generate import Gen
from .typerules import fits

__all__ = ["literal", "loose_const"]

_INT_CONSTS = (0, 1, 2, 3, 5, 7, -1, -3, 100, -100, 127, -128, 255, 1000, 65535, 2**31 - 1,
               -2**31, 2**40)
_FLOAT_CONSTS = (0.5, 2.0, -1.5, 3.0, 0.0, -0.0, 0.1, 1e-3, 100.0, -7.25, 1e30, 65504.0)


def literal(value) -> str:
    """Python source of a loosely typed constant (negative ones parenthesized)."""
    text = repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        text = f'float("{value}")' if value == value and value > 0 else \
            ('-float("inf")' if value < 0 else 'float("nan")')
    return f"({text})" if text.startswith("-") else text


def loose_const(g: Gen, dtype: DType, nonzero: bool = False, small: bool = False):
    """A loosely typed constant that promotes with `dtype` without an error."""
    if dtype.is_bool:
        return g.chance(0.5) if not nonzero else True
    if dtype.is_integer or (small and not dtype.is_float):
        cands = [c for c in _INT_CONSTS if fits(c, dtype) and (c or not nonzero)
                 and (not small or 0 <= c < 8)]
        if g.chance(0.15) and not small:
            return g.rng.choice(_FLOAT_CONSTS[:4])     # int tile op float constant -> float32
        return g.rng.choice(cands)
    if g.chance(0.3):
        return g.rng.choice([c for c in (1, 2, 3, -2, 7) if c or not nonzero])
    return g.rng.choice([c for c in _FLOAT_CONSTS if c or not nonzero])
