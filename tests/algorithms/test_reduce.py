"""DeviceReduce on the interpreter against NumPy (float64 references for float
sums, exact for integers): every entry point, dtypes, sizes, edge values, the
two-phase protocol and argument errors. A small policy (conftest.SMALL: 64-item
tiles, up to 8 blocks) makes the interpreter run multi-block reductions of a
few thousand items; every launch is also compiled for sm_80 and sm_90 (the
suite's conftest)."""
import operator

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceReduce as R
from algo_helpers import SMALL_TILE, small

RNG = np.random.default_rng(1234)
SIZES = [0, 1, 2, 31, 32, 33, SMALL_TILE - 1, SMALL_TILE, SMALL_TILE + 1, 199, 200, 201,
         2 * SMALL_TILE + 5, 3001]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def run(method, *args):
    """The two-phase call: size query, then the run with a buffer of exactly that size."""
    nbytes = method(None, *args)
    assert isinstance(nbytes, int) and nbytes >= 1
    temp = np.zeros(nbytes, np.uint8)
    assert method(temp, *args) == nbytes
    return nbytes


def data(dtype, n, lo=-100, hi=100):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return RNG.integers(max(lo, info.min), min(hi, info.max), n, endpoint=True).astype(dt)
    fmax = float(ml_dtypes.finfo(dt).max) / 4
    return RNG.uniform(max(lo, -fmax), min(hi, fmax), n).astype(dt)


def float_bound(x, out_dtype):
    eps = float(ml_dtypes.finfo(np.float32 if np.dtype(out_dtype).itemsize <= 4 else
                                np.float64).eps)
    mag = np.abs(x.astype(np.float64)).sum()
    out_eps = float(ml_dtypes.finfo(out_dtype).eps)
    return (np.log2(max(x.size, 2)) + 4) * eps * mag + out_eps * mag


# --- sum --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
def test_sum_float32_sizes(n):
    x = data(np.float32, n)
    out = np.full(1, 7, np.float32)
    with small():
        run(R.sum, x, out, n)
    ref = x.astype(np.float64).sum()
    assert abs(out[0] - ref) <= float_bound(x, np.float32)


@pytest.mark.parametrize("dtype", INTS)
def test_sum_ints_exact_with_cub_accumulator(dtype):
    n = 3001
    x = data(dtype, n, -2**62, 2**62)                        # the dtype's whole range
    out = np.zeros(1, dtype)
    with small():
        run(R.sum, x, out, n)
    acc = np.int32 if np.dtype(dtype).itemsize < 4 else dtype   # C++ promotion
    with np.errstate(over="ignore"):
        ref = x.sum(dtype=acc).astype(dtype)
    assert out[0] == ref


def test_sum_narrow_ints_into_wide_output():
    x = np.full(3001, 127, np.int8)
    out = np.zeros(1, np.int64)
    with small():
        run(R.sum, x, out, x.size)
    assert out[0] == 127 * 3001                               # int64 accumulator: no wrap
    u = np.full(3001, 65535, np.uint16)
    out32 = np.zeros(1, np.int32)
    with small():
        run(R.sum, u, out32, u.size)
    assert out32[0] == 65535 * 3001                           # int accumulator (promotion)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_floats(dtype):
    x = data(dtype, 3001, -4, 4)
    out = np.zeros(1, dtype)
    with small():
        run(R.sum, x, out, x.size)
    ref = x.astype(np.float64).sum()
    assert abs(float(out[0]) - ref) <= float_bound(x, dtype)


def test_sum_narrow_floats_accumulate_in_float32():
    x = np.ones(5000, np.float16)                 # a float16 accumulator would stop at 2048
    out = np.zeros(1, np.float16)
    with small():
        run(R.sum, x, out, x.size)
    assert out[0] == np.float16(5000)


