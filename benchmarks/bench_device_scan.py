"""DeviceScan (inclusive_sum, exclusive_sum) beside CUB (`cuda.compute`
make_inclusive_scan / make_exclusive_scan with OpKind.PLUS), CuPy's cumsum,
torch.cumsum and the device-to-device copy, float32 and int32 at 2^24..2^28
(--dtypes: also float64, int64, float16), all in one run on one GPU; plus a
user operator computing the same sum (`user_add`, compiled into the same kernel:
inclusive_scan, and exclusive_scan with init 0) at 2^27, and the same sum written
so that DeviceScan does not recognize it as "add" (`user_add_general`: the
general user operator's ordered look-back).

Bandwidth counts bytes read plus written (2 per item byte: a single-pass
scan moves what a copy moves), timed in the steady state (common.steady_ms:
back-to-back calls over rotating buffer sets; tilecore's two launches per
call, status init and scan, are both timed). Every implementation is checked
against NumPy before it is timed. The issue's goal: tilecore >= 90% of the
copy and 10-20% above CUB. "copy" is a 1 GiB device-to-device copy; "same-bytes
copy" one of the scan's own n items over the same buffer sets (at 2^24 a copy
reaches about 91% of the 1 GiB copy's bandwidth).

    python benchmarks/bench_device_scan.py [--out DIR] [--sweep] [--user-sweep] [--excl-sweep]
                                           [--chunk-sweep]
                                           [--sizes 24,28]
                                           [--scans incl,excl]
                                           [--dtypes float32,int32,float64,int64,float16]

--user-sweep also times the 4-byte user operator with other tiles at 2^27;
--chunk-sweep the items a thread holds together (vector_width 0, the compiler's, 2 and 8)
at every size, for 8-byte values the user operator too (0 and 2);
--excl-sweep the exclusive scans' alternatives (exclusive_pairs,
exclusive_inverse) at every size.
--sweep also times policy candidates through override_policy, to fill
tuning_db/scan/sm_90.yaml: the tile (block_threads * items_per_thread), the
look-back window (mode 2, exact operators: int32 here), the group size (mode 3,
float32 here), the Fenwick look-back (mode 0), the groups for exact operators
too, the exclusive-by-inverse load, reduce-then-scan (mode 1) and the items a
thread holds together (vector_width: 2 gives 8-byte values 16-byte chunks). Every
candidate sets small_items=0, so it runs its tile at every size: the 2^24
column picks small_block_threads (and whether small_items is worth having).
Each implementation is checked against one NumPy reference per case.
"""
from __future__ import annotations

import contextlib
import sys

import cupy as cp
import numpy as np
import torch

from common import (buffer_sets, copy_bandwidth_gbs, device_info, parse_out, print_table,
                    same_bytes_copy_gbs, script_flag, script_option, steady_ms, write_json)
from tilecore.algorithms import DeviceScan
from tilecore.dispatch import override_policy

