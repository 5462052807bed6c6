"""Host cost of the device-scope algorithms (issue 15's small-input and
first-call goals), beside the peers of the same run.

Table 1, host us per cached call, n = 2^10 .. 2^16 float32: DeviceReduce's
two-phase calls (sum, min, arg_max, reduce with "add" and a float32 init,
reduce_by_key; a cached temporary buffer), DeviceScan's (inclusive_sum,
exclusive_sum, inclusive_scan with "add" and with a user function,
exclusive_scan with a float32 init, inclusive_sum_by_key),
DeviceSegmentedReduce.sum over 64-item segments and the convenience layer
(tilecore.algorithms.sum, min, argmax, cumsum, segmented_sum) on CuPy
arrays and torch tensors, beside CuPy's x.sum() / x.argmax() / cumsum,
torch's t.sum() / t.argmax() / cumsum, cuda.compute's reusable reduce
object (when cuda-cccl is installed) and a bare tilecore launch of a one-block
kernel (the launch floor). "median" is the median host time of one call
(perf_counter_ns around the call; the stream is synchronized every 200 calls,
outside the timed region, so the device never holds the host back); "loop"
is 1000 back-to-back calls over their wall time (bench_reduce.py's figure).
Goals: two-phase <= 8 us, convenience <= 10 us (issue: torch.sum 12 us,
cuda.compute 15.5 us, CuPy 16-37 us).

Table 2, the first call in a new process (a subprocess each): the import of
tilecore.algorithms, then the first DeviceReduce.sum (size query + run +
synchronize) and the first tilecore.algorithms.sum, with an empty kernel cache
(a fresh TILECORE_CACHE_DIR: NVRTC compiles) and again with that cache warm.
Goals: under 1 s cold, under 50 ms warm (issue), both measured after the
import and after CuPy has created the CUDA context. "yaml imported" and
"kernels lowered" say whether the warm start skipped PyYAML (the tuning
tables' JSON cache, tunings/table_cache.py) and the front end (the spec-key
kernel cache, host/spec_cache.py): a warm GPU row should read False and 0
(the interpreter always lowers and its count stays 0).

Table 1 on the GPU also times the pieces of a convenience call: the result's
allocation before (1-d, then reshape to 0-d) and now (0-d directly), and the
libraries' current-stream readers.

    python benchmarks/bench_algorithms_host.py [--out DIR]
    python benchmarks/bench_algorithms_host.py --cpu   # no GPU: NumPy arrays
    python benchmarks/bench_algorithms_host.py --single-block-max 65536

--single-block-max N runs table 1 under override_policy("reduce",
single_block_max_items=N): up to N items one launch instead of two (sm_90's
table says 65536 for 4-byte items, hand-set, and 16384 otherwise), to weigh the
host time saved at 2^15..2^16 against the one-block kernel's device time
(bench_reduce.py at those sizes).

With --cpu (no GPU needed) table 1 measures the host layer alone on NumPy
arrays with tilecore.launch replaced by a no-op (the interpreter's run is not
what is measured), and table 2 the first call in the interpreter.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZES = [1 << k for k in range(10, 17)]
CALLS = 5000
SYNC_EVERY = 200


def host_us(fn, sync, calls: int = CALLS) -> dict:
    """Median / p90 host time of one call and the back-to-back loop's mean."""
    clock = time.perf_counter_ns
    for _ in range(100):
        fn()
    sync()
    samples = []
    for i in range(calls):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
        if i % SYNC_EVERY == SYNC_EVERY - 1:
            sync()
    sync()
    t0 = clock()
    for _ in range(1000):
        fn()
    loop = (clock() - t0) / 1000
    sync()
    samples.sort()
    return {"median_us": statistics.median(samples) / 1e3,
            "p90_us": samples[9 * len(samples) // 10] / 1e3, "loop_us": loop / 1e3}


def _user_add(a, b):
    """A user operator (DeviceScan.inclusive_scan's user-function rows)."""
    return a + b


# -- table 1 on the GPU ---------------------------------------------------------------------------

def _cub_reducer(cp, x, out, n):
    """cuda.compute's reusable reduce object, as bench_reduce.py builds it."""
    try:
        import cuda.compute as cc
        from cuda.compute import OpKind
    except ImportError:
        try:
            import cuda.cccl.parallel.experimental as cc
            from cuda.cccl.parallel.experimental import OpKind
        except ImportError:
            return None
    h_init = np.zeros(1, np.float32)
    reducer = cc.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=h_init)
    nbytes = reducer(temp_storage=None, d_in=x, d_out=out, num_items=n, op=OpKind.PLUS,
                     h_init=h_init)
    temp = cp.empty(max(1, nbytes), cp.uint8)
    return lambda: reducer(temp_storage=temp, d_in=x, d_out=out, num_items=n, op=OpKind.PLUS,
                           h_init=h_init)


def gpu_cases(n: int) -> dict:
    import cupy as cp
    import tilecore as ct
    import tilecore.algorithms as A
    from tilecore.algorithms import DeviceReduce as R, DeviceScan as S, \
        DeviceSegmentedReduce as G
    from tilecore.samples import vec_add
    cases: dict = {}
    x = cp.random.rand(n, dtype=cp.float32)
    libs = {"cupy": (x, lambda shape, dt: cp.empty(shape, dt))}
    try:
        import torch
        t = torch.from_dlpack(x)
        libs["torch"] = (t, lambda shape, dt: torch.empty(
            shape, dtype={np.float32: torch.float32, np.int64: torch.int64, np.int32: torch.int32,
                          np.uint8: torch.uint8}[dt], device="cuda"))
    except ImportError:
        torch = None
    for name, (a, empty) in libs.items():
        out, v, i = empty(1, np.float32), empty(1, np.float32), empty(1, np.int64)
        y = empty(n, np.float32)
        sevens = (np.arange(n) // 7).astype(np.int32)         # keys in runs of 7
        keys = cp.asarray(sevens) if name == "cupy" else torch.from_numpy(sevens).cuda()
        # segments of 64 items; reduce_by_key's outputs and count
        offsets = cp.asarray(np.arange(0, n + 1, 64, dtype=np.int32)) if name == "cupy" else \
            torch.arange(0, n + 1, 64, dtype=torch.int32, device="cuda")
        segs = offsets.shape[0] - 1
        seg_out, uniq, aggs, runs = (empty(segs, np.float32), empty(n, np.int32),
                                     empty(n, np.float32), empty(1, np.int32))
        nbytes = max(R.sum(None, a, out, n), R.arg_max(None, a, v, i, n),
                     S.inclusive_sum(None, a, y, n), S.exclusive_sum(None, a, y, n),
                     S.inclusive_scan(None, a, y, _user_add, n),
                     S.inclusive_sum_by_key(None, keys, a, y, n),
                     G.sum(None, a, seg_out, segs, offsets[:-1], offsets[1:]),
                     R.reduce_by_key(None, keys, uniq, a, aggs, runs, "add", n))
        temp = empty(nbytes, np.uint8)
        init = np.float32(0)
        cases.update({
            f"two-phase sum ({name})": lambda a=a, o=out, tmp=temp: R.sum(tmp, a, o, n),
            f"two-phase min ({name})": lambda a=a, o=out, tmp=temp: R.min(tmp, a, o, n),
            f"two-phase arg_max ({name})":
                lambda a=a, v=v, i=i, tmp=temp: R.arg_max(tmp, a, v, i, n),
            f"two-phase reduce add ({name})":
                lambda a=a, o=out, tmp=temp: R.reduce(tmp, a, o, n, "add", init),
            f"two-phase inclusive_sum ({name})":
                lambda a=a, y=y, tmp=temp: S.inclusive_sum(tmp, a, y, n),
            f"two-phase exclusive_sum ({name})":
                lambda a=a, y=y, tmp=temp: S.exclusive_sum(tmp, a, y, n),
            f"two-phase inclusive_scan add ({name})":
                lambda a=a, y=y, tmp=temp: S.inclusive_scan(tmp, a, y, "add", n),
            f"two-phase inclusive_scan user ({name})":
                lambda a=a, y=y, tmp=temp: S.inclusive_scan(tmp, a, y, _user_add, n),
            f"two-phase exclusive_scan add init ({name})":
                lambda a=a, y=y, tmp=temp: S.exclusive_scan(tmp, a, y, "add", init, n),
            f"two-phase inclusive_sum_by_key ({name})":
                lambda a=a, y=y, k=keys, tmp=temp: S.inclusive_sum_by_key(tmp, k, a, y, n),
            f"two-phase segmented sum, 64-item segments ({name})":
                lambda a=a, o=seg_out, b=offsets[:-1], e=offsets[1:], tmp=temp:
                G.sum(tmp, a, o, segs, b, e),
            f"two-phase reduce_by_key add ({name})":
                lambda a=a, k=keys, u=uniq, g=aggs, r=runs, tmp=temp:
                R.reduce_by_key(tmp, k, u, a, g, r, "add", n),
            f"algorithms.segmented_sum ({name})": lambda a=a, off=offsets: A.segmented_sum(a, off),
            f"algorithms.sum ({name})": lambda a=a: A.sum(a),
            f"algorithms.min ({name})": lambda a=a: A.min(a),
            f"algorithms.argmax ({name})": lambda a=a: A.argmax(a),
            f"algorithms.cumsum ({name})": lambda a=a: A.cumsum(a),
        })
    # what the convenience layer's result costs (it now allocates 0-d directly and writes
    # it through a DeviceArray of its pointer; it used to allocate 1-d and reshape to 0-d)
    cases["alloc: cupy.empty(1, f32).reshape(()) (before)"] = \
        lambda: cp.empty(1, cp.float32).reshape(())
    cases["alloc: cupy.ndarray((), f32) (now)"] = lambda nd=cp.ndarray: nd((), np.float32)
    if torch is not None:
        dev = torch.device("cuda", torch.cuda.current_device())
        f32 = torch.float32
        cases["alloc: torch.empty(1, device=dev).reshape(()) (before)"] = \
            lambda: torch.empty(1, dtype=f32, device=dev).reshape(())
        cases["alloc: torch.empty((), device=dev) (now)"] = \
            lambda: torch.empty((), dtype=f32, device=dev)
        t0 = libs["torch"][0]
        cases["alloc: t.new_empty(())"] = lambda: t0.new_empty(())
        cases["stream: torch.cuda.current_stream().cuda_stream"] = \
            lambda: torch.cuda.current_stream().cuda_stream
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            cases["stream: torch._C._cuda_getCurrentRawStream(0) (now)"] = lambda: raw(0)
    cases["stream: cupy.cuda.get_current_stream().ptr (now)"] = \
        lambda: cp.cuda.get_current_stream().ptr
    cases["peer: cupy x.sum()"] = lambda: x.sum()
    cases["peer: cupy x.argmax()"] = lambda: x.argmax()
    cases["peer: cupy cumsum(x)"] = lambda: cp.cumsum(x)
    if torch is not None:
        t = libs["torch"][0]
        cases["peer: torch t.sum()"] = lambda: t.sum()
        cases["peer: torch t.argmax()"] = lambda: t.argmax()
        cases["peer: torch.cumsum(t, 0)"] = lambda: torch.cumsum(t, 0)
    cub = _cub_reducer(cp, x, cp.empty(1, cp.float32), n)
    if cub is not None:
        cases["peer: cuda.compute reduce_into object"] = cub
    c = cp.empty_like(x)
    cases["floor: tilecore.launch, one block"] = \
        lambda: ct.launch(None, (1,), vec_add, (x, x, c, 1024))
    return cases


def gpu_table(records: list) -> list:
    import cupy as cp
    sync = cp.cuda.get_current_stream().synchronize
    rows = []
    for n in SIZES:
        for name, fn in gpu_cases(n).items():
            st = host_us(fn, sync)
            rows.append([f"2^{n.bit_length() - 1}", name, round(st["median_us"], 2),
                         round(st["p90_us"], 2), round(st["loop_us"], 2)])
            records.append({"table": "host_us", "n": n, "call": name, **st})
    return rows


# -- table 1 on the CPU (the host layer alone) ----------------------------------------------------

def cpu_table(records: list) -> list:
    import tilecore as ct
    import tilecore.algorithms as A
    from tilecore.algorithms import DeviceReduce as R, DeviceScan as S, \
        DeviceSegmentedReduce as G
    rows = []
    real = ct.launch
    try:
        ct.launch = lambda *args: None
        for n in (1 << 10, 1 << 16):
            x = np.random.rand(n).astype(np.float32)
            out, v, i = np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.int64)
            y, keys = np.zeros(n, np.float32), (np.arange(n) // 7).astype(np.int32)
            offsets = np.arange(0, n + 1, 64, dtype=np.int32)
            segs = offsets.size - 1
            seg_out, uniq, aggs, runs = (np.zeros(segs, np.float32), np.zeros(n, np.int32),
                                         np.zeros(n, np.float32), np.zeros(1, np.int32))
            init = np.float32(0)
            temp = np.zeros(max(R.sum(None, x, out, n), R.arg_max(None, x, v, i, n),
                                S.inclusive_sum(None, x, y, n),
                                S.inclusive_scan(None, x, y, _user_add, n),
                                S.inclusive_sum_by_key(None, keys, x, y, n),
                                G.sum(None, x, seg_out, segs, offsets[:-1], offsets[1:]),
                                R.reduce_by_key(None, keys, uniq, x, aggs, runs, "add", n)),
                            np.uint8)
            cases = {"size query DeviceReduce.sum(None, ...)": lambda: R.sum(None, x, out, n),
                     "two-phase sum": lambda: R.sum(temp, x, out, n),
                     "two-phase min": lambda: R.min(temp, x, out, n),
                     "two-phase arg_max": lambda: R.arg_max(temp, x, v, i, n),
                     "two-phase reduce add": lambda: R.reduce(temp, x, out, n, "add", init),
                     "size query DeviceScan.inclusive_sum(None, ...)":
                         lambda: S.inclusive_sum(None, x, y, n),
                     "two-phase inclusive_sum": lambda: S.inclusive_sum(temp, x, y, n),
                     "two-phase inclusive_sum in place": lambda: S.inclusive_sum(temp, y, y, n),
                     "two-phase exclusive_sum": lambda: S.exclusive_sum(temp, x, y, n),
                     "two-phase inclusive_scan add":
                         lambda: S.inclusive_scan(temp, x, y, "add", n),
                     "two-phase inclusive_scan user":
                         lambda: S.inclusive_scan(temp, x, y, _user_add, n),
                     "two-phase exclusive_scan add init":
                         lambda: S.exclusive_scan(temp, x, y, "add", init, n),
                     "two-phase inclusive_sum_by_key":
                         lambda: S.inclusive_sum_by_key(temp, keys, x, y, n),
                     "two-phase segmented sum, 64-item segments":
                         lambda: G.sum(temp, x, seg_out, segs, offsets[:-1], offsets[1:]),
                     "two-phase reduce_by_key add":
                         lambda: R.reduce_by_key(temp, keys, uniq, x, aggs, runs, "add", n),
                     "algorithms.segmented_sum": lambda: A.segmented_sum(x, offsets),
                     "algorithms.sum": lambda: A.sum(x), "algorithms.argmax": lambda: A.argmax(x),
                     "algorithms.cumsum": lambda: A.cumsum(x)}
            for name, fn in cases.items():
                st = host_us(fn, lambda: None, 20000)
                rows.append([f"2^{n.bit_length() - 1}", name, round(st["median_us"], 2),
                             round(st["p90_us"], 2), round(st["loop_us"], 2)])
                records.append({"table": "host_us_cpu_no_launch", "n": n, "call": name, **st})
    finally:
        ct.launch = real
    return rows


# -- table 2: the first call in a new process -----------------------------------------------------

_FIRST_CALL = r"""
import json, sys, time
t0 = time.perf_counter()
gpu = sys.argv[1] == "gpu"
if gpu:
    import cupy as cp
    x = cp.random.rand(1 << 20, dtype=cp.float32)
    out = cp.empty(1, cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    sync, empty = cp.cuda.runtime.deviceSynchronize, (lambda n: cp.empty(n, cp.uint8))
else:
    import numpy as np
    x = np.random.rand(1 << 20).astype(np.float32)
    out = np.empty(1, np.float32)
    sync, empty = (lambda: None), (lambda n: np.empty(n, np.uint8))
t1 = time.perf_counter()
import tilecore.algorithms as A
from tilecore.algorithms import DeviceReduce as R
t2 = time.perf_counter()
nbytes = R.sum(None, x, out, x.size)
t3 = time.perf_counter()
R.sum(empty(nbytes), x, out, x.size)
sync()
t4 = time.perf_counter()
A.sum(x)
sync()
t5 = time.perf_counter()
from tilecore.host import spec_cache
print(json.dumps({"yaml_imported": "yaml" in sys.modules, "kernels_lowered": spec_cache.lowered[0],
                  "import_ms": 1e3 * (t2 - t1), "size_query_ms": 1e3 * (t3 - t2),
                  "first_sum_ms": 1e3 * (t4 - t2), "first_convenience_sum_ms": 1e3 * (t5 - t4),
                  "arrays_ms": 1e3 * (t1 - t0)}))
"""


def first_calls(gpu: bool, records: list) -> list:
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TILECORE_CACHE_DIR=cache)
        for state in ("empty kernel cache", "warm kernel cache", "warm kernel cache"):
            r = subprocess.run([sys.executable, "-c", _FIRST_CALL, "gpu" if gpu else "cpu"],
                               capture_output=True, text=True, env=env, timeout=600)
            if r.returncode:
                raise RuntimeError(r.stderr)
            got = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append([state, round(got["import_ms"], 1), round(got["size_query_ms"], 2),
                         round(got["first_sum_ms"], 1), round(got["first_convenience_sum_ms"], 1),
                         got["yaml_imported"], got["kernels_lowered"]])
            records.append({"table": "first_call", "gpu": gpu, "state": state, **got})
    return rows


def main() -> None:
    from common import print_table, write_json
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results", help="directory for the JSON file")
    ap.add_argument("--cpu", action="store_true", help="no GPU: NumPy arrays (see the docstring)")
    ap.add_argument("--single-block-max", type=int, default=None,
                    help="override the policy's single_block_max_items for table 1")
    args = ap.parse_args()
    import contextlib
    from tilecore.dispatch import override_policy
    policy = override_policy("reduce", single_block_max_items=args.single_block_max) \
        if args.single_block_max is not None else contextlib.nullcontext()
    records: list = []
    info: dict = {"date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0]}
    header = ["n", "call", "median us", "p90 us", "loop us"]
    info["single_block_max_items"] = args.single_block_max
    with policy:
        if args.cpu:
            print_table("host us per cached call, NumPy arrays, tilecore.launch a no-op (the "
                        "host layer alone)", header, cpu_table(records))
        else:
            from common import device_info
            info.update(device_info())
            print_table("host us per cached call (float32)", header, gpu_table(records))
    print_table("first call in a new process, ms (after the import; sum of 2^20 float32)",
                ["kernel cache", "import", "size query", "first DeviceReduce.sum",
                 "then first algorithms.sum", "yaml imported", "kernels lowered"],
                first_calls(not args.cpu, records))
    path = write_json(Path(args.out), "algorithms_host" + ("_cpu" if args.cpu else ""),
                      {**info, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
