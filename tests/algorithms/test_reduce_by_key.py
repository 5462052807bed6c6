"""DeviceReduce.reduce_by_key on the interpreter against a sequential
reference (runs of consecutive keys equal under ==, each folded in order):
sizes around the tile, all-equal and all-distinct keys, runs crossing tiles,
int/float/bool keys (NaN keys: a run each), every well-known operator, a
non-commutative user operator, the two-phase protocol and the errors
(nothing written). A small tile (64 items, for both reduce_by_key's kernels
and the scans it runs) makes the interpreter run many tiles; the suite's
conftest also compiles every launch for sm_80 and sm_90.

Both paths: inputs of at most small_max_items items (here SMALL, 200) run one
launch of rbk_small, larger ones the multi-launch path; tests taking the
`path` fixture run on each whatever the size. The cached host path: repeated
calls skip the general path (counted), launch the same, and fall back to it
(raising its errors, writing nothing) when anything changes.

GPU tests (CuPy): large inputs, bit-identical float sums over 20 runs, CUDA
graph capture."""
import operator
import warnings

import ml_dtypes
import numpy as np
import pytest

import tilecore.algorithms.reduce_by_key as RBK
from tilecore.algorithms import DeviceReduce as R
from tilecore.dispatch import override_policy
from algo_helpers import count_calls, run_keys

TILE = 64
SMALL = 200             # the one-launch path's threshold in these tests
SCAN_SMALL = dict(block_threads=32, items_per_thread=2, blocks_per_sm=2, small_items=0,
                  one_launch_max_items=0,
                  mode=3, exact_mode=2, lookback_window=4, group_tiles=4)
SIZES = [0, 1, 2, 31, 32, 33, TILE - 1, TILE, TILE + 1, 3001]
RNG = np.random.default_rng(15)


RBK_SMALL = dict(block_threads=32, items_per_thread=2, small_max_items=SMALL,
                 small_block_threads=32, small_items_per_thread=2)


@pytest.fixture(autouse=True)
def small_tiles(request):
    """64-item tiles for every kernel (the GPU tests taking `shipped`: the
    shipped reduce_by_key policy)."""
    with override_policy("scan", **SCAN_SMALL), \
            override_policy("reduce_by_key", **({} if "shipped" in request.fixturenames
                                                else RBK_SMALL)):
        yield


@pytest.fixture(params=["one", "multi"])
def path(request, small_tiles):
    """Run the test on the one-launch path (any size) or the multi-launch one."""
    with override_policy("reduce_by_key",
                         small_max_items=1 << 20 if request.param == "one" else 0):
        yield request.param


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
def test_sizes_float32_sum(n, path):
    keys = runs_of(n)
    vals = RNG.integers(-20, 20, n).astype(np.float32)
    check(keys, vals, "add", operator.add)


def test_zero_items_writes_only_num_runs():
    keys, vals = np.zeros(4, np.int32), np.ones(4, np.float32)
    u, a, r = call(keys, vals, "add", n=0)
    assert r[0] == 0 and (u == 77).all() and (a == 55).all()


@pytest.mark.parametrize("n", [1, TILE + 1, 3001])
def test_all_equal_and_all_distinct(n, path):
    vals = RNG.integers(-9, 9, n).astype(np.int32)
    check(np.full(n, 7, np.int64), vals, "add", operator.add)
    check(np.arange(n, dtype=np.int16) - 500, vals, "max", max)


def test_runs_crossing_tiles(path):
    n = 40 * TILE + 3
    keys = runs_of(n, max_run=3 * TILE)
    keys[TILE - 5:5 * TILE + 7] = -1                 # a run over several tiles
    keys[7 * TILE] = keys[7 * TILE - 1] + 1          # runs of length 1 at a tile boundary
    keys[7 * TILE + 1] = keys[7 * TILE] + 1
    vals = RNG.integers(-100, 100, n).astype(np.float64)
    check(keys, vals, "add", operator.add)


