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
    """Memory ordering of atomic operations."""

    WEAK = "weak"
    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


class MemoryScope(enum.Enum):
    """Set of threads an atomic operation's ordering applies to."""

    BLOCK = "block"
    DEVICE = "device"
    SYS = "sys"