def test_sum_num_items_prefix_and_output_views():
    x = data(np.float64, 500)
    out = np.zeros(3, np.float64)
    with small():
        run(R.sum, x, out[1:], 300)                            # d_out: any array, element 0
    assert out[0] == 0 and out[2] == 0
    assert abs(out[1] - x[:300].sum()) < 1e-9
    zero_d = np.zeros((), np.float64)
    run(R.sum, x, zero_d, 10)
    assert abs(zero_d - x[:10].sum()) < 1e-12


def test_sum_default_policy_large():
    x = data(np.float32, 10**6 + 3, -1, 1)
    out = np.zeros(1, np.float32)
    nbytes = run(R.sum, x, out, x.size)
    assert nbytes > 1                                          # the two-pass path
    assert abs(out[0] - x.astype(np.float64).sum()) <= float_bound(x, np.float32)


def test_deterministic_bits():
    x = data(np.float32, 3001, -1e6, 1e6)
    a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
    with small():
        run(R.sum, x, a, x.size)
        run(R.sum, x, b, x.size)
    assert a.tobytes() == b.tobytes()


# --- min / max --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_min_max_dtypes_and_extremes(dtype):
    x = data(dtype, 1000, -2**62, 2**62)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x[[17, 700]] = [info.min, info.max]
    else:
        x[[17, 700]] = [-np.inf, np.inf]
    lo, hi = np.zeros(1, dtype), np.zeros(1, dtype)
    with small():
        run(R.min, x, lo, x.size)
        run(R.max, x, hi, x.size)
    assert lo[0] == x.min() and hi[0] == x.max()


@pytest.mark.parametrize("n", [0, 1, 33, 201])
def test_min_max_empty_and_small(n):
    x = data(np.int16, n)
    lo, hi = np.zeros(1, np.int16), np.zeros(1, np.int16)
    with small():
        run(R.min, x, lo, n)
        run(R.max, x, hi, n)
    if n == 0:     # CUB: numeric_limits<T>::max() / lowest()
        assert (lo[0], hi[0]) == (32767, -32768)
    else:
        assert (lo[0], hi[0]) == (x.min(), x.max())


def test_min_max_ignore_nan_as_cub():
    x = data(np.float32, 1000)
    x[[0, 5, 999]] = np.nan
    lo, hi = np.zeros(1, np.float32), np.zeros(1, np.float32)
    with small():
        run(R.min, x, lo, x.size)
        run(R.max, x, hi, x.size)
    assert lo[0] == np.nanmin(x) and hi[0] == np.nanmax(x)
    allnan = np.full(300, np.nan, np.float32)
    with small():
        run(R.min, allnan, lo, 300)                  # fmin(FLT_MAX init, NaN...) = FLT_MAX
        run(R.max, allnan, hi, 300)
    assert lo[0] == np.finfo(np.float32).max and hi[0] == np.finfo(np.float32).min
    empty = np.zeros(0, np.float64)
    lo64 = np.zeros(1, np.float64)
    run(R.min, empty, lo64, 0)
    assert lo64[0] == np.finfo(np.float64).max


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_float_extrema_compared_in_float32_as_in_the_value_type(dtype):
    """min/max/arg of 16-bit floats compare in float32 (operators.work_dtype):
    the results, NaNs, empty inputs and ties are those of the value type."""
    finfo = ml_dtypes.finfo(dtype)
    x = data(dtype, 3001, -3, 3).round()                      # many ties
    x[[10, 2000]] = np.nan
    x[[40, 41]] = [float(finfo.max), -float(finfo.max)]
    lo, hi = np.zeros(1, dtype), np.zeros(1, dtype)
    v, i = np.zeros(1, dtype), np.zeros(1, np.int64)
    with small():
        run(R.min, x, lo, x.size)
        run(R.max, x, hi, x.size)
        assert (lo[0], hi[0]) == (np.nanmin(x), np.nanmax(x))
        run(R.arg_min, x, v, i, x.size)
        assert (v[0], i[0]) == (x[41], 41)
        x[[40, 41]] = [-np.inf, np.inf]
        run(R.arg_max, x, v, i, x.size)
        assert (v[0], i[0]) == (np.inf, 41)
        run(R.reduce, x, lo, x.size, "min", dtype(-1.0))       # a run-time init
        assert lo[0] == -np.inf
        run(R.reduce, x[2000:2500], hi, 500, "max", dtype(100.0))  # with a NaN
        assert hi[0] == 100.0
    allnan = np.full(300, np.nan, dtype)
    with small():
        run(R.min, allnan, lo, 300)
        run(R.arg_max, allnan, v, i, 300)
    assert lo[0] == finfo.max and np.isnan(v[0]) and i[0] == 0
    run(R.max, allnan, hi, 0)
    run(R.arg_min, allnan, v, i, 0)                             # CUB: max() and index 1
    assert hi[0] == -finfo.max and (v[0], i[0]) == (finfo.max, 1)
    zeros = np.array([0.0, -0.0] * 100, dtype)                  # equal: the first one wins
    with small():
        run(R.arg_min, zeros, v, i, zeros.size)
    assert i[0] == 0 and not np.signbit(v[0])


