"""Compile time against kernel length: generated kernels of 250 to 4000 lines
(the lines of the Python kernel body, of ordinary ops), each compiled cold for
sm_90 with the disk cache off, in a new process per (shape, length); every
repeat compiles a fresh kernel object and the minimum is reported (the host is
shared, so timings are noisy: the table gives the load average).

Columns: the front end (Python AST -> optimized IR, `Kernel.ir_for`), code
generation (IR -> C++, `generate`), NVRTC (C++ -> cubin, every call of one
compile: `build` compiles a second time when it fits launch bounds to
occupancy), in wall-clock seconds and in the process's CPU seconds (NVRTC
runs in one thread: on a loaded host, CPU time is the steadier measure), the
generated C++ lines and the kernel's registers.

Shapes (each a cycle of lines repeated to the length):
  ew1d    element-wise chain on (256,) float32 tiles: * + exp where max sqrt abs min
  scalar  the same with scalar parameters and 0-d scalar arithmetic in the chain
  reduce  (256,) tiles with a reduction to one element every third line
  ew2d    element-wise chain on (64, 64) float32 tiles with row/column reductions
  loop    the ew1d chain as the body of a `for` loop

    python benchmarks/bench_compile_length.py [--out DIR] [--lines 250,500,...]
        [--shapes ew1d,...] [--repeat N] [--timeout S]

--runtime (on a GPU, with PyTorch) instead times each kernel's launches (arrays of
2^24 float32, steady state) built both ways: fully unrolled and compact (see
tilecore/backend/cuda/emit.py, Ctx.compact), at lengths given by --lines
(default 100,200: fully unrolled kernels of thousands of lines take minutes to
build). --compact-resident-threads N builds compact kernels with launch bounds
asking for N resident threads per SM (a register cap, host/compile.py
COMPACT_RESIDENT_THREADS), to compare with the default (none).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

LINES = (250, 500, 1000, 2000, 4000)

_EW = ["x = x * 1.0001 + y",
       "y = ct.exp(x * -0.01) - y * 0.5",
       "x = ct.where(x > y, x - y, y - x)",
       "y = ct.maximum(x, y) * 0.999 + 0.001",
       "x = ct.sqrt(ct.abs(x) + 1.0) - y",
       "y = ct.minimum(y, x + 2.0)"]

_SCALAR = ["s = s * 0.999 + alpha",
           "x = x * s + y",
           "y = ct.exp(y * -0.01) * s - x",
           "s = ct.maximum(s, alpha) - 0.5",
           "x = ct.where(x > s, x - s, y)",
           "y = y * alpha + x * s"]

_REDUCE = ["m = ct.max(x, axis=0, keepdims=True)",
           "x = x - m",
           "y = ct.exp(x) + y * 0.5",
           "s = ct.sum(y, axis=0, keepdims=True)",
           "y = y / s",
           "x = x + y * 0.25"]

_EW2D = _EW + ["x = x - ct.sum(x, axis=1, keepdims=True) * 0.015625",
               "y = y + ct.max(x, axis=0, keepdims=True) * 0.5"]

_1D_HEAD = ["bid = ct.bid(0)",
            "x = ct.load(a, index=(bid,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)",
            "y = ct.load(b, index=(bid,), shape=(256,), padding_mode=ct.PaddingMode.ZERO)"]
_1D_TAIL = ["ct.store(c, index=(bid,), tile=x + y)"]
_2D_HEAD = ["bx = ct.bid(0)",
            "by = ct.bid(1)",
            "x = ct.load(a, index=(bx, by), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)",
            "y = ct.load(b, index=(bx, by), shape=(64, 64), padding_mode=ct.PaddingMode.ZERO)"]
_2D_TAIL = ["ct.store(c, index=(bx, by), tile=x + y)"]


def kernel_source(shape: str, lines: int, name: str = "k") -> str:
    """Python source of a kernel `name(a, b, c, alpha, n)` whose body has
    `lines` lines of the given shape."""
    head, tail, cycle, indent = _1D_HEAD, _1D_TAIL, _EW, ""
    if shape == "scalar":
        head, cycle = head + ["s = alpha * 1.0"], _SCALAR
    elif shape == "reduce":
        cycle = _REDUCE
    elif shape == "ew2d":
        head, tail, cycle = _2D_HEAD, _2D_TAIL, _EW2D
    elif shape == "loop":
        head, indent = head + ["for i in range(n):"], "    "
    elif shape != "ew1d":
        raise ValueError(f"unknown shape {shape!r}")
    count = max(1, lines - len(head) - len(tail))
    body = head + [indent + cycle[i % len(cycle)] for i in range(count)] + tail
    return ("import tilecore as ct\n\n\n@ct.kernel\n"
            f"def {name}(a, b, c, alpha, n):\n" + "".join(f"    {ln}\n" for ln in body))


def load_kernel(shape: str, lines: int, folder: Path, tag: str):
    """A fresh kernel object `k` of `shape` and `lines`, from a file in `folder`."""
    name = f"k_{shape}_{lines}_{tag}"
    path = folder / f"{name}.py"
    path.write_text(kernel_source(shape, lines))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


CHILD = r"""
import json, os, sys, time
from pathlib import Path
import numpy as np
import tilecore as ct
import tilecore.host.compile as hc
from tilecore.kernel import Kernel

