"""Run one row kernel of bench_rows once (tilecore's, or with `triton` as a
fourth argument Triton's), for a profiler (ncu) to capture.

    ncu --kernel-name tc_softmax python benchmarks/profile_rows.py softmax bfloat16 1024
    ncu --kernel-name regex:triton python benchmarks/profile_rows.py layer_norm bfloat16 4096 triton
"""
from __future__ import annotations

import sys

import torch

import tilecore as ct
from bench_rows import ROWS, _warps, layer_norm, softmax, triton_layer_norm, triton_softmax


def main() -> None:
    op, dtype, n = sys.argv[1], getattr(torch, sys.argv[2]), int(sys.argv[3])
    use_triton = sys.argv[4:] == ["triton"]
    x = torch.randn(ROWS, n, device="cuda", dtype=dtype)
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream()
    w = torch.randn(n, device="cuda", dtype=dtype)
    b = torch.zeros_like(w)
    if op == "softmax" and use_triton:
        triton_softmax[(ROWS,)](x, y, n, n, BLOCK=n, num_warps=_warps(n))
    elif op == "softmax":
        ct.launch(stream, (ROWS,), softmax, (x, y, n))
    elif use_triton:
        triton_layer_norm[(ROWS,)](x, w, b, y, n, n, 1e-5, BLOCK=n, num_warps=_warps(n))
    else:
        ct.launch(stream, (ROWS,), layer_norm, (x, w, b, y, 1e-5, n))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
