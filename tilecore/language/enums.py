"""Enumerations of the tile language: rounding, padding, memory order and scope."""
from __future__ import annotations

import enum

__all__ = ["RoundingMode", "PaddingMode", "MemoryOrder", "MemoryScope"]


class RoundingMode(enum.Enum):
    """Rounding mode for floating-point operations."""

    RN = "nearest_even"
    RZ = "zero"
    RM = "negative_inf"
    RP = "positive_inf"
    FULL = "full"
    APPROX = "approx"
    RZI = "nearest_int_to_zero"


class PaddingMode(enum.Enum):
    """Value given to out-of-bounds elements of a tile-space load."""

    UNDETERMINED = "undetermined"
    ZERO = "zero"
    NEG_ZERO = "neg_zero"
    NAN = "nan"
    POS_INF = "pos_inf"
    NEG_INF = "neg_inf"


class MemoryOrder(enum.Enum):
    """Memory ordering of a memory operation (cuTile's members). WEAK is the
    default of load/store (no ordering, not for data other blocks write
    concurrently); atomics take RELAXED, ACQUIRE, RELEASE or ACQ_REL (default)."""

    WEAK = "weak"
    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


class MemoryScope(enum.Enum):
    """Set of threads a memory operation's ordering applies to: NONE goes with
    WEAK (the default of load/store), the others with every other order."""

    NONE = "none"
    BLOCK = "block"
    DEVICE = "device"
    SYS = "sys"
