"""Whole-array inclusive sum: the decoupled look-back sample
(examples/lookback_scan.py: one launch per scan, its scratch arrays zeroed
once) beside CUB (`cuda.compute.make_inclusive_scan`, from the cuda-cccl
package), CuPy's `cumsum` and `torch.cumsum`, and the device-to-device copy,
at 2^24..2^28 float32 and int32 elements, all in one run on one GPU.

Bandwidth counts bytes read plus written (8 per element: a single-pass scan
moves what a copy moves), timed in the steady state (common.steady_ms:
back-to-back calls over rotating buffers). Each implementation is checked
against NumPy before it is timed. The issue's goal: tilecore at >= 90% of the
copy and 10-20% above CUB. The copy is measured twice in the same run: once
over 1 GiB (the large-copy bandwidth) and at each size over the same bytes as
the scan (n items read, n written: what a scan of that size could reach).

    python benchmarks/bench_scan.py [--out DIR] [--sweep] [--sizes 24,26,27,28]
    (--sweep: tiles, window, threads; --sizes: log2 of the item counts)
"""
from __future__ import annotations

import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch

import tilecore as ct
from common import (buffer_sets, copy_bandwidth_gbs, device_info, parse_out, print_table,
                    same_bytes_copy_gbs, script_option, steady_ms, write_json)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from lookback_scan import Scanner  # noqa: E402

SIZES = (24, 26, 27, 28)
DTYPES = (np.float32, np.int32)
TILE, WINDOW = 8192, 32
SWEEP_TILES = (4096, 16384)


class TileScan:
    """The sample's Scanner (scratch allocated and zeroed once, as the device
    scan's temporary storage): one launch per call."""

    def __init__(self, n: int, tile: int, window: int = WINDOW, items_per_thread: int = 64,
                 blocks: int | None = None):
        self.scanner = Scanner(n, tile, window, alloc=cp.zeros, items_per_thread=items_per_thread,
                               blocks=blocks)

    def __call__(self, x, y) -> None:
        self.scanner(x, y)


class CubScan:
    """cuda.compute's inclusive scan with OpKind.PLUS and its temp storage allocated once."""

    def __init__(self, x, y):
        import cuda.compute as cc
        self.cc = cc
        self.scanner = cc.make_inclusive_scan(d_in=x, d_out=y, op=cc.OpKind.PLUS, init_value=None)
        nbytes = self.scanner(temp_storage=None, d_in=x, d_out=y, op=cc.OpKind.PLUS,
                              init_value=None, num_items=x.shape[0])
        self.temp = cp.empty(max(nbytes, 1), cp.uint8)

    def __call__(self, x, y) -> None:
        self.scanner(temp_storage=self.temp, d_in=x, d_out=y, op=self.cc.OpKind.PLUS,
                     init_value=None, num_items=x.shape[0])


def _inputs(n: int, dtype, count: int) -> list:
    rng = cp.random.default_rng(11)
    if dtype == np.int32:
        return [(rng.integers(-100, 100, n, dtype=cp.int32), cp.empty(n, cp.int32))
                for _ in range(count)]
    return [(rng.standard_normal(n, dtype=cp.float32), cp.empty(n, cp.float32))
            for _ in range(count)]


def _check(name: str, fn, x, y) -> None:
    y.fill(0)
    fn(x, y)
    cp.cuda.Device().synchronize()
    host = cp.asnumpy(x).astype(np.float64)
    got = cp.asnumpy(y).astype(np.float64)
    if x.dtype == cp.int32:
        want = np.cumsum(cp.asnumpy(x), dtype=np.int64).astype(np.int32)
        ok = np.array_equal(got, want)
    else:
        bound = x.shape[0] * 2.0 ** -24 * np.cumsum(np.abs(host))
        ok = bool((np.abs(got - np.cumsum(host)) <= bound).all())
    if not ok:
        raise AssertionError(f"{name} is wrong at n={x.shape[0]} ({x.dtype})")


def _peers(x, y) -> dict:
    """Name -> callable(x, y) for every peer that imports here."""
    peers = {"CuPy cumsum": lambda a, b: cp.cumsum(a, out=b),
             "torch.cumsum": lambda a, b: torch.cumsum(torch.as_tensor(a, device="cuda"), 0,
                                                       out=torch.as_tensor(b, device="cuda"))}
    try:
        peers["CUB"] = CubScan(x, y)
    except ImportError as e:
        print(f"CUB (cuda.compute) not measured: {e}")
    return peers


def main() -> None:
    sizes = [int(v) for v in script_option("--sizes", SIZES)]
    out = parse_out()
    sweep = "--sweep" in sys.argv
    copy = copy_bandwidth_gbs()
    rows, records = [], []
    for dtype in DTYPES:
        for log2n in sizes:
            n = 1 << log2n
            sets = _inputs(n, dtype, buffer_sets(8 * n))
            impls = {"tilecore": TileScan(n, TILE)}
            if sweep:
                sms = cp.cuda.Device().attributes["MultiProcessorCount"]
                impls.update({f"tilecore tile {t}": TileScan(n, t) for t in SWEEP_TILES})
                impls["tilecore window 16"] = TileScan(n, TILE, 16)
                impls["tilecore 256 x 32"] = TileScan(n, TILE, items_per_thread=32)
                impls["tilecore 1 block an SM"] = TileScan(n, TILE, blocks=sms)
                impls["tilecore 4 blocks an SM"] = TileScan(n, TILE, blocks=4 * sms)
                # a grid of one block a tile: each block scans one tile (no load-ahead)
                impls["tilecore one tile a block"] = TileScan(n, TILE, blocks=n // TILE)
                impls["tilecore one tile a block, 32768 x 1024"] = TileScan(n, 32768, 16, 32,
                                                                          blocks=n // 32768)
            impls.update(_peers(*sets[0]))
            gbs = {}
            for name, fn in impls.items():
                _check(name, fn, *sets[0])
                ms = steady_ms([lambda x=x, y=y, fn=fn: fn(x, y) for x, y in sets])
                gbs[name] = 8 * n / ms / 1e6
            same = same_bytes_copy_gbs(sets)
            t, cub = gbs["tilecore"], gbs.get("CUB")
            rows.append([np.dtype(dtype).name, f"2^{log2n}", *(round(v, 1) for v in gbs.values()),
                         round(same, 1), f"{100 * t / copy:.1f}%", f"{100 * t / same:.1f}%",
                         f"{100 * t / cub:.1f}%" if cub else "-"])
            records.append({"dtype": np.dtype(dtype).name, "n": n, "gbs": gbs, "copy_gbs": copy,
                            "same_bytes_copy_gbs": same, "tile": TILE})
            header = ["dtype", "n", *gbs, "copy, same bytes", "tilecore / 1 GiB copy",
                      "tilecore / same-bytes copy", "tilecore / CUB"]
    print(f"device-to-device copy: {copy:.1f} GB/s (read + written, 1 GiB)")
    print_table("inclusive sum, GB/s (bytes read + written, steady state)", header, rows)
    path = write_json(out, "scan", {**device_info(), "copy_gbs": copy, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
