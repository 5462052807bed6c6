"""256-bin histogram of 2^27 uint8 samples, uniformly random and all equal:
the sample (examples/histogram.py: atomic_add, privatised per block in shared
memory by the compiler) beside torch.bincount (the same uint8 samples),
torch.histc (on a float32 copy of the samples, 4 bytes each: it takes no
integers on the GPU), CUB's histogram_even through cuda.compute, and the
device-to-device copy, in one run. tilecore's time includes clearing the bins
(the kernel adds to them); torch allocates its output each call, and both of
its functions wait for the GPU inside each call (bincount reads the input's
maximum back), so every implementation is timed the same way: 20 calls
between two CUDA events after a synchronization (common.events_ms). Bandwidth
is bytes of samples read over time. The issue's goal: at least torch.

    python benchmarks/bench_histogram.py [--out DIR]
"""
from __future__ import annotations

import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch

from common import (buffer_sets, copy_bandwidth_gbs, device_info, events_ms, parse_out,
                    print_table, write_json)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from histogram import histogram  # noqa: E402

N = 1 << 27


def _cub(samples, bins):
    """cuda.compute's histogram_even over 256 integer levels, or None."""
    try:
        import cuda.compute as cc
    except ImportError as e:
        print(f"CUB (cuda.compute) not measured: {e}")
        return None
    levels = (np.array([257], np.int32), np.array([0], np.int32), np.array([256], np.int32))
    hist = cc.make_histogram_even(d_samples=samples, d_histogram=bins,
                                  h_num_output_levels=levels[0], h_lower_level=levels[1],
                                  h_upper_level=levels[2], num_samples=N)
    kw = dict(h_num_output_levels=levels[0], h_lower_level=levels[1], h_upper_level=levels[2],
              num_samples=N)
    temp = cp.empty(max(1, hist(temp_storage=None, d_samples=samples, d_histogram=bins, **kw)),
                    cp.uint8)
    return lambda s, b: hist(temp_storage=temp, d_samples=s, d_histogram=b, **kw)


def main() -> None:
    out = parse_out()
    copy = copy_bandwidth_gbs()
    rows, records = [], []
    for kind in ("uniform", "all equal"):
        gen = cp.random.default_rng(5)
        sets = [(gen.integers(0, 256, N, dtype=cp.uint8) if kind == "uniform"
                 else cp.full(N, 77, cp.uint8)) for _ in range(buffer_sets(N))]
        floats = [torch.as_tensor(s, device="cuda").float() for s in sets[:2]]
        want = np.bincount(cp.asnumpy(sets[0]), minlength=256)
        bins = cp.zeros(256, cp.int32)

        def tile(s, b=bins):
            b.fill(0)
            histogram(s, b)

        impls = {"tilecore": [lambda s=s: tile(s) for s in sets],
                 "torch.bincount": [lambda s=s: torch.bincount(torch.as_tensor(s, device="cuda"),
                                                               minlength=256) for s in sets],
                 "torch.histc (float32)": [lambda f=f: torch.histc(f, 256, 0, 255)
                                           for f in floats]}
        cub = _cub(sets[0], cp.zeros(256, cp.int32))
        if cub is not None:
            cub_bins = cp.zeros(256, cp.int32)
            impls["CUB histogram_even"] = [lambda s=s: cub(s, cub_bins) for s in sets]
        tile(sets[0])
        assert (cp.asnumpy(bins) == want).all(), f"tilecore histogram is wrong ({kind})"
        if cub is not None:
            cub(sets[0], cub_bins)
            assert (cp.asnumpy(cub_bins) == want).all(), f"CUB histogram is wrong ({kind})"
        gbs = {name: N / events_ms(fns) / 1e6 for name, fns in impls.items()}
        best_torch = max(gbs["torch.bincount"], gbs["torch.histc (float32)"])
        rows.append([kind, *(round(v, 1) for v in gbs.values()),
                     f"{100 * gbs['tilecore'] / best_torch:.0f}%"])
        records.append({"samples": kind, "n": N, "gbs": gbs})
        header = ["samples", *gbs, "tilecore / best torch"]
    print(f"device-to-device copy: {copy:.1f} GB/s (read + written)")
    print_table(f"256-bin histogram of 2^27 uint8 samples, GB/s of samples read (steady state)",
                header, rows)
    path = write_json(out, "histogram", {**device_info(), "copy_gbs": copy, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
