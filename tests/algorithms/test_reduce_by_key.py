"""DeviceReduce.reduce_by_key on the interpreter against a sequential
reference (runs of consecutive keys equal under ==, each folded in order):
sizes around the tile, all-equal and all-distinct keys, runs crossing tiles,
int/float/bool keys (NaN keys: a run each), every well-known operator, a
non-commutative user operator, the two-phase protocol and the errors
(nothing written). A small tile (64 items, for both reduce_by_key's kernels
and the scans it runs) makes the interpreter run many tiles; the suite's
conftest also compiles every launch for sm_80 and sm_90.

GPU tests (CuPy): large inputs, bit-identical float sums over 20 runs, CUDA
graph capture."""
import operator

import numpy as np
import pytest

import tilecore.algorithms.reduce_by_key as RBK
from tilecore.algorithms import DeviceReduce as R
from tilecore.dispatch import override_policy

TILE = 64
SCAN_SMALL = dict(block_threads=32, items_per_thread=2, blocks_per_sm=2, small_items=0,
                  one_launch_max_items=0,
                  mode=3, exact_mode=2, lookback_window=4, group_tiles=4)
SIZES = [0, 1, 2, 31, 32, 33, TILE - 1, TILE, TILE + 1, 3001]
RNG = np.random.default_rng(15)


@pytest.fixture(autouse=True)
def small_tiles(monkeypatch):
    monkeypatch.setattr(RBK, "THREADS", 32)
    monkeypatch.setattr(RBK, "ITEMS_PER_THREAD", 2)
    with override_policy("scan", **SCAN_SMALL):
        yield


def wrap(dtype):
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        return lambda v: v
    bits = 8 * dt.itemsize
    if dt.kind == "u":
        return lambda v: int(v) % 2**bits
    return lambda v: (int(v) + 2**(bits - 1)) % 2**bits - 2**(bits - 1)


def reference(keys, vals, f, fix=lambda v: v):
    """(unique keys, aggregates) of the runs of keys equal under ==."""
    uniq, aggs = [], []
    for i in range(len(keys)):
        if i == 0 or not keys[i - 1] == keys[i]:
            uniq.append(keys[i])
            aggs.append(vals[i])
        else:
            aggs[-1] = fix(f(aggs[-1], vals[i]))
    return uniq, aggs


def call(keys, vals, op, n=None, uniq_dtype=None, agg_dtype=None, runs_dtype=np.int32):
    n = len(keys) if n is None else n
    u = np.full(max(n, 1), 77, uniq_dtype or keys.dtype)
    a = np.full(max(n, 1), 55, agg_dtype or vals.dtype)
    r = np.full(1, 123, runs_dtype)
    nbytes = R.reduce_by_key(None, keys, u, vals, a, r, op, n)
    assert isinstance(nbytes, int) and nbytes >= 1
    assert R.reduce_by_key(np.zeros(nbytes, np.uint8), keys, u, vals, a, r, op, n) == nbytes
    return u, a, r


def check(keys, vals, op, f, fix=lambda v: v, **kw):
    u, a, r = call(keys, vals, op, **kw)
    want_u, want_a = reference(list(keys), vals.tolist(), f, fix)
    m = len(want_u)
    assert r[0] == m
    np.testing.assert_array_equal(u[:m], np.array(want_u, u.dtype))
    np.testing.assert_array_equal(a[:m], np.array(want_a, dtype=np.float64).astype(a.dtype)
                                  if a.dtype.kind == "f" else np.array(want_a).astype(a.dtype))
    assert (u[m:] == np.array(77).astype(u.dtype)).all()   # nothing written past num_runs
    assert (a[m:] == 55).all()
    return u, a, r


def runs_of(n, max_run=20, dtype=np.int32):
    keys = np.repeat(RNG.integers(0, 5, n) * 1000 + np.arange(n), RNG.integers(1, max_run, n))[:n]
    return keys.astype(dtype)


@pytest.mark.parametrize("n", SIZES)
def test_sizes_float32_sum(n):
    keys = runs_of(n)
    vals = RNG.integers(-20, 20, n).astype(np.float32)
    check(keys, vals, "add", operator.add)


def test_zero_items_writes_only_num_runs():
    keys, vals = np.zeros(4, np.int32), np.ones(4, np.float32)
    u, a, r = call(keys, vals, "add", n=0)
    assert r[0] == 0 and (u == 77).all() and (a == 55).all()


@pytest.mark.parametrize("n", [1, TILE + 1, 3001])
def test_all_equal_and_all_distinct(n):
    vals = RNG.integers(-9, 9, n).astype(np.int32)
    check(np.full(n, 7, np.int64), vals, "add", operator.add)
    check(np.arange(n, dtype=np.int16) - 500, vals, "max", max)


def test_runs_crossing_tiles():
    n = 40 * TILE + 3
    keys = runs_of(n, max_run=3 * TILE)
    keys[TILE - 5:5 * TILE + 7] = -1                 # a run over several tiles
    keys[7 * TILE] = keys[7 * TILE - 1] + 1          # runs of length 1 at a tile boundary
    keys[7 * TILE + 1] = keys[7 * TILE] + 1
    vals = RNG.integers(-100, 100, n).astype(np.float64)
    check(keys, vals, "add", operator.add)