# --- arg_min / arg_max ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.int64, np.float16, np.float32,
                                   np.float64])
@pytest.mark.parametrize("n", [1, 33, 201, 1029, 1543, 2048, 3001])
def test_arg_min_max(dtype, n):
    """Sizes up to one tile, and 2, 3, 4 and 5-6 full 64-item tiles a block of 8
    (a block's loop over narrow items takes its tiles four at a time)."""
    x = data(dtype, n, -50, 50)                     # many ties: first index must win
    v, i = np.zeros(1, dtype), np.zeros(1, np.int64)
    with small():
        run(R.arg_min, x, v, i, n)
    assert (v[0], i[0]) == (x.min(), x.argmin())
    with small():
        run(R.arg_max, x, v, i, n)
    assert (v[0], i[0]) == (x.max(), x.argmax())


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
@pytest.mark.parametrize("nan_share", [0.5, 0.95])
def test_arg_min_max_many_nans_and_ties_across_tiles(dtype, nan_share):
    """A block's lanes start from its first tile and take later tiles' items only
    when strictly better: a NaN lane is replaced by a number, a tie keeps the
    earlier index."""
    rng = np.random.default_rng(int(nan_share * 100))
    n = 5003
    x = rng.integers(-3, 4, n).astype(dtype)
    x[rng.random(n) < nan_share] = np.nan
    v, i = np.zeros(1, dtype), np.zeros(1, np.int64)
    for method, ref in ((R.arg_min, np.nanargmin), (R.arg_max, np.nanargmax)):
        with small():
            run(method, x, v, i, n)
        k = ref(x.astype(np.float64))               # (NumPy's nanarg* miss bfloat16's NaNs)
        assert (v[0], i[0]) == (x[k], k)


@pytest.mark.parametrize("dtype", FLOATS)
def test_arg_signed_zeros_and_infinities(dtype):
    """The result is the chosen item itself: -0.0 == +0.0, so the first zero wins and
    its sign is kept; an infinity is a number and beats NaN. Across blocks and
    partial tiles (3001 items, 64-item tiles)."""
    rng = np.random.default_rng(5)
    v, i = np.zeros(1, dtype), np.zeros(1, np.int64)
    for first in (-0.0, 0.0):
        x = np.where(rng.random(3001) < 0.5, -0.0, 0.0).astype(dtype)
        x[1000:1003] = np.nan
        x[0] = first
        for method in (R.arg_min, R.arg_max):
            with small():
                run(method, x, v, i, x.size)
            assert v[0] == 0 and i[0] == 0 and np.signbit(v[0]) == np.signbit(first)
    for method, inf in ((R.arg_max, -np.inf), (R.arg_min, np.inf)):
        x = np.full(3001, inf, dtype)
        x[:1700:3] = np.nan
        with small():
            run(method, x, v, i, x.size)
        assert (v[0], i[0]) == (inf, 1)