@pytest.mark.parametrize("kdtype", [np.int8, np.uint16, np.int32, np.uint64, np.float16,
                                    np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_key_dtypes(kdtype, path):
    n = 500
    keys = (RNG.integers(0, 4, n) // 3).astype(kdtype)   # runs of 0s and 1s
    vals = RNG.integers(-9, 9, n).astype(np.int32)
    check(keys, vals, "add", operator.add)


def test_bool_keys(path):
    keys = RNG.integers(0, 4, 300) == 0
    vals = RNG.integers(-9, 9, 300).astype(np.int64)
    check(keys, vals, "add", operator.add)


def test_nan_keys_are_runs_of_their_own_and_first_key_is_written(path):
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
def test_well_known_ops_int32(op, f, path):
    n = 2 * TILE + 9
    keys = runs_of(n, max_run=30)
    vals = RNG.integers(-7, 7, n).astype(np.int32)
    check(keys, vals, op, f, wrap(np.int32))


@pytest.mark.parametrize("op,f", [("add", operator.add), ("mul", operator.mul), ("min", min),
                                  ("max", max)])
def test_well_known_ops_float32(op, f, path):
    n = 2 * TILE + 9
    keys = runs_of(n, max_run=30)
    vals = RNG.choice([-2.0, -1.0, 0.5, 1.0, 2.0], n).astype(np.float32)
    check(keys, vals, op, f)


def test_narrow_sum_accumulates_in_int32(path):
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


def test_non_commutative_user_ops(path):
    n = 3 * TILE + 11
    keys = runs_of(n, max_run=70, dtype=np.int64)
    vals = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    check(keys, vals, affine, lambda p, q: int(affine(np.uint64(p), np.uint64(q))))
    fvals = RNG.integers(-50, 50, n).astype(np.float32)
    check(keys, fvals, take_first, lambda p, q: p)
    check(keys, fvals, lambda a, b: b, lambda p, q: q)      # a lambda from host code: take last


def test_output_conversions_and_runs_dtype(path):
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


def test_errors_name_the_problem_and_write_nothing(path):
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
    # a narrow count would wrap silently past its range
    bad(TypeError, '"d_num_runs_out": expected a 32- or 64-bit integer dtype .*got int8',
        d_num_runs_out=np.full(1, -1, np.int8))
    bad(TypeError, '"d_keys_in"', d_keys_in=[1, 2, 3])
    bad(ValueError, '"d_keys_in".*1-d', d_keys_in=keys.reshape(10, 10))
    bad(TypeError, '"op"', op="sub")
    bad(TypeError, '"d_values_in".*integer', op="xor")
    bad(ValueError, '"d_aggregates_out".*overlaps "d_values_in"', d_aggregates_out=vals)
    bad(ValueError, '"d_unique_out".*overlaps "d_keys_in"', d_unique_out=keys)
    wide = np.full(3 * n, 55, np.float32)   # the first n elements apart, the arrays not:
    wide[:n] = 1                            # the API's error, not the launcher's
    bad(ValueError, '"d_aggregates_out": it overlaps "d_values_in"', d_values_in=wide[:2 * n],
        d_aggregates_out=wide[3 * n // 2:])
    bad(TypeError, '"temp_storage"', temp_storage="x")


# --- the one-launch path -----------------------------------------------------------------------
KEY_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
VALUE_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def keys_of(dtype, n):
    """Runs of 0s, 1s and 2s (two values for bool) of lengths 1 .. 6."""
    runs = RNG.integers(0, 3, n) if dtype is not np.bool_ else np.arange(n) % 2
    return np.repeat(runs, RNG.integers(1, 7, n))[:n].astype(dtype)


def cub_accumulator(dtype, op):
    """CUB's accumulator of op(value, value), written out: sums of integers
    narrower than int in int32, of float16/bfloat16 in float32; max and min in
    the value type."""
    dtype = np.dtype(dtype)
    if op != "add":
        return dtype
    if dtype.kind in "iub" and dtype.itemsize < 4:
        return np.dtype(np.int32)
    if dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        return np.dtype(np.float32)
    return dtype


def small_ref(keys, vals, op):
    """reference() in float64 (floats) or exact Python ints (wrapped: CUB's accumulator)."""
    acc = cub_accumulator(vals.dtype, op)
    fix = wrap(acc)
    f = {"add": operator.add, "max": max, "min": min}[op]
    as_py = vals.astype(np.float64).tolist() if acc.kind == "f" else vals.astype(object).tolist()
    return reference(keys.tolist(), as_py, f, fix)


@pytest.mark.parametrize("kdtype", KEY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_one_launch_every_key_dtype(kdtype):
    n = 150                                              # one launch (SMALL = 200), 3 tiles
    keys = keys_of(kdtype, n)
    vals = RNG.integers(-9, 9, n).astype(np.int32)
    check(keys, vals, "add", operator.add, wrap(np.int32))


@pytest.mark.parametrize("vdtype", VALUE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["add", "max"])
def test_one_launch_every_value_dtype(vdtype, op):
    """Accumulators as CUB's (narrow integer sums in int32, float16/bfloat16 sums in
    float32, max in the value type), against a float64 / exact-integer reference."""
    n = 190
    keys = keys_of(np.int16, n)
    lo, hi = (0, 60) if np.dtype(vdtype).kind == "u" else (-60, 60)
    vals = RNG.integers(lo, hi, n).astype(vdtype)
    u, a, r = call(keys, vals, op)
    want_u, want_a = small_ref(keys, vals, op)
    m = len(want_u)
    assert r[0] == m
    np.testing.assert_array_equal(u[:m], want_u)
    np.testing.assert_array_equal(a[:m].astype(np.float64),
                                  np.array(want_a, np.float64).astype(vals.dtype)
                                  .astype(np.float64))
    assert (a[m:] == np.array(55).astype(a.dtype)).all()


@pytest.mark.parametrize("n", [1, 2, TILE - 1, TILE, TILE + 1, SMALL, SMALL + 1])
def test_sizes_on_both_sides_of_the_threshold(n, launches):
    """1 .. SMALL items: one launch; SMALL + 1: the multi-launch path (checked on
    recorded launches, then run)."""
    keys, vals = runs_of(n, max_run=9), RNG.integers(-9, 9, n).astype(np.int64)
    u, a, r = np.zeros(n, np.int32), np.zeros(n, np.int64), np.zeros(1, np.int32)
    R.reduce_by_key(np.zeros(1, np.uint8) if n <= SMALL else
                    np.zeros(R.reduce_by_key(None, keys, u, vals, a, r, "add", n), np.uint8),
                    keys, u, vals, a, r, "add", n)
    names = [c[2].pyfunc.__name__ for c in launches.calls]
    if n <= SMALL:
        assert names == ["rbk_small"] and launches.calls[0][1] == (-(-n // TILE),)
    else:
        assert "rbk_small" not in names and len(names) >= 3


@pytest.mark.parametrize("n", [1, 2, TILE - 1, TILE, TILE + 1, SMALL, SMALL + 1])
def test_sizes_both_paths_agree(n, monkeypatch):
    keys = runs_of(n, max_run=9)
    vals = RNG.integers(-9, 9, n).astype(np.int64)
    got = {}
    for limit in (0, 1 << 20):
        with override_policy("reduce_by_key", small_max_items=limit):
            got[limit] = [x.copy() for x in check(keys, vals, "add", operator.add)]
    for x, y in zip(*got.values()):
        np.testing.assert_array_equal(x, y)


def test_one_launch_float_sums_close_and_deterministic():
    """float32 sums of runs of every length up to 3 tiles: within rounding of a
    float64 reference, and bit-identical call to call."""
    n = SMALL
    keys = run_keys(RNG, n, 3 * TILE)
    vals = RNG.standard_normal(n).astype(np.float32)
    u, a, r = call(keys, vals, "add")
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    m = starts.size
    assert r[0] == m
    np.testing.assert_allclose(a[:m], np.add.reduceat(vals.astype(np.float64), starts),
                               rtol=1e-5, atol=1e-5)
    for _ in range(2):
        assert call(keys, vals, "add")[1].tobytes() == a.tobytes()


def matmul2(p, q):
    """2x2 integer matrices packed 4 x 8 bits in an int32 (mod 256), p @ q:
    associative, not commutative."""
    def e(x, i):
        return (x >> (8 * i)) & 0xFF

    def pack(a, b, c, d):
        return (a & 0xFF) | ((b & 0xFF) << 8) | ((c & 0xFF) << 16) | ((d & 0xFF) << 24)
    return pack(e(p, 0) * e(q, 0) + e(p, 1) * e(q, 2), e(p, 0) * e(q, 1) + e(p, 1) * e(q, 3),
                e(p, 2) * e(q, 0) + e(p, 3) * e(q, 2), e(p, 2) * e(q, 1) + e(p, 3) * e(q, 3))


def test_one_launch_non_commutative_matrix_product():
    """A run spanning every tile, runs of one item at tile boundaries, and a
    2x2 matrix product (associative, not commutative) folded in item order."""
    n = 3 * TILE + 5
    keys = np.zeros(n, np.int64)
    keys[TILE - 1] = keys[TILE] = 1                   # single-item runs around tile 1's start
    keys[TILE + 1:] = 2
    keys[2 * TILE + 3:] = 3
    vals = RNG.integers(0, 2**31, n, dtype=np.int64).astype(np.int32) & 0x7F7F7F7F
    check(keys, vals, matmul2, lambda p, q: int(matmul2(np.int64(p), np.int64(q))))
    assert matmul2(np.int64(vals[0]), np.int64(vals[1])) != \
        matmul2(np.int64(vals[1]), np.int64(vals[0]))


# --- the cached host path ---------------------------------------------------------------------
def arrays(n=150, m=None):
    m = n if m is None else m
    keys = runs_of(n, max_run=9)
    vals = RNG.integers(-9, 9, n).astype(np.float32)
    return keys, vals, np.full(m, 77, np.int32), np.full(m, 55, np.float32), \
        np.full(1, -1, np.int32)


@pytest.fixture
def general(monkeypatch):
    return count_calls(monkeypatch, [(RBK, "_general", "general")])


def test_cached_calls_take_no_general_path_and_match_it(general):
    keys, vals, u, a, r = arrays()
    temp = np.zeros(1, np.uint8)
    for op, f in [("add", operator.add), (take_first, lambda p, q: p)]:
        check(keys, vals, op, f)                          # (general: query and run)
        seen = general["general"]
        for n in (150, 149, 1, 64):
            u[:] = 77
            a[:] = 55
            assert R.reduce_by_key(None, keys, u, vals, a, r, op, n) == 1
            assert R.reduce_by_key(temp, keys, u, vals, a, r, op, n) == 1
            want_u, want_a = reference(keys[:n].tolist(), vals[:n].tolist(), f)
            m = len(want_u)
            assert r[0] == m and (u[:m] == want_u).all() and (u[m:] == 77).all()
            np.testing.assert_array_equal(a[:m], np.array(want_a, np.float32))
        assert general["general"] == seen, "a cached call took the general path"


def test_cached_and_general_paths_launch_the_same(launches, monkeypatch):
    keys, vals, u, a, r = arrays()
    temp = np.zeros(4, np.uint8)
    R.reduce_by_key(temp, keys, u, vals, a, r, "max", 150)    # general
    general = list(launches.calls)
    launches.calls.clear()
    R.reduce_by_key(temp, keys, u, vals, a, r, "max", 150)    # cached
    assert launches.calls == general and len(general) == 1


def test_cached_path_falls_back_raising_and_writing_nothing(general):
    """Whatever changes between calls of a cached signature sends the call down
    the general path, which raises its error before any launch."""
    keys, vals, u, a, r = arrays(150, 200)
    temp = np.zeros(1, np.uint8)
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
    u[:], a[:], r[:] = 77, 55, -1
    seen = general["general"]

    def bad(exc, match, **kw):
        args = dict(temp_storage=temp, d_keys_in=keys, d_unique_out=u, d_values_in=vals,
                    d_aggregates_out=a, d_num_runs_out=r, op="add", num_items=150)
        args.update(kw)
        before = general["general"]
        with pytest.raises(exc, match=match):
            R.reduce_by_key(**args)
        assert general["general"] == before + 1
        assert (u == 77).all() and (a == 55).all() and r[0] == -1

    bad(ValueError, "at least 1 bytes", temp_storage=np.zeros(0, np.uint8))
    bad(ValueError, '"num_items".*more than "d_keys_in"', num_items=151)
    bad(ValueError, '"d_values_in"', d_values_in=vals[:100])
    bad(ValueError, '"d_unique_out".*room', d_unique_out=u[:100])
    bad(ValueError, '"d_aggregates_out".*room', d_aggregates_out=a[:149])
    bad(ValueError, '"d_aggregates_out".*overlaps "d_values_in"',
        d_aggregates_out=vals.view(np.float32))
    bad(ValueError, '"d_unique_out".*overlaps "d_keys_in"', d_unique_out=keys[::-1])
    both = np.full(400, 55, np.float32)
    bad(ValueError, '"d_aggregates_out".*overlaps "d_unique_out"', d_unique_out=both[:200].view(
        np.int32), d_aggregates_out=both[100:])
    bad(ValueError, '"d_num_runs_out".*overlaps', d_num_runs_out=u[5:6])
    bad(TypeError, '"num_items"', num_items=150.0)
    bad(ValueError, '"d_keys_in".*1-d', d_keys_in=np.zeros((10, 15), np.int32))
    bad(TypeError, '"temp_storage"', temp_storage=[0])
    with warnings.catch_warnings():     # (setting a shape is deprecated from NumPy 2.5)
        warnings.simplefilter("ignore", DeprecationWarning)
        a.shape = (2, 100)                                 # the same object, reshaped
        bad(ValueError, '"d_aggregates_out".*1-d')
        a.shape = (200,)
    assert general["general"] == seen + 13
    assert R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150) == 1    # cached again
    assert general["general"] == seen + 13 and r[0] > 0


def test_cached_path_rechecks_arrays_whose_memory_moved(general, monkeypatch):
    """The overlap checks are skipped for the last call's array objects, unless
    the signature tracks where they are (PyTorch's tensors can move: `set_`,
    `resize_`) and that changed: stood in for here by a place function over
    NumPy arrays."""
    monkeypatch.setattr(RBK, "_sigs", {})     # only this test's signature (whatever ran before)
    keys, vals, u, a, r = arrays()
    temp = np.zeros(1, np.uint8)
    check(keys, vals, "add", operator.add)
    sig = next(s for s in RBK._sigs.values() if s.libs[0].name == "numpy")
    where = {"at": 0}
    monkeypatch.setattr(sig, "place", lambda x: (where["at"], id(x)))
    checks = count_calls(monkeypatch, [(RBK._Sig, "_apart", "apart")])
    seen = general["general"]
    for at, want in ((0, 1), (0, 1), (1, 2), (1, 2)):
        where["at"] = at
        assert R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150) == 1
        assert checks["apart"] == want
    R.reduce_by_key(temp, keys, u, vals, a.copy(), r, "add", 150)    # a new object
    assert checks["apart"] == 3 and general["general"] == seen


def test_cached_path_follows_policy_changes(general):
    keys, vals, u, a, r = arrays()
    temp = np.zeros(1, np.uint8)
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
    seen = general["general"]
    with override_policy("scan", block_threads=32):       # a new epoch: the signature is stale
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
        assert general["general"] == seen + 1
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)   # cached in the new epoch
        assert general["general"] == seen + 1
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
    assert general["general"] == seen + 2


def test_cached_path_counts_beyond_the_threshold(general):
    """Counts above small_max_items replay the multi-launch path's launches
    (kept per count): the same bytes asked for and the same results as the
    general path, no general-path call; a buffer too small for the count and
    0 items take the general path (its error, nothing written)."""
    big = SMALL + 150
    keys, vals, u, a, r = arrays(big)
    for op, f in [("add", operator.add), (take_first, lambda p, q: p)]:
        needed = R.reduce_by_key(None, keys, u, vals, a, r, op, big)     # general: cached
        temp = np.zeros(needed, np.uint8)
        seen = general["general"]
        for n in (big, SMALL + 1, big - 7, big):
            u[:], a[:], r[:] = 77, 55, -1
            assert R.reduce_by_key(None, keys, u, vals, a, r, op, n) <= needed
            assert R.reduce_by_key(temp, keys, u, vals, a, r, op, n) <= needed
            want_u, want_a = reference(keys[:n].tolist(), vals[:n].tolist(), f)
            m = len(want_u)
            assert r[0] == m and (u[:m] == want_u).all() and (u[m:] == 77).all()
            np.testing.assert_array_equal(a[:m], np.array(want_a, np.float32))
            assert (a[m:] == 55).all()
        assert general["general"] == seen, "a cached call took the general path"
    u[:], a[:], r[:] = 77, 55, -1
    with pytest.raises(ValueError, match=f"at least {needed} bytes"):
        R.reduce_by_key(temp[:needed - 1], keys, u, vals, a, r, "add", big)
    assert general["general"] == seen + 1
    assert (u == 77).all() and (a == 55).all() and r[0] == -1
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 0)
    assert general["general"] == seen + 2 and r[0] == 0


def test_cached_large_counts_launch_as_the_general_path(launches):
    big = SMALL + 150
    keys, vals, u, a, r = arrays(big)
    temp = np.zeros(R.reduce_by_key(None, keys, u, vals, a, r, "max", big), np.uint8)
    RBK._sigs.clear()
    R.reduce_by_key(temp, keys, u, vals, a, r, "max", big)      # general
    general = list(launches.calls)
    launches.calls.clear()
    R.reduce_by_key(temp, keys, u, vals, a, r, "max", big)      # cached
    assert launches.calls == general
    assert len(general) == 6        # heads, 2 x (status init, scan), scatter


def test_new_arrays_are_checked_again(general):
    """The overlap checks are skipped only for the arrays of the last call that
    passed them: other arrays of the same types are checked (and cached)."""
    keys, vals, u, a, r = arrays()
    temp = np.zeros(1, np.uint8)
    R.reduce_by_key(temp, keys, u, vals, a, r, "add", 150)
    seen = general["general"]
    u2, a2 = u.copy(), a.copy()
    R.reduce_by_key(temp, keys, u2, vals, a2, r, "add", 150)
    assert general["general"] == seen
    with pytest.raises(ValueError, match="overlaps"):
        R.reduce_by_key(temp, keys, u2, vals, vals, r, "add", 150)
    assert general["general"] == seen + 1


def test_a_zero_d_count_is_not_cached(general):
    keys, vals, u, a, _ = arrays()
    r0 = np.array(-1, np.int64)
    for _ in range(2):
        R.reduce_by_key(np.zeros(1, np.uint8), keys, u, vals, a, r0, "add", 150)
    assert general["general"] == 2 and int(r0) == len(reference(keys.tolist(),
                                                                   vals.tolist(), max)[0])


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


@pytest.mark.gpu
def test_gpu_torch_tensor_moved_onto_an_input_is_refused():
    """A cached PyTorch signature re-checks overlap when a tensor's memory moved
    in place (`set_`): the general path's error, nothing written."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    n = 1000
    keys = torch.arange(n, dtype=torch.int32, device="cuda") // 7
    vals = torch.rand(n, device="cuda")
    u, a = torch.zeros(n, dtype=torch.int32, device="cuda"), torch.zeros(n, device="cuda")
    r = torch.zeros(1, dtype=torch.int32, device="cuda")
    temp = torch.empty(R.reduce_by_key(None, keys, u, vals, a, r, "add", n), dtype=torch.uint8,
                       device="cuda")
    for _ in range(2):
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", n)
    assert int(r[0]) == -(-n // 7)
    a.set_(vals)                                  # the aggregates now alias the values
    before = vals.clone()
    with pytest.raises(ValueError, match='"d_aggregates_out": it overlaps "d_values_in"'):
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", n)
    torch.cuda.synchronize()
    assert torch.equal(vals, before)


@pytest.mark.gpu
def test_gpu_large_counts_take_every_cached_path(cp, monkeypatch):
    """Above the one-launch threshold a repeated call runs no general path:
    neither reduce_by_key's nor its DeviceScan calls' (whose temporaries, views
    of the caller's buffer, sit beside the caller's CuPy arrays)."""
    import tilecore.algorithms.scan as SC
    n = SMALL * 40 + 3
    keys = cp.asarray(runs_of(n, max_run=9))
    vals = cp.asarray(RNG.integers(-9, 9, n).astype(np.float32))
    u, a, r, temp = gpu_call(cp, keys, vals, "add")
    calls = count_calls(monkeypatch, [(RBK, "_general", "rbk"), (SC, "_scan", "scan")])
    for _ in range(3):
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", n)
    assert calls == {"rbk": 0, "scan": 0}
    want_u, want_a = reference(cp.asnumpy(keys).tolist(), cp.asnumpy(vals).tolist(),
                               operator.add)
    m = len(want_u)
    assert int(r[0]) == m and (cp.asnumpy(u[:m]) == want_u).all()
    np.testing.assert_array_equal(cp.asnumpy(a[:m]), np.array(want_a, np.float32))


@pytest.fixture
def shipped():
    """The shipped reduce_by_key policy (small_tiles overrides none then)."""


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 1000, 4095, 4097, 1 << 16, (1 << 16) + 1, 10**6 + 3])
def test_gpu_against_numpy(cp, shipped, n):
    keys = run_keys(np.random.default_rng(n), n, 50)
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


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 1 << 16])
def test_gpu_one_launch_bit_identical_and_cached(cp, shipped, general, n):
    rng = np.random.default_rng(5)
    keys = cp.asarray(run_keys(rng, n, 3000))
    vals = cp.asarray(rng.standard_normal(n).astype(np.float32))
    first = [cp.asnumpy(v) for v in gpu_call(cp, keys, vals, "add")[:3]]
    u, a, r, temp = gpu_call(cp, keys, vals, "add")
    seen = general["general"]
    for _ in range(5):
        a.fill(0)
        R.reduce_by_key(temp, keys, u, vals, a, r, "add", n)
        for w, g in zip(first, (u, a, r)):
            assert w.tobytes() == cp.asnumpy(g).tobytes()
    assert general["general"] == seen