shape, lines, repeat, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if len(sys.argv) > 5:
    import tilecore.backend.cuda.nvrtc as nvrtc
    nvrtc.COMPACT_FAST_COMPILE = None if sys.argv[5] == "none" else sys.argv[5]
if os.environ.get("BENCH_COMPACT_RESIDENT_THREADS"):
    hc.COMPACT_RESIDENT_THREADS = int(os.environ["BENCH_COMPACT_RESIDENT_THREADS"]) or None
sys.path.insert(0, folder)
from bench_compile_length import load_kernel

times = {"frontend_s": [], "codegen_s": [], "nvrtc_s": [], "nvrtc_cpu_s": []}
record = {}

def timed(key, f):
    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        try:
            return f(*a, **k)
        finally:
            record[key] = record.get(key, 0.0) + time.perf_counter() - t
            if key == "nvrtc_s":
                record["nvrtc_cpu_s"] = record.get("nvrtc_cpu_s", 0.0) + time.process_time() - c
    return wrapper

Kernel.ir_for = timed("frontend_s", Kernel.ir_for)
hc.generate = timed("codegen_s", hc.generate)
hc.compile_cubin_report = timed("nvrtc_s", hc.compile_cubin_report)
nd = 2 if shape == "ew2d" else 1
arr = np.zeros((128,) * nd, np.float32)
for r in range(repeat):
    kernel = load_kernel(shape, lines, Path.cwd(), str(r))
    record.clear()
    compiled = ct.compile(kernel, (arr, arr, arr, np.float32(1.5), np.int32(3)), arch="sm_90")
    for key in times:
        times[key].append(record.get(key, 0.0))
print(json.dumps({**times, "cxx_lines": compiled.source.count("\n"),
                  "cubin_bytes": len(compiled.cubin), "registers": compiled.registers,
                  "stack_bytes": compiled.stack_bytes}))