def test_arg_ties_nan_and_empty():
    x = np.zeros(3001, np.float32)
    x[[2000, 500, 2999]] = -1.0
    v, i = np.zeros(1, np.float32), np.zeros(1, np.int64)
    with small():
        run(R.arg_min, x, v, i, x.size)
    assert (v[0], i[0]) == (-1.0, 500)
    x[[3, 100]] = np.nan                            # NaN: never the minimum nor the maximum
    with small():
        run(R.arg_min, x, v, i, x.size)
        assert (v[0], i[0]) == (-1.0, 500)
        run(R.arg_max, x, v, i, x.size)
        assert (v[0], i[0]) == (0.0, 0)
    allnan = np.full(300, np.nan, np.float32)
    with small():
        run(R.arg_min, allnan, v, i, 300)
    assert np.isnan(v[0]) and i[0] == 0
    i32 = np.zeros(1, np.int32)
    run(R.arg_min, x, v, i32, 0)                    # CUB: max() and index 1
    assert (v[0], i32[0]) == (np.finfo(np.float32).max, 1)
    run(R.arg_max, x, v, i, 0)
    assert (v[0], i[0]) == (np.finfo(np.float32).min, 1)


# --- reduce / transform_reduce ----------------------------------------------------------------
def user_max(a, b):
    return ct.maximum(a, b)


def user_add(a, b):
    return a + b


@ct.function
def square(t):
    return t * t


@pytest.mark.parametrize("n", [0, 1, 33, 201, 3001])
def test_reduce_user_and_known_ops(n):
    x = data(np.int32, n, -10**6, 10**6)
    out = np.zeros(1, np.int32)
    for op in (user_max, "max", max, ct.maximum):
        with small():
            run(R.reduce, x, out, n, op, np.int32(-5))
        assert out[0] == max([-5, *x.tolist()])
    for op in (user_add, "add", operator.add):
        with small():
            run(R.reduce, x, out, n, op, 5)            # init is applied once
        assert out[0] == 5 + int(x.astype(np.int64).sum())


@pytest.mark.parametrize("op, ref", [("mul", np.multiply), ("and", np.bitwise_and),
                                     ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                                     (operator.xor, np.bitwise_xor), ("min", np.minimum)])
def test_reduce_known_ops_exact(op, ref):
    x = data(np.uint32, 1001, 0, 2**32 - 1)
    out = np.zeros(1, np.uint32)
    init = np.uint32(0xFFFFFFFF if op in ("and", "min") else 1 if op == "mul" else 0)
    with small():
        run(R.reduce, x, out, x.size, op, init)
    with np.errstate(over="ignore"):
        assert out[0] == ref.reduce(np.concatenate([[init], x]).astype(np.uint32))


def test_reduce_accumulator_is_inits_dtype():
    x = np.full(1000, 200, np.uint8)
    out = np.zeros(1, np.int64)
    with small():
        run(R.reduce, x, out, x.size, "add", np.int64(0))      # int64 accumulator
    assert out[0] == 200_000
    with small():
        run(R.reduce, x, out, x.size, "add", np.uint8(0))      # uint8 accumulator wraps
    assert out[0] == 200_000 % 256
    f = data(np.float32, 3001, -1, 1)
    o64 = np.zeros(1, np.float64)
    with small():
        run(R.reduce, f, o64, f.size, user_add, np.float64(0.25))
    assert abs(o64[0] - 0.25 - f.astype(np.float64).sum()) < 1e-9


def test_transform_reduce():
    x = data(np.float32, 3001, -2, 2)
    out = np.zeros(1, np.float64)
    with small():
        run(R.transform_reduce, x, out, x.size, "add", square, np.float64(0))
    sq = (x * x).astype(np.float64)          # the transform computes in the input's dtype
    assert abs(out[0] - sq.sum()) < 1e-9
    with small():
        run(R.transform_reduce, x, out, x.size, user_max, square, np.float64(-1))
    assert out[0] == sq.max()


