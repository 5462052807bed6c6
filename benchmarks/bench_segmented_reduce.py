"""DeviceSegmentedReduce beside CUB (cuda.compute's make_segmented_reduce
object), torch.sum(dim=1) and CuPy's sum(axis=1) on the equivalent rows (where
the segments are rows of equal length), with the device-to-device copy
bandwidth of the same run.

The issue's cases, float32 sums: 2^20 segments of 128 items, 2^18 segments of
uniformly random length 1..4096 (about 2^29 items), 1024 segments of 2^17
items; goals: at least torch.sum(dim=1) and at least 5x CUB on the short
segments. GB/s = input bytes read / time (the offsets add 1/128 at most),
timed in the steady state (common.steady_ms: back-to-back calls over rotating
inputs). Also min/max/arg_max relative to the sum, int32 offsets beside int64.

    python benchmarks/bench_segmented_reduce.py [--out DIR] [--sweep]

--sweep also times policy candidates (override_policy("segmented_reduce", ...))
per case and prints the best beside the shipped policy, the numbers to put in
tuning_db/segmented_reduce/: the rows kernel's block size, items per thread
and row groups per block (rows_waves) on 2^20 x 128; the rows kernel's block
shapes (ROWS_SHAPES) and the long kernel's fixed and fitted tiles on the random
lengths (also on U(256..768), U(512..1536) and U(1..16384), sweep-only cases);
the long kernel's block size, tile and split on 1024 x 2^17; arg_max's rows kernel (block size, items per thread)
on 2^20 x 128; and, per value size (float32, float64, float16, int8 sums), the
average length below which the rows kernel runs (long_min_avg_items) over five
length distributions and the rows kernel's threads x items over the rows cases.
"""
from __future__ import annotations

import itertools

import cupy as cp
import numpy as np
import torch

import tilecore.algorithms as A
from tilecore.algorithms import DeviceSegmentedReduce as S
from tilecore.dispatch import override_policy
from tilecore.dispatch.segmented_policy import choose_shape
from common import buffer_sets, copy_bandwidth_gbs, device_info, parse_out, print_table, \
    steady_ms, write_json

try:
    import cuda.compute as cc
    from cuda.compute import OpKind
except ImportError:  # older cuda-cccl
    try:
        import cuda.cccl.parallel.experimental as cc
        from cuda.cccl.parallel.experimental import OpKind
    except ImportError:
        cc = OpKind = None

CASES = {  # name: (segment lengths as a function of rng, rows for torch or None)
    "2^20 x 128": (lambda rng: np.full(1 << 20, 128), (1 << 20, 128)),
    "2^18 x U(1..4096)": (lambda rng: rng.integers(1, 4097, 1 << 18), None),
    "1024 x 2^17": (lambda rng: np.full(1024, 1 << 17), (1024, 1 << 17)),
}
# --sweep only: averages on either side of the 2^18 x U(1..4096) case, where the rows kernel's
# shapes and the long kernel trade places (RESULTS, thirty-second and thirty-third sessions)
SWEEP_CASES = {
    "2^20 x U(256..768)": (lambda rng: rng.integers(256, 769, 1 << 20), None),
    "2^20 x U(512..1536)": (lambda rng: rng.integers(512, 1537, 1 << 20), None),
    "2^16 x U(1..16384)": (lambda rng: rng.integers(1, 16385, 1 << 16), None),
}

_LENGTHS = {name: lengths for name, (lengths, _) in {**CASES, **SWEEP_CASES}.items()}


def make_case(name: str, odt=np.int64):
    lengths = _LENGTHS[name](np.random.default_rng(0))
    off = np.concatenate([[0], np.cumsum(lengths)]).astype(odt)
    total = int(off[-1])
    sets = [cp.random.rand(total, dtype=cp.float32) for _ in range(buffer_sets(4 * total))]
    return cp.asarray(off), sets, total


