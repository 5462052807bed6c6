"""The register layout of tiles and the kernel-wide launch shape.

A tile of N elements (N a power of two) is spread over the T threads of the
block by one rule that depends only on N: thread t's k-th element is the
row-major element ((k / V) * T + t) * V + k % V, where P = max(1, N / T)
elements per thread and V = min(P, VK) consecutive elements per chunk.
A one-element tile is replicated in every thread. Because the layout only
depends on N, element-wise ops and reshape are per-thread register loops.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Function
from ...ir.types import ArrayType, TileType

__all__ = ["Layout", "kernel_vector_width", "choose_threads", "row_strides", "unrolled_size",
           "COMPACT_BUDGET"]

# Element operations per thread (unrolled_size) above which a kernel is emitted
# compactly (see emit.Ctx.compact). NVVM's optimizer takes time superlinear in
# the straight-line code of one function: fully unrolled element-wise chains of
# 1700, 3500, 8800 and 36000 element operations compiled in 0.4, 0.8, 3 and 90 s
# (NVRTC 13.5, 2 cores; benchmarks/bench_compile_length.py).
COMPACT_BUDGET = 4096


@dataclass(frozen=True)
class Layout:
    n: int        # elements in the tile
    threads: int  # T
    vk: int       # kernel-wide max vector width

    @property
    def per_thread(self) -> int:
        return max(1, self.n // self.threads)

    @property
    def vec(self) -> int:
        return min(self.per_thread, self.vk)

    @property
    def replicated(self) -> bool:
        return self.n == 1

    @property
    def partial(self) -> bool:
        """Some threads hold no element (guard side effects with `valid`)."""
        return 1 < self.n < self.threads

    def elem(self, k: str) -> str:
        """C++ expression: the linear element index of this thread's k-th element."""
        return f"tc::elem<{self.n}, {self.threads}, {self.vec}>({k})"

    def holder(self, e: int) -> tuple[int, int] | None:
        """(k, t): the register k and thread t holding element e of every thread's
        copy (elem's inverse), or None where no thread does (e < 0 or past the
        registers). A replicated tile: (0, -1), every thread."""
        if self.replicated:
            return (0, -1) if e == 0 else None
        if e < 0:
            return None
        chunk, lane = divmod(e, self.vec)
        rnd, t = divmod(chunk, self.threads)
        k = rnd * self.vec + lane
        return (k, t) if k < self.per_thread else None

    def valid(self, e: str) -> str:
        """C++ condition that element `e` exists ("" when always true)."""
        return f"{e} < {self.n}" if self.partial else ""


def kernel_vector_width(fn: Function) -> int:
    """VK = 16 bytes / the smallest itemsize among the array parameters (4 if none)."""
    sizes = [p.value.type.dtype.itemsize for p in fn.params if isinstance(p.value.type, ArrayType)]
    return 16 // min(sizes) if sizes else 4


def _largest_tile(fn: Function) -> int:
    best = 1
    for op in fn.walk():
        for v in op.results:
            if isinstance(v.type, TileType):
                best = max(best, v.type.size)
    return best


def choose_threads(fn: Function, num_threads: int | None, vk: int | None = None) -> int:
    """Block size: the override if given (a power of two in [32, 1024]), else
    enough threads that each holds two full vectors of the largest tile,
    N / (2 VK), clamped to [32, 512] (VK: `vk`, else kernel_vector_width). Two
    16-byte accesses in flight per thread and per array was the best block size
    (or within 0.4%) of every row kernel on the H100 (benchmarks/bench_rows.py
    --sweep)."""
    if num_threads is not None:
        if num_threads < 32 or num_threads > 1024 or num_threads & (num_threads - 1):
            raise ValueError(f"num_threads must be a power of two in [32, 1024], got {num_threads}")
        return num_threads
    t = min(max(_largest_tile(fn) // (2 * (vk or kernel_vector_width(fn))), 32), 512)
    return 1 << (t.bit_length() - 1)


# What a reduction's block-wide steps (shuffles, shared memory) weigh in unrolled_size.
_REDUCTION_STEPS = 32


def unrolled_size(fn: Function, threads: int, vk: int) -> int:
    """Element operations per thread in `fn` with every per-thread loop unrolled:
    for each op (a loop body counted once), the elements per thread of its
    largest tile (result or operand), plus _REDUCTION_STEPS for a reduction. A
    measure of the straight-line code the compiler receives."""
    total = 0
    for op in fn.walk():
        tiles = [v.type for v in (*op.results, *op.operands) if isinstance(v.type, TileType)]
        if tiles:
            total += Layout(max(t.size for t in tiles), threads, vk).per_thread
        if op.name in ("reduce", "argreduce"):
            total += _REDUCTION_STEPS
    return total


def row_strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major element strides of a tile shape."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]