# --- the two-phase protocol and errors --------------------------------------------------------
def test_size_query_launches_nothing(monkeypatch):
    def no_launch(*a):
        raise AssertionError("launched during a size query")
    monkeypatch.setattr(ct, "launch", no_launch)
    x = data(np.float32, 10**5)
    out = np.full(1, 3, np.float32)
    v, i = np.zeros(1, np.float32), np.zeros(1, np.int64)
    sizes = [R.sum(None, x, out, x.size), R.min(None, x, out, 0),
             R.arg_max(None, x, v, i, x.size), R.reduce(None, x, out, 5, user_add, 0),
             R.transform_reduce(None, x, out, 7, "add", square, 0)]
    assert all(isinstance(s, int) and s >= 1 for s in sizes)
    assert sizes[0] > 1 and sizes[1] == 1
    assert out[0] == 3


def test_too_small_temp_storage_names_sizes_and_writes_nothing():
    x = data(np.float32, 10**5)
    out = np.full(1, 3, np.float32)
    nbytes = R.sum(None, x, out, x.size)
    with pytest.raises(ValueError, match=rf'"temp_storage".*expected at least {nbytes} bytes, '
                                         rf"got {nbytes - 1} bytes"):
        R.sum(np.zeros(nbytes - 1, np.uint8), x, out, x.size)
    assert out[0] == 3
    # any dtype: its bytes count
    assert R.sum(np.zeros(-(-nbytes // 8), np.float64), x, out, x.size) == nbytes


class UnhashableOp:
    """A callable operator object that cannot be hashed (__eq__ without __hash__)."""

    def __eq__(self, other):
        return isinstance(other, UnhashableOp)

    def __call__(self, a, b):
        return a + b


@pytest.mark.parametrize("call, exc, message", [
    (lambda x, o, t: R.sum(t, None, o, 4), TypeError, 'argument "d_in": expected an array'),
    (lambda x, o, t: R.sum(t, [1, 2], o, 2), TypeError, 'argument "d_in": expected an array'),
    (lambda x, o, t: R.sum(t, x, None, 4), TypeError, 'argument "d_out": expected an array'),
    (lambda x, o, t: R.sum(t, x.astype(bool), o, 4), TypeError,
     'argument "d_in": dtype bool_ is not supported'),
    (lambda x, o, t: R.sum(t, x.reshape(2, 5), o, 4), ValueError,
     'argument "d_in": expected a 1-d array, got 2 dimensions'),
    (lambda x, o, t: R.sum(t, x, o, 11), ValueError,
     'argument "num_items": 11 items is more than "d_in" holds \\(10 elements\\)'),
    (lambda x, o, t: R.sum(t, x, o, -1), ValueError,
     'argument "num_items": expected a count >= 0, got -1'),
    (lambda x, o, t: R.sum(t, x, o, 2.0), TypeError,
     'argument "num_items": expected an int, got float'),
    (lambda x, o, t: R.sum(t, x, o[:0], 4), ValueError,
     'argument "d_out": expected an array of at least 1 element'),
    (lambda x, o, t: R.arg_min(t, x, o, o, 4), TypeError,
     'argument "d_out_index": expected a 32- or 64-bit integer dtype'),
    # a narrow index would wrap silently (uint8: index 299 written as 43)
    (lambda x, o, t: R.arg_max(t, np.zeros(300), o, np.zeros(1, np.uint8), 300), TypeError,
     'argument "d_out_index": expected a 32- or 64-bit integer dtype .*got uint8'),
    (lambda x, o, t: R.arg_max(t, np.broadcast_to(np.zeros(1), (2**31 + 5,)), o,
                               np.zeros(1, np.int32), 2**31 + 5), ValueError,
     r"argument \"d_out_index\": int32 cannot hold the last item's index \(2147483652\)"),
    (lambda x, o, t: R.reduce(t, x, o, 4, "nand", 0), TypeError,
     'argument "op": expected one of'),
    (lambda x, o, t: R.reduce(t, x, o, 4, "xor", 0.0), TypeError,
     'argument "init": operator "xor" needs an integer dtype, got float64'),
    (lambda x, o, t: R.reduce(t, x, o, 4, 3, 0), TypeError, 'argument "op": expected one of'),
    (lambda x, o, t: R.reduce(t, x, o, 4, UnhashableOp(), 0), TypeError,
     'argument "op": expected one of .* got an unhashable UnhashableOp object'),
    (lambda x, o, t: R.reduce(t, x, o, 4, "add", "zero"), TypeError,
     'argument "init": expected a number, got str'),
    (lambda x, o, t: R.transform_reduce(t, x, o, 4, "add", None, 0), TypeError,
     'argument "transform_op": expected a function of one tile'),
    (lambda x, o, t: R.sum(np.zeros(4, np.uint8)[::2], x, o, 4), ValueError,
     'argument "temp_storage": expected a writable C-contiguous array'),
])
@pytest.mark.parametrize("query", [True, False])
def test_argument_errors_name_argument_and_write_nothing(call, exc, message, query):
    x = np.arange(10, dtype=np.float64)
    out = np.full(1, 42, np.float64)
    temp = None if query else np.zeros(4096, np.uint8)
    with pytest.raises(exc, match=message):
        call(x, out, temp)
    assert out[0] == 42


def test_lambda_operators_from_host_code():
    """A lambda written at the call (host code) is compiled into the kernel as a def
    would be: the same sums as "add"; two lambdas with the same parameters on one
    line are told apart by their source positions."""
    x = np.random.default_rng(5).integers(-1000, 1000, 5003).astype(np.int64)
    want = np.zeros(1, np.int64)
    run(R.sum, x, want, 5003)
    got = np.zeros(1, np.int64)
    run(R.reduce, x, got, 5003, lambda a, b: a + b, 0)
    assert got[0] == want[0] == x.sum()
    add, low = (lambda a, b: a + b), (lambda a, b: ct.minimum(a, b))
    run(R.reduce, x, got, 5003, low, 10**9)
    assert got[0] == x.min()
    run(R.reduce, x, got, 5003, add, 7)
    assert got[0] == x.sum() + 7


def test_lambda_without_source_is_a_clear_error():
    op = eval("lambda a, b: a + b")
    x = np.ones(10, np.float64)
    with pytest.raises(ct.TileSyntaxError, match="lambda"):
        run(R.reduce, x, np.zeros(1), 10, op, 0.0)


def test_equal_functions_share_one_object_and_its_kernels():
    """A lambda written at a call in a loop is a new object each time: equal ones
    (same code, closure values, globals) map to the first, so the plan and kernels
    are found again; a different closure value is a different function, with its
    own result."""
    from tilecore.algorithms.operators import same_function
    fresh = [lambda a, b: a + b for _ in range(3)]
    assert fresh[0] is not fresh[1] and same_function(fresh[1]) is same_function(fresh[0])
    assert same_function("add") == "add" and same_function(None) is None

    def scaled(k):
        return lambda a, b: a + b * k
    assert same_function(scaled(2)) is same_function(scaled(2))
    assert same_function(scaled(2)) is not same_function(scaled(3))
    unhashable = [1]
    f = lambda a, b: a + b + 0 * len(unhashable)   # noqa: E731  (closes over a list: kept as is)
    assert same_function(f) is f
    x = np.arange(1, 101, dtype=np.int64)
    got = np.zeros(1, np.int64)
    for k in (2, 3, 2):
        run(R.reduce, x, got, 100, lambda a, b: ct.maximum(a, b) * k // k, 0)
        assert got[0] == 100
    run(R.transform_reduce, x, got, 100, "add", scaled_by(3), 0)
    assert got[0] == 3 * x.sum()


def scaled_by(k):
    return lambda v: v * k
