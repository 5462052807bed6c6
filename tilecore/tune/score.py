"""One number per candidate policy, as CUB's tuning search computes it: the
weighted sum of its speedups over the current policy across the problem sizes.

The weights are CUB's (NVIDIA/cccl, benchmarks/scripts/cccl/bench/score.py,
`compute_weights` for an `{io}` axis such as `Elements{io}`; summed in
`Bench.score` of cccl/bench/bench.py). For the n sizes of the axis in
ascending order, size i (0-based) gets the importance

    w_i = 1 - exp(-(b + i (e - b) / n)),  b = -ln(1 - 0.6),  e = -ln(1 - 0.999)

i.e. importances rising from 0.6 for the smallest size towards 0.999 (never
reached: the last size is i = n - 1), then normalized to sum to 1. The weight
depends on a size's position on the axis, not on its value: for the usual
2^16, 2^20, 2^24, 2^28 the normalized weights are 0.172, 0.261, 0.281, 0.286,
so small problems count, but less than the bandwidth-bound large ones.

A speedup is the current policy's time over the candidate's (> 1: faster).
Like CCCL's scorer (benchmarks/scripts/tests/test_score.py), a size that was
not measured takes its weight out of the sum: the score is the weighted mean
over the sizes measured, so a candidate on par with the current policy scores
1.0 whatever was skipped, and two sizes keep the weight ratio their positions
give them. A candidate with no measured size scores -inf (a failed run).
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["weights", "score", "LEAST_IMPORTANCE", "MOST_IMPORTANCE"]

LEAST_IMPORTANCE = 0.6
MOST_IMPORTANCE = 0.999


def weights(sizes: Sequence[int]) -> dict[int, float]:
    """CUB's normalized weights of the problem sizes (ascending order decides
    the position; see the module docstring)."""
    ordered = sorted(sizes)
    if not ordered or len(set(ordered)) != len(ordered) or \
            any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in ordered):
        raise ValueError(f'Invalid argument "sizes" of weights(): expected distinct positive '
                         f"ints, got {list(sizes)!r}")
    begin = -math.log(1 - LEAST_IMPORTANCE)
    end = -math.log(1 - MOST_IMPORTANCE)
    step = (end - begin) / len(ordered)
    raw = [1 - math.exp(-(begin + i * step)) for i in range(len(ordered))]
    total = sum(raw)
    return {n: w / total for n, w in zip(ordered, raw)}


def score(speedups: dict[int, float], sizes_weights: dict[int, float]) -> float:
    """The weighted mean of `speedups` (size -> speedup over the current
    policy) with `sizes_weights` (from weights(), over every size of the
    sweep); -inf when nothing was measured."""
    unknown = sorted(set(speedups) - set(sizes_weights))
    if unknown:
        raise ValueError(f'Invalid argument "speedups" of score(): sizes {unknown} have no '
                         f"weight (weighted sizes: {sorted(sizes_weights)})")
    bad = {n: s for n, s in speedups.items() if not (s > 0 and math.isfinite(s))}
    if bad:
        raise ValueError(f'Invalid argument "speedups" of score(): expected positive finite '
                         f"speedups, got {bad}")
    if not speedups:
        return float("-inf")
    mass = sum(sizes_weights[n] for n in speedups)
    return sum(sizes_weights[n] * s for n, s in speedups.items()) / mass
