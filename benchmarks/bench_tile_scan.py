"""Scans inside a tile: each block loads a tile, scans it (ct.cumsum, or ct.scan
with a lambda) and stores it, beside the same kernel without the scan (load +
store), over n = 2^24 and 2^26 elements, with CuPy arrays. The issue's goal:
a 1-D scan of 4096 float32 runs at the speed of the load and store around it,
so the ratio scan/copy kernel should be ~100%. Bandwidth counts bytes read
plus written (8 bytes per float32 or int32 element); timed in the steady state
(common.steady_ms).

    python benchmarks/bench_tile_scan.py [--out DIR]
"""
from __future__ import annotations

import cupy as cp
import torch

import tilecore as ct
from common import buffer_sets, device_info, parse_out, print_table, steady_ms, write_json

TILES = (1024, 2048, 4096, 8192)
SIZES = (24, 26)


@ct.kernel
def copy_tiles(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=t)


@ct.kernel
def cumsum_tiles(x, y, TILE: ct.Constant[int], REVERSE: ct.Constant[bool]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=ct.cumsum(t, 0, reverse=REVERSE))


@ct.kernel
def lambda_scan_tiles(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(y, index=(ct.bid(0),), tile=ct.scan(t, 0, lambda a, b: a + b, 0))


def _check(stream, n: int, tile: int, dtype) -> None:
    """Each variant against CuPy's cumsum of every tile (float32: to a bound)."""
    x = (cp.random.rand(n) * 4 - 2).astype(dtype) if dtype == cp.float32 else \
        cp.random.randint(-1000, 1000, n).astype(dtype)
    rows = x.reshape(-1, tile).astype(cp.float64)
    expect = {False: cp.cumsum(rows, axis=1), True: cp.cumsum(rows[:, ::-1], axis=1)[:, ::-1]}
    mag = {False: cp.cumsum(cp.abs(rows), axis=1),
           True: cp.cumsum(cp.abs(rows)[:, ::-1], axis=1)[:, ::-1]}  # what each output sums
    y = cp.empty_like(x)
    for name, launch, rev in (
            ("cumsum", lambda: ct.launch(stream, (n // tile,), cumsum_tiles, (x, y, tile, False)),
             False),
            ("cumsum reverse", lambda: ct.launch(stream, (n // tile,), cumsum_tiles,
                                                 (x, y, tile, True)), True),
            ("lambda scan", lambda: ct.launch(stream, (n // tile,), lambda_scan_tiles,
                                              (x, y, tile)), False)):
        y.fill(0)
        launch()
        torch.cuda.synchronize()
        got = y.reshape(-1, tile).astype(cp.float64)
        ref = expect[rev]
        if dtype != cp.float32:
            ref = ref.astype(cp.int64).astype(dtype).astype(cp.float64)  # int32 wraps
        err = cp.abs(got - ref)
        bound = 64 * 2.0 ** -24 * mag[rev] if dtype == cp.float32 else 0
        assert bool(cp.all(err <= bound)), f"{name} is wrong ({dtype.__name__}, tile {tile})"


def main() -> None:
    out = parse_out()
    stream = torch.cuda.current_stream()
    rows, records = [], []
    for dtype in (cp.float32, cp.int32):
        for log2n in SIZES:
            n = 1 << log2n
            sets = [(cp.random.rand(n).astype(dtype), cp.empty(n, dtype))
                    for _ in range(buffer_sets(8 * n))]
            for tile in TILES:
                _check(stream, n, tile, dtype)
                grid = (n // tile,)
                calls = {
                    "load+store": [lambda x=x, y=y: ct.launch(stream, grid, copy_tiles,
                                                              (x, y, tile)) for x, y in sets],
                    "cumsum": [lambda x=x, y=y: ct.launch(stream, grid, cumsum_tiles,
                                                          (x, y, tile, False)) for x, y in sets],
                    "cumsum reverse": [lambda x=x, y=y: ct.launch(
                        stream, grid, cumsum_tiles, (x, y, tile, True)) for x, y in sets],
                    "lambda scan": [lambda x=x, y=y: ct.launch(
                        stream, grid, lambda_scan_tiles, (x, y, tile)) for x, y in sets],
                }
                times = {k: steady_ms(fns) for k, fns in calls.items()}
                gbs = {k: 8 * n / ms / 1e6 for k, ms in times.items()}
                base = gbs["load+store"]
                rows.append([dtype.__name__, f"2^{log2n}", tile,
                             *(round(v, 1) for v in gbs.values()),
                             *(f"{100 * gbs[k] / base:.1f}%" for k in list(calls)[1:])])
                records.append({"dtype": dtype.__name__, "n": n, "tile": tile, "ms": times,
                                "gbs": gbs})
    print_table("load + scan + store per tile, GB/s (steady state), and the scan kernels "
                "relative to load + store",
                ["dtype", "n", "tile", "load+store", "cumsum", "cumsum reverse", "lambda scan",
                 "cumsum/ls", "reverse/ls", "lambda/ls"], rows)
    path = write_json(out, "tile_scan", {**device_info(), "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
