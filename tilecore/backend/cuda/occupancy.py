"""Registers and occupancy: a kernel whose register count lies a few registers
above what one more resident block per SM allows is rebuilt with
`__launch_bounds__(threads, blocks)`, so that ptxas fits it there.

Memory-bound tile kernels live on the bytes in flight per SM, so losing a
resident block to two registers costs far more than the registers save: a
float32 layer-norm over rows of 4096 (512 threads) that ptxas gave 42
registers ran two blocks per SM and 6.5% slower than at 40 registers and
three blocks (H100). The rebuild is kept only when its stack (where spills
go) is no larger than before, and only when the kernel names no `occupancy`
of its own. Registers and stack are read from the cubin (cubin_info.py).
"""
from __future__ import annotations

from typing import Optional

from .arch import arch_number

__all__ = ["blocks_per_sm", "tighter_min_blocks"]

REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256        # registers are allocated per warp in units of 256
SLACK = 4                  # at most this many registers over the next level are squeezed

# (resident threads, resident blocks) per SM by compute capability: the CUDA C++
# Programming Guide's table of technical specifications. An unlisted
# architecture takes the nearest listed one below it.
_SM_LIMITS = {80: (2048, 32), 86: (1536, 16), 87: (2048, 16), 89: (1536, 24), 90: (2048, 32),
              100: (2048, 32), 120: (1536, 32)}


def _limits(arch: str) -> tuple[int, int]:
    cc = arch_number(arch)
    below = [c for c in _SM_LIMITS if c <= cc]
    return _SM_LIMITS[max(below)] if below else _SM_LIMITS[min(_SM_LIMITS)]


def blocks_per_sm(threads: int, registers: int, arch: str) -> int:
    """Resident blocks of `threads` threads using `registers` each, on one SM of `arch`
    (registers, threads and the block limit; no shared memory limit)."""
    max_threads, max_blocks = _limits(arch)
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_registers = REGISTERS_PER_SM // per_warp // warps if per_warp else max_blocks
    return min(max_blocks, max_threads // (warps * 32), by_registers)


def tighter_min_blocks(threads: int, registers: int, arch: str) -> Optional[int]:
    """The blocks per SM to ask ptxas for, when `registers` is at most SLACK
    above the count one allocation unit lower and that count gives more
    resident blocks; else None."""
    lower = -(-registers // 8) * 8 - 8  # per-thread registers one allocation unit lower
    if lower <= 0 or registers - lower > SLACK:
        return None
    more = blocks_per_sm(threads, lower, arch)
    return more if more > blocks_per_sm(threads, registers, arch) else None
