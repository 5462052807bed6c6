"""Run one row kernel of bench_rows once, for a profiler (ncu) to capture.

    ncu --kernel-name tc_softmax python benchmarks/profile_rows.py softmax bfloat16 1024
"""
from __future__ import annotations

import sys

import torch

import tilecore as ct
from bench_rows import ROWS, layer_norm, softmax


def main() -> None:
    op, dtype, n = sys.argv[1], getattr(torch, sys.argv[2]), int(sys.argv[3])
    x = torch.randn(ROWS, n, device="cuda", dtype=dtype)
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream()
    if op == "softmax":
        ct.launch(stream, (ROWS,), softmax, (x, y, n))
    else:
        w = torch.randn(n, device="cuda", dtype=dtype)
        ct.launch(stream, (ROWS,), layer_norm, (x, w, torch.zeros_like(w), y, 1e-5, n))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
