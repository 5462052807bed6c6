"""Shared pieces of the benchmark scripts: timing with CUDA events (through
Triton's do_bench, which flushes L2 between repetitions), the device-to-device
copy bandwidth measured in the same run, table printing and JSON output."""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Callable

import torch


def bench_ms(fn: Callable[[], object], warmup_ms: int = 25, rep_ms: int = 200) -> float:
    """Median milliseconds of `fn` on the current stream (L2 flushed between runs)."""
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    return 2 * nbytes / ms / 1e6


def device_info() -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "python": platform.python_version()}


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
