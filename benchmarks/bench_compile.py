"""Compile time of a vector-add kernel: cold (empty disk cache, new process)
and warm (disk cache filled, new process), each measured from the first
launch call to its return (front end, code generation, NVRTC or disk-cache
read, module load, launch), plus the import time of tilecore.

    python benchmarks/bench_compile.py [--out DIR]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import device_info, parse_out, print_table, write_json

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cupy as cp
t1 = time.perf_counter()
import tilecore as ct
t2 = time.perf_counter()

@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) +
             ct.load(b, index=(bid,), shape=(TILE,)))

a = cp.ones(1 << 20, cp.float32); b = cp.ones_like(a); c = cp.empty_like(a)
cp.cuda.runtime.deviceSynchronize()
t3 = time.perf_counter()
ct.launch(None, (256,), vec_add, (a, b, c, 4096))
t4 = time.perf_counter()
cp.cuda.runtime.deviceSynchronize()
assert float(c.sum()) == 2 * (1 << 20)
t5 = time.perf_counter()
ct.compile(vec_add, (a, b, c, 2048), arch="sm_90")
t6 = time.perf_counter()
print(json.dumps({"import_tilecore_s": t2 - t1, "first_launch_s": t4 - t3,
                  "aot_compile_other_specialization_s": t6 - t5}))
"""


def run_child(cache_dir: str) -> dict:
    """Run CHILD in a new process (from a file: tile code needs its source)."""
    script = Path(cache_dir) / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, TILECORE_CACHE_DIR=str(Path(cache_dir) / "cache"))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + os.pathsep + \
        env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    out = parse_out()
    with tempfile.TemporaryDirectory() as cache:
        cold = run_child(cache)
        warm = run_child(cache)
    rows = [["cold (empty cache)", round(cold["first_launch_s"] * 1e3, 1),
             round(cold["aot_compile_other_specialization_s"] * 1e3, 1),
             round(cold["import_tilecore_s"] * 1e3, 1)],
            ["warm (disk cache)", round(warm["first_launch_s"] * 1e3, 1),
             round(warm["aot_compile_other_specialization_s"] * 1e3, 1),
             round(warm["import_tilecore_s"] * 1e3, 1)]]
    print_table("vector add: first launch in a new process, ms",
                ["process", "first launch (compile+load+launch)", "AOT compile, 2nd spec.",
                 "import tilecore"], rows)
    path = write_json(out, "compile", {**device_info(), "cold": cold, "warm": warm})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
