"""Element-wise c = a + b in float32 for n = 2^20 ... 2^28: tilecore beside
PyTorch, CuPy and Triton, with the device-to-device copy bandwidth of the
same run. Bandwidth counts bytes read plus written (12 bytes per element).
Timed in the steady state (common.steady_ms: back-to-back over rotating
buffers); a second table times the same calls with do_bench (L2 flushed).
"tilecore, no PDL" is the same kernel launched in plain stream order
(TILECORE_PDL=0), without programmatic dependent launch; "triton, PDL" is
Triton's kernel with `gdc_wait()` first, launched with `launch_pdl=True`.

    python benchmarks/bench_elementwise.py [--out DIR] [--sweep]
"""
from __future__ import annotations

import sys

import cupy as cp
import torch
import triton

import tilecore as ct
from kernels import triton_add
from common import (bench_ms, buffer_sets, copy_bandwidth_gbs, device_info,
                    flushed_copy_bandwidth_gbs, parse_out, plain_order, print_table, steady_ms,
                    write_json)

TILE = 1024  # as Triton's kernel: level with it at 2^24 and 2^26 in an A/B, 4096 was 0.3% behind


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,))
    tb = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=ta + tb)


def sweep(stream) -> None:
    """Tile sizes beside each other at a few sizes (to choose TILE)."""
    rows = []
    for log2n in (22, 24, 26):
        n = 1 << log2n
        sets = [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda"),
                 torch.empty(n, device="cuda")) for _ in range(buffer_sets(12 * n))]
        row = [f"2^{log2n}"]
        for tile in (1024, 2048, 4096, 8192, 16384):
            grid = (ct.cdiv(n, tile),)
            ms = steady_ms([lambda a=a, b=b, c=c: ct.launch(stream, grid, vec_add, (a, b, c, tile))
                            for a, b, c in sets])
            row.append(round(12 * n / ms / 1e6, 1))
        rows.append(row)
    print_table("TILE sweep, GB/s", ["n", "1024", "2048", "4096", "8192", "16384"], rows)


def main() -> None:
    out = parse_out()
    stream = torch.cuda.current_stream()
    if "--sweep" in sys.argv:
        sweep(stream)
    copy_gbs = copy_bandwidth_gbs()
    flushed_copy_gbs = flushed_copy_bandwidth_gbs()
    rows, flushed_rows, records = [], [], []
    for log2n in range(20, 29):
        n = 1 << log2n
        sets = [(torch.randn(n, device="cuda"), torch.randn(n, device="cuda"),
                 torch.empty(n, device="cuda")) for _ in range(buffer_sets(12 * n))]
        copies = [(torch.empty(6 * n, dtype=torch.uint8, device="cuda"),
                   torch.empty(6 * n, dtype=torch.uint8, device="cuda")) for _ in sets]
        grid = (ct.cdiv(n, TILE),)
        plain = plain_order(vec_add, lambda k: ct.launch(stream, grid, k, (*sets[0], TILE)))
        for kernel in (vec_add, plain):
            for a, b, c in sets:
                c.fill_(float("nan"))
                ct.launch(stream, grid, kernel, (a, b, c, TILE))
                torch.cuda.synchronize()
                assert torch.equal(c, a + b), "tilecore vec_add is wrong"
        cupy_sets = [tuple(cp.asarray(t) for t in abc) for abc in sets]
        calls = {
            "tilecore": [lambda a=a, b=b, c=c: ct.launch(stream, grid, vec_add, (a, b, c, TILE))
                         for a, b, c in sets],
            "tilecore, no PDL": [lambda a=a, b=b, c=c: ct.launch(stream, grid, plain,
                                                                 (a, b, c, TILE))
                                 for a, b, c in sets],
            "torch": [lambda a=a, b=b, c=c: torch.add(a, b, out=c) for a, b, c in sets],
            "cupy": [lambda a=a, b=b, c=c: cp.add(a, b, out=c) for a, b, c in cupy_sets],
            "triton": [lambda a=a, b=b, c=c: triton_add[(triton.cdiv(n, 1024),)](
                a, b, c, n, BLOCK=1024) for a, b, c in sets],
            "triton, PDL": [lambda a=a, b=b, c=c: triton_add[(triton.cdiv(n, 1024),)](
                a, b, c, n, BLOCK=1024, PDL=True, launch_pdl=True) for a, b, c in sets],
            "copy, same bytes": [lambda s=s, d=d: d.copy_(s) for s, d in copies],
        }
        times = {k: steady_ms(fns) for k, fns in calls.items()}
        gbs = {k: 12 * n / ms / 1e6 for k, ms in times.items()}
        flushed = {k: 12 * n / bench_ms(calls[k][0]) / 1e6
                   for k in ("tilecore", "triton", "copy, same bytes")}
        name = f"2^{log2n}"
        rows.append([name, *(round(v, 1) for v in gbs.values()),
                     f"{100 * gbs['tilecore'] / copy_gbs:.1f}%",
                     f"{100 * gbs['tilecore'] / gbs['triton']:.1f}%",
                     f"{100 * gbs['tilecore, no PDL'] / gbs['triton']:.1f}%",
                     f"{100 * gbs['tilecore'] / gbs['triton, PDL']:.1f}%"])
        flushed_rows.append([name, *(round(v, 1) for v in flushed.values()),
                             f"{100 * flushed['tilecore'] / flushed_copy_gbs:.1f}%"])
        records.append({"n": n, "buffer_sets": len(sets), "ms": times, "gbs": gbs,
                        "flushed_gbs": flushed})
    print_table(f"c = a + b, float32, GB/s, steady state (1 GiB copy: {copy_gbs:.0f} GB/s)",
                ["n", *calls, "tilecore/1GiB copy", "tilecore/triton", "no PDL/triton",
                 "tilecore/triton PDL"], rows)
    print_table(f"the same timed by do_bench, L2 flushed before each call (1 GiB copy: "
                f"{flushed_copy_gbs:.0f} GB/s)",
                ["n", "tilecore", "triton", "copy, same bytes", "tilecore/1GiB copy"],
                flushed_rows)
    path = write_json(out, "elementwise", {**device_info(), "copy_gbs": copy_gbs,
                                           "flushed_copy_gbs": flushed_copy_gbs,
                                           "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