SIZES = (24, 26, 27, 28)
DTYPES = ("float32", "int32")
# float dtypes: the spacing of each's numbers (the reference's tolerance)
EPS = {"float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}
_ALL = dict(small_items=0)
SWEEP = [dict(_ALL),                                                  # the shipped policy
         dict(_ALL, block_threads=512), dict(_ALL, block_threads=256),
         dict(_ALL, block_threads=128, items_per_thread=64),
         dict(_ALL, block_threads=1024, items_per_thread=16),
         dict(_ALL, block_threads=1024, items_per_thread=32),
         dict(_ALL, lookback_window=8), dict(_ALL, lookback_window=32),  # mode 2 (int32)
         dict(_ALL, group_tiles=16), dict(_ALL, group_tiles=64),          # mode 3 (float32)
         dict(_ALL, group_tiles=128), dict(_ALL, group_tiles=256),
         dict(_ALL, mode=0, exact_mode=0),                               # Fenwick, both
         dict(_ALL, exact_mode=3),                                       # groups for int32
         dict(_ALL, block_threads=512, exclusive_inverse=1),             # int32 exclusive
         dict(_ALL, mode=1, exact_mode=1, block_threads=256, blocks_per_sm=2),
         dict(_ALL, mode=1, exact_mode=1, block_threads=256, blocks_per_sm=4),
         dict(_ALL, vector_width=2), dict(_ALL, vector_width=8)]   # chunks of the tiles
# exclusive scans (--excl-sweep, every size): unshifted tiles scanned as (inclusive,
# exclusive) pairs; integer sums as inclusive minus the item. (Storing each result one
# item later from unshifted loads, tried 2026-11-27, ran at 1510-1660 GB/s against
# 2340-2400 for the shifted load at 2^27 on the H100: removed.)
EXCL_SWEEP = [dict(_ALL, exclusive_pairs=1),
              dict(_ALL, exclusive_pairs=1, block_threads=512),
              dict(_ALL, block_threads=512, exclusive_inverse=1)]
# the items a thread holds together (--chunk-sweep, every size), whatever the table says:
# the compiler's (0: 8-byte values beside int32 status words in 4-item, 32-byte chunks),
# 16-byte chunks of 8-byte values (2), and 8
CHUNK_SWEEP = [dict(_ALL, vector_width=w) for w in (0, 2, 8)]
# tiles for the user operator (--user-sweep, at 2^27 beside the shipped user row)
USER_SWEEP = [dict(_ALL, block_threads=512, items_per_thread=64),
              dict(_ALL, block_threads=256, items_per_thread=64),
              dict(_ALL, block_threads=512, items_per_thread=16)]


def _tag(p: dict) -> str:
    """A sweep candidate's name: its fields other than small_items=0."""
    return " ".join(f"{k}={v}" for k, v in p.items() if k != "small_items") or "shipped policy"


def user_add(a, b):
    return a + b


def user_add_general(a, b):
    """The same sum as a user operator DeviceScan does not recognize as "add"
    (algorithms/op_recognition.py): its look-back folds in order."""
    total = a + b
    return total


class TileScan:
    """DeviceScan with its temporary storage allocated once."""

    def __init__(self, x, y, exclusive: bool, policy: dict | None = None, op=None):
        self.policy = policy or {}
        self.op = op
        if op is not None and exclusive:
            init = x.dtype.type(0)
            self.method = lambda t, a, b, n: DeviceScan.exclusive_scan(t, a, b, op, init, n)
        elif op is not None:
            self.method = lambda t, a, b, n: DeviceScan.inclusive_scan(t, a, b, op, n)
        else:
            self.method = DeviceScan.exclusive_sum if exclusive else DeviceScan.inclusive_sum
        with override_policy("scan", **self.policy):
            self.temp = cp.empty(self.method(None, x, y, x.shape[0]), cp.uint8)
        self.nbytes = self.temp.nbytes

    def context(self):
        """The policy override, held around the whole timing of a sweep candidate
        (entering it per call would rebuild the cached host plan every call)."""
        if self.policy:
            return override_policy("scan", **self.policy)
        return contextlib.nullcontext()

    def __call__(self, x, y) -> None:
        self.method(self.temp, x, y, x.shape[0])


class CubScan:
    """cuda.compute's scan with OpKind.PLUS and its temp storage allocated once."""

    def __init__(self, x, y, exclusive: bool):
        import cuda.compute as cc
        self.cc = cc
        self.init = np.zeros(1, x.dtype) if exclusive else None
        make = cc.make_exclusive_scan if exclusive else cc.make_inclusive_scan
        self.scanner = make(d_in=x, d_out=y, op=cc.OpKind.PLUS, init_value=self.init)
        nbytes = self.scanner(temp_storage=None, d_in=x, d_out=y, op=cc.OpKind.PLUS,
                              init_value=self.init, num_items=x.shape[0])
        self.temp = cp.empty(max(nbytes, 1), cp.uint8)
        self.nbytes = nbytes

    def __call__(self, x, y) -> None:
        self.scanner(temp_storage=self.temp, d_in=x, d_out=y, op=self.cc.OpKind.PLUS,
                     init_value=self.init, num_items=x.shape[0])


def _inputs(n: int, dtype, count: int) -> list:
    rng = cp.random.default_rng(11)
    if np.dtype(dtype).kind == "i":
        return [(rng.integers(-100, 100, n, dtype=dtype), cp.empty(n, dtype))
                for _ in range(count)]
    return [(rng.standard_normal(n, dtype=cp.float32).astype(dtype), cp.empty(n, dtype))
            for _ in range(count)]


def _reference(x, exclusive: bool):
    """(the host input, the exact reference) of one case, computed once."""
    host = cp.asnumpy(x)
    if exclusive:
        host = host[:-1]
    if x.dtype.kind == "i":
        return host, np.cumsum(host, dtype=np.int64).astype(x.dtype)
    return host, np.cumsum(host.astype(np.float64))


def _check(name: str, fn, x, y, exclusive: bool, ref) -> None:
    host, want = ref
    y.fill(0)
    fn(x, y)
    cp.cuda.Device().synchronize()
    got = cp.asnumpy(y)
    if exclusive:
        ok = got[0] == 0
        got = got[1:]
    else:
        ok = True
    if x.dtype.kind == "i":
        ok = ok and np.array_equal(got, want)
    else:   # float16 sums accumulate in float32, then round once to the output
        acc_eps = EPS["float64" if x.dtype == cp.float64 else "float32"]
        bound = (x.shape[0] * acc_eps * np.cumsum(np.abs(host.astype(np.float64)))
                 + EPS[x.dtype.name] * np.abs(want))
        ok = ok and bool((np.abs(got.astype(np.float64) - want) <= bound).all())
    if not ok:
        raise AssertionError(f"{name} is wrong at n={x.shape[0]} ({x.dtype}, "
                             f"{'exclusive' if exclusive else 'inclusive'})")


def _impls(x, y, exclusive: bool, sweep: bool, log2n: int, user_sweep: bool,
           excl_sweep: bool, chunk_sweep: bool) -> dict:
    impls = {"tilecore": TileScan(x, y, exclusive)}
    wide = x.dtype.itemsize == 8
    if sweep:
        for p in SWEEP:
            impls[f"tilecore {_tag(p)}"] = TileScan(x, y, exclusive, p)
    if excl_sweep and exclusive:
        for p in EXCL_SWEEP:
            impls[f"tilecore {_tag(p)}"] = TileScan(x, y, exclusive, p)
    if chunk_sweep:
        for p in CHUNK_SWEEP:
            impls[f"tilecore {_tag(p)}"] = TileScan(x, y, exclusive, p)
    # the user operator: at 2^27 (the goal's size), at every size in the chunk sweep of
    # 8-byte values, there in the compiler's chunks and in 2-item chunks too
    if log2n == 27 and x.dtype in (cp.float32, cp.int32, cp.float64, cp.int64) or \
            chunk_sweep and wide:
        impls["tilecore user_add"] = TileScan(x, y, exclusive, op=user_add)
        impls["tilecore user_add_general"] = TileScan(x, y, exclusive, op=user_add_general)
    if chunk_sweep and wide:
        for p in CHUNK_SWEEP[:2]:
            impls[f"tilecore user_add {_tag(p)}"] = TileScan(x, y, exclusive, p, user_add)
    if log2n == 27 and user_sweep and not exclusive and not wide:
        for p in USER_SWEEP:
            impls[f"tilecore user_add {_tag(p)}"] = TileScan(x, y, exclusive, p, user_add)
    try:
        impls["CUB"] = CubScan(x, y, exclusive)
    except Exception as e:  # noqa: BLE001 - a peer that does not build is reported, not fatal
        print(f"CUB (cuda.compute) not measured: {type(e).__name__}: {e}")
    if not exclusive:
        impls["CuPy cumsum"] = lambda a, b: cp.cumsum(a, out=b)
        impls["torch.cumsum"] = lambda a, b: torch.cumsum(torch.as_tensor(a, device="cuda"), 0,
                                                          out=torch.as_tensor(b, device="cuda"))
    return impls


def main() -> None:
    sizes = [int(v) for v in script_option("--sizes", SIZES)]
    scans = script_option("--scans", ["incl", "excl"])
    user_sweep, excl_sweep = script_flag("--user-sweep"), script_flag("--excl-sweep")
    chunk_sweep = script_flag("--chunk-sweep")
    dtypes = [np.dtype(v) for v in script_option("--dtypes", DTYPES)]
    out = parse_out()
    sweep = "--sweep" in sys.argv
    copy = copy_bandwidth_gbs()
    rows, records, header = [], [], []
    for exclusive in [e for e in (False, True) if ("excl" if e else "incl") in scans]:
        for dtype in dtypes:
            for log2n in sizes:
                n = 1 << log2n
                moved = 2 * dtype.itemsize * n          # bytes read + written
                sets = _inputs(n, dtype, buffer_sets(moved))
                impls = _impls(*sets[0], exclusive, sweep, log2n, user_sweep, excl_sweep,
                               chunk_sweep)
                ref = _reference(sets[0][0], exclusive)
                same = same_bytes_copy_gbs(sets)
                gbs, temp = {}, {}
                for name, fn in impls.items():
                    with fn.context() if hasattr(fn, "context") else contextlib.nullcontext():
                        try:
                            _check(name, fn, *sets[0], exclusive, ref)
                        except AssertionError as e:
                            if name.startswith("tilecore"):
                                raise
                            # a peer summing float16 in float16 misses the float32 bound
                            print(f"{e}: not timed")
                            continue
                        ms = steady_ms([lambda x=x, y=y, fn=fn: fn(x, y) for x, y in sets])
                    gbs[name] = moved / ms / 1e6
                    if hasattr(fn, "nbytes"):
                        temp[name] = fn.nbytes
                cub = gbs.get("CUB")
                t = gbs["tilecore"]
                label = "exclusive_sum" if exclusive else "inclusive_sum"
                rows.append([label, np.dtype(dtype).name, f"2^{log2n}",
                             *(round(gbs.get(k, float("nan")), 1) for k in
                               ("tilecore", "CUB", "CuPy cumsum", "torch.cumsum")),
                             f"{100 * t / copy:.1f}%", f"{100 * t / same:.1f}%",
                             f"{100 * t / cub:.1f}%" if cub else "-",
                             temp.get("tilecore", 0), temp.get("CUB", "-")])
                records.append({"scan": label, "dtype": np.dtype(dtype).name, "n": n,
                                "gbs": gbs, "temp_bytes": temp, "copy_gbs": copy,
                                "same_bytes_copy_gbs": same})
                if sweep or excl_sweep or chunk_sweep or log2n == 27:
                    extra = {k: round(v, 1) for k, v in gbs.items()
                             if k.startswith("tilecore ")}
                    if extra:
                        print(f"{label} {np.dtype(dtype).name} 2^{log2n}: {extra}")
    header = ["scan", "dtype", "n", "tilecore", "CUB", "CuPy cumsum", "torch.cumsum",
              "tilecore / copy", "tilecore / same-bytes copy", "tilecore / CUB", "temp bytes",
              "CUB temp bytes"]
    print(f"device-to-device copy: {copy:.1f} GB/s (read + written)")
    print_table("DeviceScan, GB/s (bytes read + written, steady state)", header, rows)
    path = write_json(out, "device_scan", {**device_info(), "copy_gbs": copy,
                                            "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