def cub_segmented(x, out, off, n):
    """cuda.compute's reusable segmented reduce object and its temporary storage."""
    if cc is None:
        return None
    h_init = np.zeros(1, np.float32)
    kw = dict(d_in=x, d_out=out, start_offsets_in=off[:-1], end_offsets_in=off[1:],
              op=OpKind.PLUS, h_init=h_init)
    red = cc.make_segmented_reduce(**kw)
    nbytes = red(temp_storage=None, num_segments=n, **kw)
    temp = cp.empty(max(1, nbytes), cp.uint8)
    return lambda: red(temp_storage=temp, num_segments=n, **kw)


def check(out, x, off, total):
    """tilecore's sums against a float64 segmented sum of the same data."""
    c = cp.concatenate([cp.zeros(1, cp.float64), cp.cumsum(x.astype(cp.float64))])
    ref = c[off[1:]] - c[off[:-1]]
    err = float(cp.abs(out.astype(cp.float64) - ref).max())
    assert err < 1e-3 * max(1.0, float(cp.abs(ref).max())), f"segmented sum is wrong: {err}"


def sums(copy_gbs, records) -> list:
    rows = []
    for name, (_, shape) in CASES.items():
        off, sets, total = make_case(name)
        n = off.size - 1
        outs = [cp.zeros(n, cp.float32) for _ in sets]
        temp = cp.empty(S.sum(None, sets[0], outs[0], n, off[:-1], off[1:]), cp.uint8)
        for x, o in zip(sets, outs):
            S.sum(temp, x, o, n, off[:-1], off[1:])
        cp.cuda.runtime.deviceSynchronize()
        check(outs[0], sets[0], off, total)
        off32 = off.astype(cp.int32)
        calls = {"tilecore": [lambda x=x, o=o: S.sum(temp, x, o, n, off[:-1], off[1:])
                              for x, o in zip(sets, outs)],
                 "tilecore int32 offs": [lambda x=x, o=o: S.sum(temp, x, o, n, off32[:-1],
                                                                off32[1:])
                                         for x, o in zip(sets, outs)]}
        cub = [cub_segmented(x, o, off, n) for x, o in zip(sets, outs)]
        if cub[0] is not None:
            calls["cub"] = cub
        if shape is not None:
            ts = [torch.from_dlpack(x).view(*shape) for x in sets]
            calls["torch sum(dim=1)"] = [lambda t=t: t.sum(dim=1) for t in ts]
            calls["cupy sum(axis=1)"] = [lambda x=x: x.reshape(shape).sum(axis=1) for x in sets]
        gbs = {k: 4 * total / steady_ms(v) / 1e6 for k, v in calls.items()}
        peer = gbs.get("torch sum(dim=1)")
        rows.append([name, *(round(gbs.get(k, float("nan")), 1) for k in
                             ("tilecore", "tilecore int32 offs", "cub", "torch sum(dim=1)",
                              "cupy sum(axis=1)")),
                     f"{gbs['tilecore'] / gbs['cub']:.2f}" if "cub" in gbs else "-",
                     f"{gbs['tilecore'] / peer:.3f}" if peer else "-",
                     f"{100 * gbs['tilecore'] / copy_gbs:.1f}%"])
        records.append({"op": "segmented_sum", "case": name, "num_segments": n,
                        "items": total, "gbs": gbs, "temp_bytes": temp.size,
                        "shape": _shape(sets[0], n)})
        del sets, outs, temp, calls, cub
        cp.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    return rows


def _shape(x, n) -> str:
    from tilecore.algorithms.segmented_reduce import _plan
    from tilecore.dispatch.target import device_target
    from tilecore.language import dtypes as D
    plan = _plan("known", D.float32, D.float32, "add", device_target(x.device.id), 8)
    return repr(tuple(choose_shape(plan.policy, n, x.size, plan.target.sm_count, True)))