"""


def run_child(shape: str, lines: int, repeat: int, timeout: float, work: Path,
              fast_compile: str | None = None) -> dict | None:
    """Measure one (shape, length) in a new process; None when it ran past `timeout`."""
    script = work / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TILECORE_CACHE_DIR="0")
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent), env.get("PYTHONPATH", "")])
    try:
        proc = subprocess.run([sys.executable, str(script), shape, str(lines), str(repeat),
                               str(here), *([fast_compile] if fast_compile else [])], env=env, cwd=work, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def runtime(shapes: list[str], lengths: list[int], out: Path) -> None:
    """Time each kernel built fully unrolled and compact on the GPU."""
    import torch

    import tilecore as ct
    import tilecore.backend.cuda.emit as emit
    from common import device_info, print_table, steady_ms, write_json

    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for lines in lengths:
                size = (4096, 4096) if shape == "ew2d" else (1 << 24,)
                grid = (64, 64) if shape == "ew2d" else (size[0] // 256,)
                a, b = torch.rand(size, device="cuda"), torch.rand(size, device="cuda")
                ms, outs = {}, {}
                for mode, budget in (("unrolled", 1 << 62), ("compact", 0)):
                    kernel = load_kernel(shape, lines, Path(tmp), mode)
                    c = torch.empty_like(a)
                    args = (a, b, c, 1.5, 3)
                    default, emit.COMPACT_BUDGET = emit.COMPACT_BUDGET, budget
                    try:  # the first launch builds this specialization
                        ct.launch(None, grid, kernel, args)
                    finally:
                        emit.COMPACT_BUDGET = default
                    torch.cuda.synchronize()
                    outs[mode] = c.clone()
                    ms[mode] = steady_ms([lambda k=kernel, x=args: ct.launch(None, grid, k, x)])
                same = torch.isclose(outs["compact"], outs["unrolled"], rtol=1e-4, atol=1e-5,
                                     equal_nan=True).float().mean().item()
                rows.append([shape, lines, round(ms["unrolled"], 3), round(ms["compact"], 3),
                             f"{ms['compact'] / ms['unrolled']:.3f}", f"{same:.4f}"])
                results.append({"shape": shape, "lines": lines, **ms, "close_fraction": same})
                print(" | ".join(map(str, rows[-1])), flush=True)
    print_table("launch time, ms (steady state), fully unrolled vs compact",
                ["shape", "lines", "unrolled", "compact", "compact / unrolled",
                 "close elements"], rows)
    path = write_json(out, "compile_length_runtime", {**device_info(), "results": results})
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results", help="directory for the JSON file")
    ap.add_argument("--lines", default=",".join(map(str, LINES)))
    ap.add_argument("--shapes", default="ew1d,scalar,reduce,ew2d,loop")
    ap.add_argument("--repeat", type=int, default=2, help="fresh kernels per length (min taken)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds per (shape, length) child; longer ones are skipped")
    ap.add_argument("--runtime", action="store_true",
                    help="time launches of unrolled and compact builds on the GPU")
    ap.add_argument("--compact-resident-threads", type=int, default=None,
                    help="threads per SM the launch bounds of compact kernels ask for (a "
                         "register cap; 0 for none; default: tilecore's, "
                         "host/compile.COMPACT_RESIDENT_THREADS)")
    ap.add_argument("--fast-compile", default=None,
                    help="NVRTC -Ofc level for compact kernels (min, mid, max, or none for "
                         "the full -O level; default: tilecore's, nvrtc.COMPACT_FAST_COMPILE)")
    args = ap.parse_args()
    if args.fast_compile is not None:
        import tilecore.backend.cuda.nvrtc as nvrtc
        nvrtc.COMPACT_FAST_COMPILE = None if args.fast_compile == "none" else args.fast_compile
    if args.compact_resident_threads is not None:
        import tilecore.host.compile as hc
        hc.COMPACT_RESIDENT_THREADS = args.compact_resident_threads or None
        os.environ["BENCH_COMPACT_RESIDENT_THREADS"] = str(args.compact_resident_threads)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import print_table, write_json

    shapes = args.shapes.split(",")
    if args.runtime:
        lengths = [100, 200] if args.lines == ",".join(map(str, LINES)) else \
            [int(n) for n in args.lines.split(",")]
        runtime(shapes, lengths, Path(args.out))
        return

    results, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for lines in map(int, args.lines.split(",")):
                load = os.getloadavg()[0]
                r = run_child(shape, lines, args.repeat, args.timeout, Path(tmp), args.fast_compile)
                if r is None:
                    rows.append([shape, lines, f"> {args.timeout:.0f} s", "", "", "", "", "", "",
                                 f"{load:.1f}"])
                    results.append({"shape": shape, "lines": lines, "timed_out": args.timeout})
                    continue
                best = {k: min(r[k]) for k in ("frontend_s", "codegen_s", "nvrtc_s")}
                rows.append([shape, lines, round(sum(best.values()), 2), round(best["frontend_s"], 3),
                             round(best["codegen_s"], 3), round(best["nvrtc_s"], 2),
                             round(min(r["nvrtc_cpu_s"]), 2), r["cxx_lines"], r["registers"],
                             f"{load:.1f}"])
                results.append({"shape": shape, "lines": lines, "load_avg": load, **r})
                print(" | ".join(map(str, rows[-1])), flush=True)
    print_table(f"cold compile for sm_90 (disk cache off), seconds, min of {args.repeat}",
                ["shape", "lines", "total", "front end", "codegen", "NVRTC", "NVRTC CPU",
                 "C++ lines", "registers", "load avg"], rows)
    path = write_json(Path(args.out), "compile_length",
                      {"nproc": os.cpu_count(), "repeat": args.repeat, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
