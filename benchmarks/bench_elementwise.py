"""Element-wise c = a + b in float32 for n = 2^20 ... 2^28: tilecore beside
PyTorch, CuPy and Triton, with the device-to-device copy bandwidth of the
same run. Bandwidth counts bytes read plus written (12 bytes per element).

    python benchmarks/bench_elementwise.py [--out DIR] [--sweep]
"""
from __future__ import annotations

import sys

import cupy as cp
import torch
import triton

import tilecore as ct
from kernels import triton_add
from common import bench_ms, copy_bandwidth_gbs, device_info, parse_out, print_table, write_json

TILE = 4096


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,))
    tb = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=ta + tb)


def same_size_copy_gbs(n: int) -> float:
    """Copy bandwidth for a copy that moves as many bytes as c = a + b (12n)."""
    src = torch.empty(6 * n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 12 * n / bench_ms(lambda: dst.copy_(src)) / 1e6


def sweep(stream) -> None:
    """Tile sizes beside each other at a few sizes (to choose TILE)."""
    rows = []
    for log2n in (22, 24, 26):
        n = 1 << log2n
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.empty_like(a)
        row = [f"2^{log2n}"]
        for tile in (1024, 2048, 4096, 8192, 16384):
            grid = (ct.cdiv(n, tile),)
            ms = bench_ms(lambda: ct.launch(stream, grid, vec_add, (a, b, c, tile)))
            row.append(round(12 * n / ms / 1e6, 1))
        rows.append(row)
    print_table("TILE sweep, GB/s", ["n", "1024", "2048", "4096", "8192", "16384"], rows)


def main() -> None:
    out = parse_out()
    if "--sweep" in sys.argv:
        sweep(torch.cuda.current_stream())
    copy_gbs = copy_bandwidth_gbs()
    rows, records = [], []
    stream = torch.cuda.current_stream()
    for log2n in range(20, 29):
        n = 1 << log2n
        a = torch.randn(n, device="cuda")
        b = torch.randn(n, device="cuda")
        c = torch.empty_like(a)
        grid = (ct.cdiv(n, TILE),)
        ct.launch(stream, grid, vec_add, (a, b, c, TILE))
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), "tilecore vec_add is wrong"
        ca, cb = cp.asarray(a), cp.asarray(b)
        cc = cp.empty_like(ca)
        times = {
            "tilecore": bench_ms(lambda: ct.launch(stream, grid, vec_add, (a, b, c, TILE))),
            "torch": bench_ms(lambda: torch.add(a, b, out=c)),
            "cupy": bench_ms(lambda: cp.add(ca, cb, out=cc)),
            "triton": bench_ms(lambda: triton_add[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)),
        }
        gbs = {k: 12 * n / ms / 1e6 for k, ms in times.items()}
        same = same_size_copy_gbs(n)
        rows.append([f"2^{log2n}", *(round(gbs[k], 1) for k in times), round(same, 1),
                     f"{100 * gbs['tilecore'] / copy_gbs:.1f}%",
                     f"{100 * gbs['tilecore'] / same:.1f}%"])
        records.append({"n": n, "ms": times, "gbs": gbs, "copy_same_bytes_gbs": same})
    print_table(f"c = a + b, float32, GB/s (1 GiB copy bandwidth {copy_gbs:.0f} GB/s)",
                ["n", "tilecore", "torch", "cupy", "triton", "copy, same bytes",
                 "tilecore/1GiB copy", "tilecore/same-size copy"], rows)
    path = write_json(out, "elementwise", {**device_info(), "copy_gbs": copy_gbs,
                                           "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