def operators(records) -> list:
    rows = []
    for name in CASES:
        off, sets, total = make_case(name)
        n = off.size - 1
        o = cp.zeros(n, cp.float32)
        v, i = cp.zeros(n, cp.float32), cp.zeros(n, cp.int64)
        temp = cp.empty(max(S.sum(None, sets[0], o, n, off[:-1], off[1:]),
                            S.arg_max(None, sets[0], v, i, n, off[:-1], off[1:])), cp.uint8)
        calls = {"sum": [lambda x=x: S.sum(temp, x, o, n, off[:-1], off[1:]) for x in sets],
                 "min": [lambda x=x: S.min(temp, x, o, n, off[:-1], off[1:]) for x in sets],
                 "max": [lambda x=x: S.max(temp, x, o, n, off[:-1], off[1:]) for x in sets],
                 "arg_max": [lambda x=x: S.arg_max(temp, x, v, i, n, off[:-1], off[1:])
                             for x in sets],
                 "segmented_sum()": [lambda x=x: A.segmented_sum(x, off) for x in sets]}
        gbs = {k: 4 * total / steady_ms(f) / 1e6 for k, f in calls.items()}
        records.append({"op": "operators", "case": name, "gbs": gbs})
        rows += [[name, k, round(g, 1), f"{100 * g / gbs['sum']:.1f}%"] for k, g in gbs.items()]
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def _rows(b, r, w=1, **kw):
    """The rows kernel at b threads x r items, one-segment blocks included."""
    return dict(block_threads=b, rows_items_per_thread=r, one_row_items_per_thread=r,
                rows_waves=w, long_min_avg_items=1 << 30, **kw)


def _long(b, hi, lo=None, **kw):
    """The long kernel with tiles of b * lo .. b * hi items (lo None: b * hi only)."""
    return dict(long_block_threads=b, long_items_per_thread=hi,
                long_min_items_per_thread=hi if lo is None else lo, long_min_avg_items=1, **kw)


# the rows kernel's block shapes over every length distribution (H200: 64 x 8 for 4-byte values)
ROWS_SHAPES = [_rows(b, r) for b, r in ((64, 8), (64, 16), (128, 4), (128, 8), (256, 4))]

# {} first: the shipped policy, for reference
SWEEP = {
    "2^20 x 128": [{}] + [_rows(b, r, w) for b, r, w in
                          itertools.product((64, 128, 256), (4, 8, 16), (1, 2, 4))],
    "2^20 x U(256..768)": [{}] + ROWS_SHAPES,
    "2^18 x U(1..4096)": [{}] + ROWS_SHAPES + [_rows(b, r) for b, r in ((128, 16), (256, 16))] +
                         [_long(b, hi, split_min_blocks_per_sm=0)
                          for b, hi in itertools.product((128, 256, 512), (4, 8, 16, 32))] +
                         [_long(256, 32, lo, split_min_blocks_per_sm=0) for lo in (4, 8, 16)],
    "1024 x 2^17": [{}] + [_long(b, hi, split_min_blocks_per_sm=s)
                           for b, hi, s in itertools.product((256, 512), (16, 32), (0, 8))],
    "2^20 x U(512..1536)": [{}] + ROWS_SHAPES + [_rows(b, r) for b, r in ((128, 16), (256, 8))] +
                           [_long(b, hi, split_min_blocks_per_sm=0)
                            for b, hi in itertools.product((128, 256), (2, 4, 8))] +
                           [_long(128, 32, lo, split_min_blocks_per_sm=0) for lo in (4, 8)],
    "2^16 x U(1..16384)": [{}] + ROWS_SHAPES + [_rows(b, r) for b, r in ((128, 16), (256, 16))] +
                          [_long(b, hi, split_min_blocks_per_sm=0)
                           for b, hi in itertools.product((128, 256), (8, 16, 32))],
}


