"""Profile the first launch of a vector add in a new process whose disk cache
is already warm (run it twice; the second run is the one to read).

    python benchmarks/profile_warm_start.py
"""
from __future__ import annotations

import cProfile
import pstats
import time

import cupy as cp

import tilecore as ct


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) +
             ct.load(b, index=(bid,), shape=(TILE,)))


def main() -> None:
    a = cp.ones(1 << 20, cp.float32)
    b, c = cp.ones_like(a), cp.empty_like(a)
    cp.cuda.runtime.deviceSynchronize()
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    ct.launch(None, (256,), vec_add, (a, b, c, 4096))
    prof.disable()
    print(f"first launch: {(time.perf_counter() - t) * 1e3:.1f} ms")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(22)


if __name__ == "__main__":
    main()