@pytest.mark.parametrize("kdtype", [np.int8, np.uint16, np.int32, np.uint64, np.float16,
                                    np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_key_dtypes(kdtype):
    n = 500
    keys = (RNG.integers(0, 4, n) // 3).astype(kdtype)   # runs of 0s and 1s
    vals = RNG.integers(-9, 9, n).astype(np.int32)
    check(keys, vals, "add", operator.add)


def test_bool_keys():
    keys = RNG.integers(0, 4, 300) == 0
    vals = RNG.integers(-9, 9, 300).astype(np.int64)
    check(keys, vals, "add", operator.add)


def test_nan_keys_are_runs_of_their_own_and_first_key_is_written():
    keys = np.array([1, 1, np.nan, np.nan, np.nan, 2, -0.0, 0.0, 0.0, np.nan], np.float32)
    vals = np.arange(10, dtype=np.float32)
    u, a, r = call(keys, vals, "add")
    assert r[0] == 7
    np.testing.assert_array_equal(u[:7], [1, np.nan, np.nan, np.nan, 2, 0, np.nan])
    np.testing.assert_array_equal(a[:7], [1, 2, 3, 4, 5, 6 + 7 + 8, 9])
    assert np.signbit(u[5])                          # -0.0 == 0.0: the run's first key


OPS = [("add", operator.add), ("mul", operator.mul), ("min", min), ("max", max),
       ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
       (operator.add, operator.add), (operator.mul, operator.mul), (operator.and_, operator.and_),
       (operator.or_, operator.or_), (operator.xor, operator.xor)]


@pytest.mark.parametrize("op,f", OPS, ids=lambda o: o if isinstance(o, str) else None)
def test_well_known_ops_int32(op, f):
    n = 2 * TILE + 9
    keys = runs_of(n, max_run=30)
    vals = RNG.integers(-7, 7, n).astype(np.int32)
    check(keys, vals, op, f, wrap(np.int32))


@pytest.mark.parametrize("op,f", [("add", operator.add), ("mul", operator.mul), ("min", min),
                                  ("max", max)])
def test_well_known_ops_float32(op, f):
    n = 2 * TILE + 9
    keys = runs_of(n, max_run=30)
    vals = RNG.choice([-2.0, -1.0, 0.5, 1.0, 2.0], n).astype(np.float32)
    check(keys, vals, op, f)


def test_narrow_sum_accumulates_in_int32():
    keys = np.zeros(300, np.int32)
    vals = np.full(300, 100, np.int8)
    u, a, r = call(keys, vals, "add", agg_dtype=np.int32)
    assert r[0] == 1 and a[0] == 30000


def affine(p, q):
    """x -> a*x + b maps packed in a uint32, p then q: associative, not commutative."""
    return ((((p >> 16) * (q >> 16)) & 0xFFFF) << 16) | \
        (((q >> 16) * (p & 0xFFFF) + (q & 0xFFFF)) & 0xFFFF)


def take_first(a, b):
    return a - b + b


def test_non_commutative_user_ops():
    n = 3 * TILE + 11
    keys = runs_of(n, max_run=70, dtype=np.int64)
    vals = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    check(keys, vals, affine, lambda p, q: int(affine(np.uint64(p), np.uint64(q))))
    fvals = RNG.integers(-50, 50, n).astype(np.float32)
    check(keys, fvals, take_first, lambda p, q: p)
    check(keys, fvals, lambda a, b: b, lambda p, q: q)      # a lambda from host code: take last


def test_output_conversions_and_runs_dtype():
    keys = runs_of(200).astype(np.int16)
    vals = RNG.integers(-9, 9, 200).astype(np.int16)
    check(keys, vals, "add", operator.add, uniq_dtype=np.int64, agg_dtype=np.float64,
          runs_dtype=np.uint64)


def test_temp_storage_is_stable_and_at_least_one_byte():
    keys, vals = runs_of(1000), np.ones(1000, np.float32)
    u, a, r = np.zeros(1000, np.int32), np.zeros(1000, np.float32), np.zeros(1, np.int32)
    sizes = {R.reduce_by_key(None, keys, u, vals, a, r, "add", 1000) for _ in range(3)}
    assert len(sizes) == 1 and sizes.pop() >= 1
    assert R.reduce_by_key(None, keys, u, vals, a, r, "add", 0) >= 1


def test_errors_name_the_problem_and_write_nothing():
    n = 100
    keys, vals = runs_of(n), np.ones(n, np.float32)
    u, a, r = np.full(n, 77, np.int32), np.full(n, 55, np.float32), np.full(1, -1, np.int32)
    nbytes = R.reduce_by_key(None, keys, u, vals, a, r, "add", n)
    temp = np.zeros(nbytes, np.uint8)

    def bad(exc, match, *args, **kw):
        full = dict(temp_storage=temp, d_keys_in=keys, d_unique_out=u, d_values_in=vals,
                    d_aggregates_out=a, d_num_runs_out=r, op="add", num_items=n)
        full.update(kw)
        with pytest.raises(exc, match=match):
            R.reduce_by_key(**full)
        assert (u == 77).all() and (a == 55).all() and r[0] == -1

    bad(ValueError, f"at least {nbytes} bytes", temp_storage=np.zeros(nbytes - 1, np.uint8))
    bad(ValueError, '"num_items".*more than "d_keys_in"', num_items=n + 1)
    bad(ValueError, '"num_items".*>= 0', num_items=-1)
    bad(TypeError, '"num_items"', num_items=3.0)
    bad(ValueError, '"d_values_in"', d_values_in=vals[:50])
    bad(ValueError, '"d_unique_out".*room for num_items', d_unique_out=u[:50])
    bad(ValueError, '"d_aggregates_out".*room', d_aggregates_out=a[:99])
    bad(TypeError, '"d_num_runs_out".*float32', d_num_runs_out=np.zeros(1, np.float32))
    bad(TypeError, '"d_keys_in"', d_keys_in=[1, 2, 3])
    bad(ValueError, '"d_keys_in".*1-d', d_keys_in=keys.reshape(10, 10))
    bad(TypeError, '"op"', op="sub")
    bad(TypeError, '"d_values_in".*integer', op="xor")
    bad(ValueError, '"d_aggregates_out".*overlaps "d_values_in"', d_aggregates_out=vals)
    bad(ValueError, '"d_unique_out".*overlaps "d_keys_in"', d_unique_out=keys)
    bad(TypeError, '"temp_storage"', temp_storage="x")


# --- GPU ---------------------------------------------------------------------------------------
@pytest.fixture
def cp():
    return pytest.importorskip("cupy")


def gpu_call(cp, keys, vals, op, stream=None):
    n = keys.size
    u, a, r = cp.zeros(n, keys.dtype), cp.zeros(n, vals.dtype), cp.zeros(1, cp.int64)
    temp = cp.empty(R.reduce_by_key(None, keys, u, vals, a, r, op, n, stream=stream), cp.uint8)
    R.reduce_by_key(temp, keys, u, vals, a, r, op, n, stream=stream)
    return u, a, r, temp


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.setattr(RBK, "THREADS", 256)
    monkeypatch.setattr(RBK, "ITEMS_PER_THREAD", 4)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 1000, 10**6 + 3])
def test_gpu_against_numpy(cp, shipped, n):
    keys = np.repeat(np.arange(n), np.random.default_rng(n).integers(1, 50, n))[:n].astype(np.int32)
    vals = np.random.default_rng(1).integers(-9, 9, n).astype(np.int64)
    with override_policy("scan"):
        u, a, r, _ = gpu_call(cp, cp.asarray(keys), cp.asarray(vals), "add")
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    m = starts.size
    assert int(r[0]) == m
    np.testing.assert_array_equal(cp.asnumpy(u[:m]), keys[starts])
    np.testing.assert_array_equal(cp.asnumpy(a[:m]), np.add.reduceat(vals, starts))


@pytest.mark.gpu
def test_gpu_float_sums_bit_identical_over_20_runs(cp, shipped):
    n = 2**22 + 5
    rng = np.random.default_rng(3)
    runs = rng.integers(1, 5000, 2 * n // 2500 + 2)     # mean 2500: about 2n keys, cut to n
    keys = cp.asarray(np.repeat(np.arange(runs.size), runs)[:n].astype(np.int64))
    vals = cp.asarray(rng.standard_normal(n).astype(np.float32))
    first = [cp.asnumpy(v) for v in gpu_call(cp, keys, vals, "add")[:3]]
    for _ in range(20):
        got = gpu_call(cp, keys, vals, "add")[:3]
        for w, g in zip(first, got):
            assert w.tobytes() == cp.asnumpy(g).tobytes()


@pytest.mark.gpu
def test_gpu_cuda_graph_capture_and_replay(cp, shipped):
    n = 2**20 + 3
    keys, vals = cp.zeros(n, cp.int32), cp.zeros(n, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    u, a, r, temp = gpu_call(cp, keys, vals, "add", stream=stream)   # compile outside capture
    stream.synchronize()
    with stream:
        stream.begin_capture()
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", n, stream=stream)
        graph = stream.end_capture()
    for seed in range(3):
        rng = np.random.default_rng(seed)
        hk = np.sort(rng.integers(0, 5000, n)).astype(np.int32)
        hv = rng.integers(-9, 9, n).astype(np.float32)
        keys.set(hk, stream=stream)    # ordered before the replay
        vals.set(hv, stream=stream)
        graph.launch(stream)
        stream.synchronize()
        starts = np.flatnonzero(np.concatenate([[True], hk[1:] != hk[:-1]]))
        m = starts.size
        assert int(r[0]) == m
        np.testing.assert_array_equal(cp.asnumpy(u[:m]), hk[starts])
        np.testing.assert_array_equal(cp.asnumpy(a[:m]), np.add.reduceat(hv, starts))