def sweep(records) -> list:
    rows = []
    for name, candidates in SWEEP.items():
        off, sets, total = make_case(name)
        n = off.size - 1
        o = cp.zeros(n, cp.float32)
        results = []
        for cand in candidates:
            with override_policy("segmented_reduce", **cand):
                temp = cp.empty(S.sum(None, sets[0], o, n, off[:-1], off[1:]), cp.uint8)
                g = 4 * total / steady_ms([lambda x=x: S.sum(temp, x, o, n, off[:-1], off[1:])
                                           for x in sets]) / 1e6
                check(o, sets[-1], off, total)
            results.append((g, cand))
            records.append({"op": "sweep", "case": name, "policy": cand, "gbs": g})
        rows += _ranked(name, results, "shipped: " + _shape(sets[0], n))
        del sets
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def _ranked(name: str, results: list, shipped_label: str) -> list:
    """Table rows of a case's (GB/s, candidate) results, the shipped policy ({})
    first in `results`: the best 5 other candidates, then the shipped policy."""
    shipped = results[0][0]
    best = sorted(results[1:], key=lambda r: -r[0])[:5]
    return [[name, round(g, 1), f"{g / shipped:.3f}", str(c)] for g, c in best] + \
        [[name, round(shipped, 1), "1.000", shipped_label]]


# arg_max's rows kernel (RESULTS: 39% of the sum on 2^20 x 128 at 128 x 4, 50% at 128 x 8 with
# int32 positions), timed with --sweep
ARG_SWEEP = [{}] + [_rows(b, r) for b, r in itertools.product((128, 256), (2, 4, 8, 16))]


def arg_sweep(records) -> list:
    """arg_max on 2^20 x 128 (equal rows: checked against CuPy's argmax per row)
    under ARG_SWEEP's candidates: the best 5, then the shipped policy."""
    name = "2^20 x 128"
    off, sets, total = make_case(name)
    n = off.size - 1
    v, i = cp.zeros(n, cp.float32), cp.zeros(n, cp.int64)
    want = cp.argmax(sets[-1].reshape(n, -1), axis=1)
    results = []
    for cand in ARG_SWEEP:
        with override_policy("segmented_reduce", **cand):
            temp = cp.empty(S.arg_max(None, sets[0], v, i, n, off[:-1], off[1:]), cp.uint8)
            S.arg_max(temp, sets[-1], v, i, n, off[:-1], off[1:])
            assert bool((i == want).all()), f"arg_max is wrong under {cand}"
            g = 4 * total / steady_ms([lambda x=x: S.arg_max(temp, x, v, i, n, off[:-1],
                                                               off[1:]) for x in sets]) / 1e6
        results.append((g, cand))
        records.append({"op": "arg_sweep", "case": name, "policy": cand, "gbs": g})
    del sets
    cp.get_default_memory_pool().free_all_blocks()
    return _ranked(name, results, "shipped")


# where the rows kernel hands over to the long kernel (long_min_avg_items), per value size,
# timed with --sweep (RESULTS, thirty-second session: the sm_90 rows' 16384)
THRESHOLDS = (1024, 16384, 65536)
THRESHOLD_DTYPES = (np.float32, np.float64, np.float16, np.int8)
THRESHOLD_CASES = {**{k: _LENGTHS[k] for k in ("2^20 x U(512..1536)", "2^18 x U(1..4096)",
                                                "2^16 x U(1..16384)")},
                   "2^17 x 4096": lambda rng: np.full(1 << 17, 4096),
                   "1024 x 2^17": _LENGTHS["1024 x 2^17"]}


