"""Policy selection: a plain function of (compute capability, tuning key)
with explicit fallthrough, as CUB's newer `policy_selector`.

An algorithm's policy hub lists its policies by minimum architecture; the
active one is the newest whose architecture is not newer than the device's.
`chained` walks such a list; `ARCHITECTURES` is the chain every hub uses
(sm_70 -> sm_80 -> sm_90 -> sm_100 -> sm_120), so tables and policies for
one architecture are found by any newer device that has none of its own.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

__all__ = ["ARCHITECTURES", "chained", "arch_name", "parse_arch"]

T = TypeVar("T")

# Compute capabilities (major * 10 + minor) that policies may target, oldest first.
ARCHITECTURES: tuple[int, ...] = (70, 80, 90, 100, 120)


def arch_name(cc: int) -> str:
    return f"sm_{cc}"


def parse_arch(name: str) -> int:
    """'sm_90' (or 'sm_90a') -> 90."""
    digits = name[3:].rstrip("af") if name.startswith("sm_") else ""
    if not digits.isdigit():
        raise ValueError(f"not an architecture name: {name!r} (expected e.g. 'sm_90')")
    return int(digits)


def chained(cc: int, chain: Sequence[tuple[int, Callable[[], T]]]) -> T:
    """The policy of the newest entry of `chain` ((min_cc, make_policy), any
    order) whose min_cc <= cc; the oldest entry when cc is older than all."""
    ordered = sorted(chain, key=lambda e: e[0], reverse=True)
    for min_cc, make in ordered:
        if cc >= min_cc:
            return make()
    return ordered[-1][1]()


def architectures_up_to(cc: int) -> list[int]:
    """The chain's architectures not newer than `cc`, newest first."""
    return [a for a in reversed(ARCHITECTURES) if a <= cc]
