"""The order in which the interpreter runs a grid's blocks, produced lazily.

A grid may hold up to 2**31-1 * 65535 * 65535 blocks, so no order is ever
built as a list: blocks are generated one at a time, and a run over a huge
grid starts at once (and can be stopped with Ctrl-C) in constant memory.

"sequential" is x-fastest, as the GPU numbers its blocks. "random" shuffles
the linear block ids: a uniform NumPy permutation while it is small (up to
`SHUFFLE_IN_MEMORY` blocks, 8 MB of int64), else a keyed Feistel network over
the smallest power-of-four domain that holds the ids, walking the domain in
order and keeping the outputs below the block count. A Feistel network is a
bijection whatever its round function, so every block runs exactly once; four
rounds of a 64-bit mixer make the order pseudo-random (unlike an affine map
i -> (a*i + b) mod n, whose consecutive blocks are always `a` apart), and at
most 3 of 4 candidates are skipped, so each next block costs O(1).
"""
from __future__ import annotations

from typing import Iterator, Optional

import numpy as np

__all__ = ["block_ids", "BLOCK_ORDERS", "SHUFFLE_IN_MEMORY"]

BLOCK_ORDERS = ("sequential", "random")
SHUFFLE_IN_MEMORY = 1 << 20  # grids up to this many blocks get a NumPy permutation

_ROUNDS = 4
_MASK64 = (1 << 64) - 1


def block_ids(grid: tuple[int, int, int], order: str,
              seed: Optional[int] = None) -> Iterator[tuple[int, int, int]]:
    """The (x, y, z) block ids of `grid` in `order` ("sequential" or "random",
    seeded by `seed`; None draws a fresh seed), generated lazily."""
    gx, gy, gz = grid
    if order == "sequential":
        return ((x, y, z) for z in range(gz) for y in range(gy) for x in range(gx))
    gxy = gx * gy
    return ((i % gx, i // gx % gy, i // gxy) for i in _shuffled(gxy * gz, seed))


def _shuffled(n: int, seed: Optional[int]) -> Iterator[int]:
    """A pseudo-random permutation of range(n), generated lazily."""
    rng = np.random.default_rng(seed)
    if n <= SHUFFLE_IN_MEMORY:
        return map(int, rng.permutation(n))
    keys = tuple(int(k) for k in rng.integers(0, 2**63, size=_ROUNDS, dtype=np.int64))
    return _feistel(n, keys)


def _feistel(n: int, keys: tuple[int, ...]) -> Iterator[int]:
    """range(n) permuted by a balanced Feistel network on 2 * half bits."""
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = (1 << half) - 1
    for i in range(1 << (2 * half)):
        left, right = i >> half, i & mask
        for key in keys:
            left, right = right, left ^ (_mix(right ^ key) & mask)
        x = (left << half) | right
        if x < n:
            yield x


def _mix(z: int) -> int:
    """SplitMix64's finalizer: a 64-bit bijection with full avalanche."""
    z = (z * 0xBF58476D1CE4E5B9) & _MASK64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)
