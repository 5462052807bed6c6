"""Shared pieces of the benchmark scripts: timing with CUDA events, the
device-to-device copy bandwidth measured in the same run, table printing and
JSON output.

Two timers. `steady_ms` is the one the tables use: back-to-back calls over
rotating buffer sets, many calls between two events. `bench_ms` is Triton's
do_bench (one call between two events, 256 MB of L2-flushing zeros written
before each), kept for comparison: it charges each call with writing back the
flush's dirty L2 lines (up to 50 MB, 4% of a 2^24 add), and one call of 30 us
is timed to the events' 0.5 us resolution."""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from tilecore import config
from tilecore.tune.measure import GpuTimer, measure

try:
    import torch
except ImportError:  # bench_compile_length.py needs no GPU stack
    torch = None


def bench_ms(fn: Callable[[], object], warmup_ms: int = 25, rep_ms: int = 200) -> float:
    """Median milliseconds of `fn` on the current stream (L2 flushed between runs)."""
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def buffer_sets(set_bytes: int, min_total: int = 256 << 20) -> int:
    """How many buffer sets of `set_bytes` a steady-state timing rotates over:
    enough that together they span five times the H100's 50 MB L2, so no call
    finds its inputs left in L2 by the calls before it."""
    return max(2, -(-min_total // max(set_bytes, 1)))


def steady_ms(fns: Sequence[Callable[[], object]], min_calls: int = 20, groups: int = 15
              ) -> float:
    """Median milliseconds per call of back-to-back calls cycling through `fns`
    (the same work on different buffer sets: see buffer_sets), timed in groups
    of at least `min_calls` calls between two CUDA events. This is the steady
    state of a stream of such kernels: each call pays for its own reads and
    writes, including writing back the dirty lines its predecessor left in L2.
    Each group is queued behind a spinning kernel that outlasts the queueing,
    so the host's launch time never starves the GPU (Triton's launch takes
    longer than a 2^20 add runs). The timing is tilecore.tune.measure's (the
    tuner's), with `groups` samples of that many calls each."""
    per_group = len(fns) * max(1, -(-min_calls // len(fns)))
    return measure(fns, calls_per_sample=per_group, min_samples=groups, max_samples=groups,
                   timer=GpuTimer(check_throttle=False)).ms


def events_ms(fns: Sequence[Callable[[], object]], calls: int = 20, repeats: int = 7) -> float:
    """Median milliseconds per call of `calls` back-to-back calls cycling
    through `fns`, between two CUDA events recorded after a synchronization:
    for calls that wait for the GPU themselves (steady_ms cannot queue them
    ahead of a spinning kernel), so host time counts as users see it."""
    return measure(fns, calls_per_sample=calls, min_samples=repeats, max_samples=repeats,
                   timer=GpuTimer(cover_launch=False, check_throttle=False)).ms


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth of a large copy (steady state), counting
    bytes read plus bytes written."""
    pairs = [(torch.empty(nbytes, dtype=torch.uint8, device="cuda"),
              torch.empty(nbytes, dtype=torch.uint8, device="cuda")) for _ in range(2)]
    ms = steady_ms([lambda s=s, d=d: d.copy_(s) for s, d in pairs], min_calls=8, groups=7)
    return 2 * nbytes / ms / 1e6


def same_bytes_copy_gbs(sets) -> float:
    """Copy of each (x, y) set's input into its output over the same rotating sets, GB/s
    read + written: what a single-pass scan of that size could reach (a large copy
    runs faster than a small one)."""
    import torch
    pairs = [(torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda"))
             for x, y in sets]
    ms = steady_ms([lambda s=s, d=d: d.copy_(s) for s, d in pairs])   # as copy_bandwidth_gbs
    return 2 * pairs[0][0].nbytes / ms / 1e6


def flushed_copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """The same copy timed by bench_ms (L2 flushed before each call)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / bench_ms(lambda: dst.copy_(src)) / 1e6


def plain_order(kernel, first_launch: Callable[[object], object]):
    """A second kernel object for `kernel`'s function that launches in plain
    stream order: its specialization is loaded by `first_launch(copy)` with
    TILECORE_PDL=0, so a table can show what programmatic dependent launch adds."""
    import tilecore as ct
    copy = ct.kernel(kernel.pyfunc)
    with config.override("TILECORE_PDL", "0"):
        first_launch(copy)
    torch.cuda.synchronize()
    return copy


def device_info() -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "python": platform.python_version()}


def script_flag(name: str) -> bool:
    """Whether a script's own flag `name` was given (taken out of sys.argv, so
    that parse_out, which knows only the shared options, does not refuse it)."""
    if name in sys.argv:
        sys.argv.remove(name)
        return True
    return False


def script_option(name: str, default):
    """A script's own option `name VALUE[,VALUE...]` as a list of strings (taken
    out of sys.argv, as script_flag), or `default`."""
    if name in sys.argv:
        i = sys.argv.index(name)
        value = sys.argv[i + 1].split(",")
        del sys.argv[i:i + 2]
        return value
    return default


def parse_out() -> Path:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results", help="directory for the JSON file")
    ap.add_argument("--sweep", action="store_true", help="also sweep tile sizes (where offered)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="median over this many interleaved rounds (where offered)")
    return Path(ap.parse_args().out)


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(h)), *(len(_fmt(r[i])) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(_fmt(c).ljust(w) for c, w in zip(r, widths)) + " |")


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
    return str(v)


def write_json(out_dir: Path, name: str, payload: dict) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path