def _sum_table(records, op_name: str, cases: dict, candidates: list) -> list:
    """Sums of small integers (exact in every dtype's accumulator, checked against an
    int64 segmented sum) for each dtype of THRESHOLD_DTYPES and length distribution
    of `cases`: a row of GB/s of input per candidate policy ({}: the shipped one)."""
    rows = []
    for dt in THRESHOLD_DTYPES:
        size = np.dtype(dt).itemsize
        out_dt = {1: np.int64, 2: np.float32}.get(size, dt)
        for name, lengths_of in cases.items():
            lengths = lengths_of(np.random.default_rng(0))
            off = cp.asarray(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
            total, n = int(lengths.sum()), lengths.size
            x = cp.asarray(np.random.default_rng(1).integers(-2, 3, total).astype(dt))
            sets = [x] + [x.copy() for _ in range(buffer_sets(size * total) - 1)]
            c = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(x.astype(cp.int64))])
            want = c[off[1:]] - c[off[:-1]]
            o = cp.empty(n, out_dt)
            row = [np.dtype(dt).name, name]
            for cand in candidates:
                with override_policy("segmented_reduce", **cand):
                    temp = cp.empty(S.sum(None, x, o, n, off[:-1], off[1:]), cp.uint8)
                    S.sum(temp, x, o, n, off[:-1], off[1:])
                    assert bool((o.astype(cp.float64).astype(cp.int64) == want).all()), \
                        f"segmented sum is wrong: {np.dtype(dt).name} {name} {cand}"
                    g = size * total / steady_ms([lambda x=x: S.sum(temp, x, o, n, off[:-1],
                                                                      off[1:]) for x in sets]) / 1e6
                records.append({"op": op_name, "dtype": np.dtype(dt).name, "case": name,
                                "policy": cand, "gbs": g})
                row.append(round(g, 1))
            rows.append(row)
            del sets, x
            cp.get_default_memory_pool().free_all_blocks()
    return rows


def threshold_sweep(records) -> list:
    """The shipped policy and each long_min_avg_items of THRESHOLDS."""
    return _sum_table(records, "threshold_sweep", THRESHOLD_CASES,
                      [{}] + [{"long_min_avg_items": t} for t in THRESHOLDS])


# the rows kernel's block shape per value size (H200: 64 threads for every size), timed with
# --sweep over the rows cases of THRESHOLD_CASES and 2^20 x 128
ROWS_SHAPE_CASES = {"2^20 x 128": _LENGTHS["2^20 x 128"],
                    **{k: v for k, v in THRESHOLD_CASES.items() if k != "1024 x 2^17"}}
ROWS_SHAPE_GRID = [(b, r) for b in (64, 128) for r in (4, 8, 16, 32)]


def rows_shape_sweep(records) -> list:
    """The shipped policy and the rows kernel (below every average) at each threads x
    items of ROWS_SHAPE_GRID."""
    return _sum_table(records, "rows_shape_sweep", ROWS_SHAPE_CASES,
                      [{}] + [_rows(b, r) for b, r in ROWS_SHAPE_GRID])


def main() -> None:
    import sys
    do_sweep = "--sweep" in sys.argv
    out = parse_out()
    copy_gbs = copy_bandwidth_gbs()
    records: list = []
    print_table(f"segmented sum float32, GB/s of input read (steady state); copy {copy_gbs:.0f} "
                f"GB/s read + written",
                ["case", "tilecore", "int32 offs", "cub", "torch", "cupy", "x cub", "x torch",
                 "of copy"], sums(copy_gbs, records))
    print_table("operators (int64 offsets), GB/s, and relative to the sum",
                ["case", "op", "GB/s", "of sum"], operators(records))
    if do_sweep:
        print_table("policy sweep (int64 offsets): the best 5 candidates per case, then the "
                    "shipped policy", ["case", "GB/s", "x shipped", "policy"], sweep(records))
        print_table("arg_max policy sweep (int64 offsets)", ["case", "GB/s", "x shipped",
                                                             "policy"], arg_sweep(records))
        print_table("segmented sums by long_min_avg_items (int64 offsets), GB/s",
                    ["dtype", "case", "shipped", *(f"rows below {t}" for t in THRESHOLDS)],
                    threshold_sweep(records))
        print_table("segmented sums by the rows kernel's threads x items (int64 offsets), GB/s",
                    ["dtype", "case", "shipped", *(f"{b} x {r}" for b, r in ROWS_SHAPE_GRID)],
                    rows_shape_sweep(records))
    path = write_json(out, "segmented_reduce", {**device_info(), "copy_gbs": copy_gbs,
                                                "cuda_compute": cc is not None,
                                                "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
