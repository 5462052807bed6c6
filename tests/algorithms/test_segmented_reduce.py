"""DeviceSegmentedReduce on the interpreter against NumPy (float64 references
for float sums, exact for integers): every entry point, both kernels (rows:
several segments per block; long: aligned tiles, one or several blocks per
segment), dtypes, empty/one-item/long/uneven/overlapping/unordered segments,
int32 and int64 offsets (int64 ones clamped into int32 arrays before a rows
kernel, or not; the long kernel's int32 and int64 bounds: the same bits), NaN
and ties, the two-phase protocol and argument errors. Small policies (a 64-item
rows tile, 32-item long tiles) make the interpreter run many blocks on small
inputs; every launch is also compiled for sm_80 and sm_90 (the suite's conftest)."""
import operator

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
import tilecore.algorithms as A
from tilecore.algorithms import DeviceSegmentedReduce as S
from tilecore.dispatch import override_policy
from tilecore.dispatch.hub import policy_fields
from tilecore.dispatch.segmented_policy import choose_shape, select_segmented_policy

RNG = np.random.default_rng(4321)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
_BASE = dict(block_threads=32, rows_items_per_thread=2, min_row_items=4, long_block_threads=32,
             long_items_per_thread=1, rows_waves=1)
POLICIES = {
    "rows": dict(_BASE, long_min_avg_items=1 << 30, split_min_blocks_per_sm=0),
    "long": dict(_BASE, long_min_avg_items=1, split_min_blocks_per_sm=0),
    "split": dict(_BASE, long_min_avg_items=1, split_min_blocks_per_sm=64),
}


def policy(name):
    return override_policy("segmented_reduce", **POLICIES[name])


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
    return RNG.uniform(lo, hi, n).astype(dt)


def offsets(lengths, dtype=np.int64):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(dtype)


# Segment lengths: empty, one item, shorter and longer than the small tiles, uneven.
UNEVEN = [0, 1, 5, 0, 31, 32, 33, 64, 65, 200, 0, 3, 130, 1, 97]


def force_wide(monkeypatch):
    """Make every kernel take its int64 bounds (the path of 2**30 items or
    segments and more) on small data, with fresh plans: a plan keeps the
    launches of each (segment count, d_in length), their NARROW flag included."""
    from tilecore.algorithms import segmented_reduce as SR
    monkeypatch.setattr(SR, "_NARROW_LIMIT", 0)
    monkeypatch.setattr(SR, "_plans", {})
    monkeypatch.setattr(SR, "_sigs", {})


def ref_fold(x, begins, ends, fold, empty):
    return [fold(x[b:e]) if e > b else empty for b, e in zip(begins, ends)]


def assert_sums(out, x, begins, ends, out_dtype):
    eps = float(ml_dtypes.finfo(np.float32 if np.dtype(out_dtype).itemsize <= 4
                                else np.float64).eps)
    for s, (b, e) in enumerate(zip(begins, ends)):
        seg = x[b:e].astype(np.float64) if e > b else np.zeros(0)
        bound = (np.log2(max(seg.size, 2)) + 4) * eps * np.abs(seg).sum() + \
            float(ml_dtypes.finfo(out_dtype).eps) * np.abs(seg).sum()
        assert abs(float(out[s]) - seg.sum()) <= bound, (s, b, e, out[s], seg.sum())


# --- sum --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", list(POLICIES))
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_sum_uneven_segments_as_views_of_one_offsets_array(kernel, odt):
    off = offsets(UNEVEN, odt)
    x = data(np.float32, int(off[-1]))
    out = np.full(len(UNEVEN) + 2, 7, np.float32)
    with policy(kernel):
        run(S.sum, x, out, len(UNEVEN), off[:-1], off[1:])
    assert_sums(out, x, off[:-1], off[1:], np.float32)
    assert (out[len(UNEVEN):] == 7).all()                      # nothing past num_segments


@pytest.mark.parametrize("kernel", list(POLICIES))
def test_sum_overlapping_unordered_and_inverted_segments(kernel):
    x = data(np.float64, 1000)
    begins = RNG.integers(0, 1000, 40)
    ends = np.minimum(begins + RNG.integers(-20, 400, 40), 1000)   # some end before begin
    begins[5], ends[5] = 0, 1000                                    # the whole input
    out = np.zeros(40, np.float64)
    with policy(kernel):
        run(S.sum, x, out, 40, begins.astype(np.int64), ends.astype(np.int32))   # mixed dtypes
    ref = [x[b:e].sum() if e > b else 0.0 for b, e in zip(begins, ends)]
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-9)


def test_sum_zero_segments_writes_nothing_and_needs_one_byte():
    out = np.full(3, 5, np.float32)
    empty = np.zeros(0, np.int32)
    assert run(S.sum, np.zeros(0, np.float32), out, 0, empty, empty) == 1
    assert (out == 5).all()


def test_sum_all_empty_segments_and_one_item():
    x = data(np.int32, 10)
    out = np.full(4, 9, np.int32)
    b = np.array([3, 7, 9, 0], np.int32)
    e = np.array([3, 8, 9, 0], np.int32)
    run(S.sum, x, out, 4, b, e)
    assert out.tolist() == [0, x[7], 0, 0]


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_sum_every_dtype_with_cub_accumulator(dtype):
    off = offsets(UNEVEN)
    x = data(dtype, int(off[-1]), -2**62, 2**62) if np.dtype(dtype).kind in "iu" else \
        data(dtype, int(off[-1]), -4, 4)
    out = np.zeros(len(UNEVEN), dtype)
    with policy("rows"):
        run(S.sum, x, out, len(UNEVEN), off[:-1], off[1:])
    if np.dtype(dtype).kind in "iu":
        acc = np.int32 if np.dtype(dtype).itemsize < 4 else dtype   # C++ promotion
        with np.errstate(over="ignore"):
            ref = [x[b:e].sum(dtype=acc).astype(dtype) for b, e in zip(off[:-1], off[1:])]
        assert out.tolist() == np.array(ref, dtype).tolist()
    else:
        assert_sums(out, x, off[:-1], off[1:], dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float16, ml_dtypes.bfloat16,
                                   np.float64])
def test_sum_long_kernel_dtypes(dtype):
    off = offsets([300, 0, 41, 1000, 7])
    x = data(dtype, int(off[-1]), -4, 4)
    out = np.zeros(5, np.int64 if np.dtype(dtype).kind in "iu" else dtype)
    for kernel in ("long", "split"):
        with policy(kernel):
            run(S.sum, x, out, 5, off[:-1], off[1:])
        if np.dtype(dtype).kind in "iu":
            assert out.tolist() == [int(x[b:e].astype(np.int64).sum())
                                    for b, e in zip(off[:-1], off[1:])]
        else:
            assert_sums(out, x, off[:-1], off[1:], dtype)


def test_sum_narrow_floats_accumulate_in_float32():
    x = np.ones(5000, np.float16)          # a float16 accumulator would stop at 2048
    off = np.array([0, 5000], np.int32)
    out = np.zeros(1, np.float16)
    for kernel in ("rows", "long"):
        with policy(kernel):
            run(S.sum, x, out, 1, off[:-1], off[1:])
        assert out[0] == np.float16(5000)


def test_default_policy_short_and_long_segments():
    """The shipped policy: 100 segments of ~128 items (rows, 8 x 128 tile), and
    3 segments of 40000 items (long kernel, 8192-item tiles, split over 2
    blocks each on the interpreter's 2-SM stand-in)."""
    lens = RNG.integers(100, 156, 100)
    off = offsets(lens, np.int32)
    x = data(np.float32, int(off[-1]), -1, 1)
    out = np.zeros(100, np.float32)
    assert run(S.sum, x, out, 100, off[:-1], off[1:]) == 1
    assert_sums(out, x, off[:-1], off[1:], np.float32)
    p = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                     "offset_size": 4})
    assert choose_shape(p, 3, 120000, 2, True) == ("long", 1, 8192, 2, 1)
    off = offsets([40000, 40000, 40000])
    x = data(np.float32, 120000, -1, 1)
    out = np.zeros(3, np.float32)
    assert run(S.sum, x, out, 3, off[:-1], off[1:]) > 1        # partials in temp storage
    assert_sums(out, x, off[:-1], off[1:], np.float32)


def test_deterministic_bits():
    off = offsets(UNEVEN * 3)
    x = data(np.float32, int(off[-1]), -1e6, 1e6)
    for kernel in POLICIES:
        a, b = np.zeros(45, np.float32), np.zeros(45, np.float32)
        with policy(kernel):
            run(S.sum, x, a, 45, off[:-1], off[1:])
            run(S.sum, x, b, 45, off[:-1], off[1:])
        assert a.tobytes() == b.tobytes()


# --- min / max --------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["rows", "long"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float16, np.float32])
def test_min_max_with_cub_empty_values(kernel, dtype):
    off = offsets(UNEVEN)
    x = data(dtype, int(off[-1]))
    lo, hi = np.zeros(len(UNEVEN), dtype), np.zeros(len(UNEVEN), dtype)
    with policy(kernel):
        run(S.min, x, lo, len(UNEVEN), off[:-1], off[1:])
        run(S.max, x, hi, len(UNEVEN), off[:-1], off[1:])
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else ml_dtypes.finfo(dtype)
    assert lo.tolist() == ref_fold(x, off[:-1], off[1:], np.min, info.max)
    assert hi.tolist() == ref_fold(x, off[:-1], off[1:], np.max, info.min)


@pytest.mark.parametrize("kernel", ["rows", "long"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_min_max_ignore_nan_as_cub(kernel, dtype):
    """bfloat16 compares in float32 (operators.work_dtype): the same results."""
    off = offsets([50, 40, 0, 70])
    x = data(dtype, 160)
    x[[0, 7, 49]] = np.nan
    x[50:90] = np.nan                                         # an all-NaN segment
    lo, hi = np.zeros(4, dtype), np.zeros(4, dtype)
    with policy(kernel):
        run(S.min, x, lo, 4, off[:-1], off[1:])
        run(S.max, x, hi, 4, off[:-1], off[1:])
    fmax = ml_dtypes.finfo(dtype).max
    with np.errstate(invalid="ignore"):                       # bfloat16's NaN compares
        assert lo.tolist() == [np.nanmin(x[:50]), fmax, fmax, np.nanmin(x[90:])]
        assert hi.tolist() == [np.nanmax(x[:50]), -fmax, -fmax, np.nanmax(x[90:])]


# --- arg_min / arg_max ------------------------------------------------------------------------
@pytest.mark.parametrize("wide", [False, True], ids=["int32_positions", "int64_positions"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.float16, ml_dtypes.bfloat16,
                                   np.float64])
def test_arg_min_max_ties_go_to_the_first(monkeypatch, dtype, wide):
    """Ties go to the smallest offset, empty segments get (identity, 1), on the
    rows kernel's int32 positions (NARROW) and its int64 ones (forced)."""
    if wide:
        force_wide(monkeypatch)
    off = offsets(UNEVEN, np.int32)
    x = data(dtype, int(off[-1]), -5, 5)                       # many ties
    n = len(UNEVEN)
    v, i = np.zeros(n, dtype), np.zeros(n, np.int64)
    with policy("rows"):
        run(S.arg_min, x, v, i, n, off[:-1], off[1:])
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else ml_dtypes.finfo(dtype)
    assert v.tolist() == ref_fold(x, off[:-1], off[1:], np.min, info.max)
    assert i.tolist() == ref_fold(x, off[:-1], off[1:], np.argmin, 1)   # CUB: index 1 if empty
    i32 = np.zeros(n, np.int32)
    with policy("rows"):
        run(S.arg_max, x, v, i32, n, off[:-1], off[1:])
    assert v.tolist() == ref_fold(x, off[:-1], off[1:], np.max, info.min)
    assert i32.tolist() == ref_fold(x, off[:-1], off[1:], np.argmax, 1)


def test_arg_nan_and_default_policy():
    off = offsets([300, 5, 0, 2000])
    x = data(np.float32, 2305)
    x[[3, 100]] = np.nan
    x[300:305] = np.nan                                        # all NaN: the first
    x[1000] = x[1500] = -1000.0                                # a tie far apart
    v, i = np.zeros(4, np.float32), np.zeros(4, np.int64)
    run(S.arg_min, x, v, i, 4, off[:-1], off[1:])
    assert i.tolist() == [int(np.nanargmin(x[:300])), 0, 1, 1000 - 305]
    assert v[0] == np.nanmin(x[:300]) and np.isnan(v[1]) and v[3] == -1000.0
    assert v[2] == np.finfo(np.float32).max
    run(S.arg_max, x, v, i, 4, off[:-1], off[1:])
    assert i.tolist() == [int(np.nanargmax(x[:300])), 0, 1, int(np.nanargmax(x[305:]))]


# --- reduce -----------------------------------------------------------------------------------
def user_max(a, b):
    return ct.maximum(a, b)


def user_add(a, b):
    return a + b


@pytest.mark.parametrize("kernel", ["rows", "long"])
def test_reduce_user_and_known_ops(kernel):
    off = offsets(UNEVEN)
    x = data(np.int32, int(off[-1]), -10**6, 10**6)
    n = len(UNEVEN)
    out = np.zeros(n, np.int32)
    for op in (user_max, "max", max, ct.maximum):
        with policy(kernel):
            run(S.reduce, x, out, n, off[:-1], off[1:], op, np.int32(-5))
        assert out.tolist() == [max([-5, *x[b:e].tolist()]) for b, e in zip(off[:-1], off[1:])]
    for op in (user_add, operator.add):
        with policy(kernel):
            run(S.reduce, x, out, n, off[:-1], off[1:], op, 5)        # init once per segment
        assert out.tolist() == [5 + int(x[b:e].astype(np.int64).sum())
                                for b, e in zip(off[:-1], off[1:])]


@pytest.mark.parametrize("op, ref", [("mul", np.multiply), ("and", np.bitwise_and),
                                     ("xor", np.bitwise_xor), ("min", np.minimum)])
def test_reduce_known_ops_exact(op, ref):
    off = offsets(UNEVEN)
    x = data(np.uint32, int(off[-1]), 0, 2**32 - 1)
    out = np.zeros(len(UNEVEN), np.uint32)
    init = np.uint32(0xFFFFFFFF if op in ("and", "min") else 1 if op == "mul" else 0)
    for kernel in ("rows", "long"):
        with policy(kernel):
            run(S.reduce, x, out, len(UNEVEN), off[:-1], off[1:], op, init)
        with np.errstate(over="ignore"):
            assert out.tolist() == [ref.reduce(np.concatenate([[init], x[b:e]]).astype(np.uint32),
                                               dtype=np.uint32)
                                    for b, e in zip(off[:-1], off[1:])]


def test_reduce_accumulator_is_inits_dtype_and_user_float():
    off = offsets([1000, 0, 3])
    x = np.full(1003, 200, np.uint8)
    out = np.zeros(3, np.int64)
    with policy("rows"):
        run(S.reduce, x, out, 3, off[:-1], off[1:], "add", np.int64(0))
    assert out.tolist() == [200_000, 0, 600]
    with policy("rows"):
        run(S.reduce, x, out, 3, off[:-1], off[1:], "add", np.uint8(1))   # wraps in uint8
    assert out.tolist() == [200_001 % 256, 1, 601 % 256]
    f = data(np.float32, 1003, -1, 1)
    o64 = np.zeros(3, np.float64)
    with policy("rows"):
        run(S.reduce, f, o64, 3, off[:-1], off[1:], user_add, np.float64(0.25))
    np.testing.assert_allclose(o64, [0.25 + f[:1000].astype(np.float64).sum(), 0.25,
                                     0.25 + f[1000:].astype(np.float64).sum()], atol=1e-9)


# --- convenience ------------------------------------------------------------------------------
def test_segmented_sum_convenience():
    x = data(np.int16, 600).reshape(20, 30)
    off = np.array([0, 30, 30, 599, 600], np.int32)
    got = A.segmented_sum(x, off)
    assert got.dtype == np.int64 and got.shape == (4,)
    flat = x.reshape(-1).astype(np.int64)
    assert got.tolist() == [flat[:30].sum(), 0, flat[30:599].sum(), flat[599]]
    f = data(np.float32, 100)
    assert A.segmented_sum(f, np.array([0], np.int64)).shape == (0,)
    with pytest.raises(ValueError, match='"offsets": expected a 1-d array of at least 1'):
        A.segmented_sum(f, np.zeros(0, np.int64))


@pytest.mark.parametrize("call", [lambda x: A.sum(x), lambda x: A.argmax(x),
                                  lambda x: A.cumsum(x),
                                  lambda x: A.segmented_sum(x, np.array([0, 5]))],
                         ids=["sum", "argmax", "cumsum", "segmented_sum"])
def test_convenience_errors_name_x(call):
    """The convenience layer's own argument is x, not the two-phase API's d_in."""
    with pytest.raises(TypeError, match='"x": dtype bool_ is not supported'):
        call(np.ones(5, bool))


# --- the two-phase protocol and errors --------------------------------------------------------
def test_size_query_launches_nothing(monkeypatch):
    def no_launch(*a):
        raise AssertionError("launched during a size query")
    monkeypatch.setattr(ct, "launch", no_launch)
    off = offsets([40000, 40000, 40000])
    x = data(np.float32, 120000)
    out = np.full(3, 3, np.float32)
    v, i = np.zeros(3, np.float32), np.zeros(3, np.int64)
    sizes = [S.sum(None, x, out, 3, off[:-1], off[1:]), S.min(None, x, out, 3, off, off),
             S.arg_max(None, x, v, i, 3, off[:-1], off[1:]),
             S.reduce(None, x, out, 3, off[:-1], off[1:], user_add, 0)]
    assert all(isinstance(s, int) and s >= 1 for s in sizes)
    # sum (long, split): its partials; arg_max (rows): each row clamps its int64 bounds itself
    assert sizes[0] > 1 and sizes[2] == 1
    with override_policy("segmented_reduce", convert_offsets=1):     # 4 int64 offsets as int32
        assert S.arg_max(None, x, v, i, 3, off[:-1], off[1:]) == 256
    assert (out == 3).all()


def test_too_small_temp_storage_names_sizes_and_writes_nothing():
    off = offsets([40000, 40000, 40000])
    x = data(np.float32, 120000)
    out = np.full(3, 3, np.float32)
    nbytes = S.sum(None, x, out, 3, off[:-1], off[1:])
    with pytest.raises(ValueError, match=rf'"temp_storage".*expected at least {nbytes} bytes, '
                                         rf"got {nbytes - 1} bytes"):
        S.sum(np.zeros(nbytes - 1, np.uint8), x, out, 3, off[:-1], off[1:])
    assert (out == 3).all()


OFF = np.array([0, 4, 10], np.int64)


@pytest.mark.parametrize("call, exc, message", [
    (lambda x, o, t: S.sum(t, None, o, 2, OFF[:-1], OFF[1:]), TypeError,
     'argument "d_in": expected an array'),
    (lambda x, o, t: S.sum(t, x, o, 2, OFF[:-1].tolist(), OFF[1:]), TypeError,
     'argument "d_begin_offsets": expected an array'),
    (lambda x, o, t: S.sum(t, x, o, 2, OFF[:-1].astype(np.float64), OFF[1:]), TypeError,
     'argument "d_begin_offsets": expected int32 or int64 offsets, got float64'),
    (lambda x, o, t: S.sum(t, x, o, 2, OFF[:-1], OFF[1:].astype(np.uint16)), TypeError,
     'argument "d_end_offsets": expected int32 or int64 offsets, got uint16'),
    (lambda x, o, t: S.sum(t, x, o, 3, OFF[:-1], OFF), ValueError,
     'argument "d_begin_offsets": expected at least 3 elements \\(one offset per segment\\), '
     'got 2'),
    (lambda x, o, t: S.sum(t, x, o, 3, OFF, OFF[1:]), ValueError,
     'argument "d_end_offsets": expected at least 3 elements'),
    (lambda x, o, t: S.sum(t, x, o[:1], 2, OFF[:-1], OFF[1:]), ValueError,
     'argument "d_out": expected at least 2 elements \\(one per segment\\), got 1'),
    (lambda x, o, t: S.sum(t, x, o, -1, OFF[:-1], OFF[1:]), ValueError,
     'argument "num_segments": expected a count >= 0, got -1'),
    (lambda x, o, t: S.sum(t, x, o, 2.0, OFF[:-1], OFF[1:]), TypeError,
     'argument "num_segments": expected an int, got float'),
    (lambda x, o, t: S.sum(t, x, o, 2**31, OFF[:-1], OFF[1:]), ValueError,
     'argument "num_segments": at most 2\\*\\*31 - 1 segments'),
    (lambda x, o, t: S.sum(t, x.reshape(2, 5), o, 2, OFF[:-1], OFF[1:]), ValueError,
     'argument "d_in": expected a 1-d array, got 2 dimensions'),
    (lambda x, o, t: S.sum(t, x.astype(bool), o, 2, OFF[:-1], OFF[1:]), TypeError,
     'argument "d_in": dtype bool_ is not supported'),
    (lambda x, o, t: S.arg_min(t, x, o, o, 2, OFF[:-1], OFF[1:]), TypeError,
     'argument "d_out_index": expected a 32- or 64-bit integer dtype'),
    (lambda x, o, t: S.arg_min(t, x, o, np.zeros(2, np.int16), 2, OFF[:-1], OFF[1:]), TypeError,
     'argument "d_out_index": expected a 32- or 64-bit integer dtype .*got int16'),
    (lambda x, o, t: S.reduce(t, x, o, 2, OFF[:-1], OFF[1:], "nand", 0), TypeError,
     'argument "op": expected one of'),
    (lambda x, o, t: S.reduce(t, x, o, 2, OFF[:-1], OFF[1:], "xor", 0.0), TypeError,
     'argument "init": operator "xor" needs an integer dtype, got float64'),
])
@pytest.mark.parametrize("query", [True, False])
def test_argument_errors_name_argument_and_write_nothing(call, exc, message, query):
    x = np.arange(10, dtype=np.float64)
    out = np.full(2, 42, np.float64)
    temp = None if query else np.zeros(4096, np.uint8)
    with pytest.raises(exc, match=message):
        call(x, out, temp)
    assert (out == 42).all()


def test_policy_shapes_from_average_length():
    p = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                     "offset_size": 8})
    assert (p.block_threads, p.long_block_threads) == (64, 256)     # rows: 64 x 8 (H200)
    assert choose_shape(p, 1 << 20, 1 << 27, 132, True) == ("rows", 4, 128, 1, 1)
    # U(1..4096): the rows kernel, a segment a block in 512-item steps (4-byte values run
    # rows up to an average of 16384 items on sm_90), past that the long kernel with a tile
    # fitted to the average length
    assert p.long_min_avg_items == 16384
    assert choose_shape(p, 1 << 18, (1 << 29) + 1000, 132, True) == ("rows", 1, 512, 1, 1)
    assert choose_shape(p, 1 << 18, 1 << 29, 132, False) == ("rows", 1, 512, 1, 1)
    assert choose_shape(p, 1 << 20, (1 << 28) - 1, 132, True) == ("rows", 2, 256, 1, 1)  # 255
    assert choose_shape(p, 1 << 14, (1 << 28) - 1, 132, True) == ("rows", 1, 512, 1, 1)
    assert choose_shape(p, 1 << 14, 1 << 28, 132, True) == ("long", 1, 8192, 1, 1)   # 16384
    assert choose_shape(p, 1024, 1 << 27, 132, True) == ("long", 1, 8192, 1, 1)
    with override_policy("segmented_reduce", long_min_avg_items=1024):
        q = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                         "offset_size": 8})
    assert choose_shape(q, 1 << 18, (1 << 29) + 1000, 132, True) == ("long", 1, 2048, 1, 1)
    # the same threshold and 64-thread rows blocks for 1-, 2- and 8-byte values (measured on
    # the H200); the tuner's float64 row for int32 offsets keeps its threshold
    for size, accum, offset_size, threshold, items in (
            (1, "int64", 8, 16384, 8), (8, "float64", 8, 16384, 8), (8, "int64", 4, 16384, 8),
            (2, "float32", 8, 16384, 8), (8, "float64", 4, 8192, 8)):
        got = select_segmented_policy(90, {"value_size": size, "op": "add", "accum": accum,
                                           "offset_size": offset_size})
        assert got.long_min_avg_items == threshold, (size, accum, offset_size)
        assert (got.block_threads, got.rows_items_per_thread) == (64, items), size
        # 1- and 2-byte values: 64 x 4 rows where a block holds one segment
        assert got.one_row_items_per_thread == (4 if size <= 2 else 64), size
    # arg_min / arg_max on 4-byte values: 128 x 8 rows (H200), eight 128-item segments a block
    a = select_segmented_policy(90, {"value_size": 4, "op": "arg", "accum": "float32",
                                     "offset_size": 8})
    assert choose_shape(a, 1 << 20, 1 << 27, 132, False) == ("rows", 8, 128, 1, 1)
    assert choose_shape(p, 1024, 1 << 27, 132, False)[0] == "rows"    # user/arg: rows only
    assert choose_shape(p, 16, 1 << 27, 132, True) == ("long", 1, 8192, 64, 1)
    assert choose_shape(p, 0, 0, 132, True) == ("rows", 16, 32, 1, 1)


def test_one_row_blocks_step_in_their_own_width():
    """one_row_items_per_thread narrows only a block that holds one segment: its row
    steps through the segment block_threads * that many items at a time (at least
    min_row_items); blocks of several segments keep the rows tile."""
    key = {"value_size": 2, "op": "add", "accum": "float32", "offset_size": 8}
    shaped = dict(block_threads=64, rows_items_per_thread=8, min_row_items=32,
                  long_min_avg_items=16384)
    with override_policy("segmented_reduce", **shaped, one_row_items_per_thread=4):
        p = select_segmented_policy(90, key)
    assert choose_shape(p, 1 << 20, 1 << 27, 132, True) == ("rows", 4, 128, 1, 1)  # 4 x 128
    assert choose_shape(p, 1 << 20, 1 << 29, 132, True) == ("rows", 1, 256, 1, 1)  # avg 512
    assert choose_shape(p, 1 << 18, 1 << 29, 132, False) == ("rows", 1, 256, 1, 1)
    with override_policy("segmented_reduce", **shaped, one_row_items_per_thread=64):
        assert choose_shape(select_segmented_policy(90, key), 1 << 18, 1 << 29, 132,
                            True) == ("rows", 1, 512, 1, 1)               # the rows tile
    with override_policy("segmented_reduce", **shaped, one_row_items_per_thread=1):
        assert choose_shape(select_segmented_policy(90, key), 1 << 18, 1 << 29, 132,
                            True) == ("rows", 1, 64, 1, 1)
    with override_policy("segmented_reduce", **dict(shaped, min_row_items=128),
                         one_row_items_per_thread=1):
        assert choose_shape(select_segmented_policy(90, key), 1 << 18, 1 << 29, 132,
                            True) == ("rows", 1, 128, 1, 1)               # min_row_items


@pytest.mark.parametrize("method", ["sum", "max", "arg_max", "user"])
def test_one_row_blocks_narrower_than_the_tile(method):
    """Segments longer than the rows tile (a segment a block) stepped through in
    rows narrower than the tile: the same results as NumPy."""
    lens = [0, 1, 300, 513, 64, 1000, 129, 7]
    off = offsets(lens)
    x = data(np.float32, int(off[-1]))
    n = len(lens)
    over = dict(POLICIES["rows"], rows_items_per_thread=8, one_row_items_per_thread=2)
    out = np.zeros(n, np.float32)
    with override_policy("segmented_reduce", **over):
        assert choose_shape(select_segmented_policy(90, {"value_size": 4, "op": "add",
                                                         "accum": "float32",
                                                         "offset_size": 8}),
                            n, x.size, 132, True) == ("rows", 1, 64, 1, 1)
        if method == "arg_max":
            i = np.zeros(n, np.int64)
            run(S.arg_max, x, out, i, n, off[:-1], off[1:])
            assert i.tolist() == ref_fold(x, off[:-1], off[1:], np.argmax, 1)
        elif method == "user":
            run(S.reduce, x, out, n, off[:-1], off[1:], user_max, np.float32(-np.inf))
            assert out.tolist() == ref_fold(x, off[:-1], off[1:], np.max, -np.inf)
        elif method == "max":
            run(S.max, x, out, n, off[:-1], off[1:])
            fmax = float(np.finfo(np.float32).max)
            assert out.tolist() == ref_fold(x, off[:-1], off[1:], np.max, -fmax)
        else:
            run(S.sum, x, out, n, off[:-1], off[1:])
            assert_sums(out, x, off[:-1], off[1:], np.float32)


def test_policy_rows_waves_keep_the_grid_full():
    p = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                     "offset_size": 8})
    with override_policy("segmented_reduce", rows_waves=8):
        w = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                         "offset_size": 8})
    assert p.rows_waves == 1 and w.rows_waves == 8
    assert choose_shape(w, 1 << 20, 1 << 27, 132, True) == ("rows", 4, 128, 1, 8)
    # 8 waves would leave fewer than 8 blocks per SM: 4 (2^15 / 16 = 2048 >= 132 * 8)
    assert choose_shape(w, 1 << 15, 1 << 22, 132, True) == ("rows", 4, 128, 1, 4)
    assert choose_shape(w, 1000, 128000, 132, True) == ("rows", 4, 128, 1, 1)
    assert choose_shape(w, 1 << 20, 1 << 27, 132, False) == ("rows", 4, 128, 1, 1)  # user/arg
    p32 = select_segmented_policy(90, {"value_size": 4, "op": "add", "accum": "float32",
                                       "offset_size": 4})
    # one policy for int32 and int64 offsets (the sm_90 table's int32 row, measured, is
    # another source of the same fields)
    assert policy_fields(p32) == policy_fields(p)


# --- the rows kernels' new paths: row-group waves, 64-bit bounds ------------------------------
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_rows_waves_many_short_segments(odt):
    """600 short segments (some empty) with 4 row groups per block: 19 blocks of
    4 x 8 segments, the last block partly past num_segments; min, max and
    reduce with init take the same path."""
    lens = RNG.integers(0, 13, 600)
    lens[[0, 31, 32, 599]] = 0
    off = offsets(lens, odt)
    x = data(np.float32, int(off[-1]), -1, 1)
    out = np.full(602, 7, np.float32)
    with override_policy("segmented_reduce", **dict(POLICIES["rows"], rows_waves=4)):
        p = select_segmented_policy(90, {"value_size": 4})
        assert choose_shape(p, 600, x.size, 2, True) == ("rows", 8, 8, 1, 4)
        run(S.sum, x, out, 600, off[:-1], off[1:])
        assert_sums(out, x, off[:-1], off[1:], np.float32)
        assert (out[600:] == 7).all()
        lo = np.zeros(600, np.float32)
        run(S.min, x, lo, 600, off[:-1], off[1:])
        fmax = np.finfo(np.float32).max
        assert lo.tolist() == ref_fold(x, off[:-1], off[1:], np.min, fmax)
        i32 = data(np.int32, x.size, -1000, 1000)
        o32 = np.zeros(600, np.int32)
        run(S.reduce, i32, o32, 600, off[:-1], off[1:], "max", np.int32(-5))
        assert o32.tolist() == [max([-5, *i32[b:e].tolist()]) for b, e in zip(off[:-1], off[1:])]


@pytest.mark.parametrize("kernel", ["rows", "long"])
def test_wide_rows_kernels_with_64_bit_bounds(kernel, monkeypatch):
    """The kernels' int64 path (taken for d_in or segment counts of 2**30 and
    more) on small data: every rows kernel, overlapping and inverted segments."""
    force_wide(monkeypatch)
    x = data(np.float64, 1000)
    begins = RNG.integers(0, 1000, 40)
    ends = np.minimum(begins + RNG.integers(-20, 400, 40), 1000)
    n = 40
    out = np.zeros(n, np.float64)
    with policy(kernel):
        run(S.sum, x, out, n, begins.astype(np.int64), ends.astype(np.int32))
    ref = [x[b:e].sum() if e > b else 0.0 for b, e in zip(begins, ends)]
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-9)
    with policy(kernel), override_policy("segmented_reduce", rows_waves=2):
        run(S.reduce, x, out, n, begins, ends, user_add, np.float64(0.5))
    np.testing.assert_allclose(out, [0.5 + r for r in ref], rtol=1e-12, atol=1e-9)
    v, i = np.zeros(n, np.float64), np.zeros(n, np.int64)
    with policy(kernel):
        run(S.arg_max, x, v, i, n, begins, ends)
    assert i.tolist() == [int(np.argmax(x[b:e])) if e > b else 1 for b, e in zip(begins, ends)]


# --- int64 offsets clamped into int32 arrays before a rows kernel (convert_offsets) -----------
REAL_LAUNCH = ct.launch


def launched(monkeypatch, method, *args):
    """The two-phase call (as `run`), returning the names of the kernels it launched
    and their grids."""
    calls = []

    def record(stream, grid, kernel, kargs):
        calls.append((kernel.__name__, grid))
        return REAL_LAUNCH(stream, grid, kernel, kargs)
    monkeypatch.setattr(ct, "launch", record)
    run(method, *args)
    monkeypatch.setattr(ct, "launch", REAL_LAUNCH)
    return calls


def wild_offsets(layout, n, size):
    """int64 (begins, ends) of n segments over `size` items, some out of range
    (negative, past size, past 2**31 and 2**32; some whose low 32 bits are an
    offset in range, so a wrapping conversion would show), some empty or
    inverted: views of one offsets array ("shifted") or two separate arrays.
    The first segment is in range (shifted) or the whole input (separate)."""
    if layout == "shifted":
        off = offsets(RNG.integers(0, 9, n), np.int64)
        off[2::5] = np.resize([-7, 2**31 + 5, size + 50, 2**32 + 9, -2**32 + 99, 2**40],
                              off[2::5].size)
        return off[:-1], off[1:]
    begins = RNG.integers(-20, size + 20, n)
    ends = begins + RNG.integers(-5, 30, n)
    for s, (b, e) in enumerate([(-2**32 + 3, 2**33), (2**31 + 3, 2**31 + 9), (5, -1), (-9, 5),
                                (-2**40, 2**32 + 40)]):
        if s * 7 < n:
            begins[s * 7], ends[s * 7] = b, e
    return begins.astype(np.int64), ends.astype(np.int64)


def clamped(x, begins, ends):
    """The segments' bounds as the kernels read them: clamped to [0, len(x)]."""
    return np.clip(begins, 0, x.size), np.clip(ends, 0, x.size)


@pytest.mark.parametrize("layout", ["shifted", "separate"])
@pytest.mark.parametrize("n", [1, 37, 300])
def test_int64_offsets_clamped_once_give_the_same_bits(monkeypatch, layout, n):
    """Every rows kernel (sum, min, max: rows_known; arg_max: rows_arg; a user
    operator: rows_user) with int64 offsets, converted first (convert_offsets=1),
    clamped once per row and broadcast (2) and by every element (0): the same
    bits, equal to NumPy on the clamped bounds. With 300 segments the shifted
    offsets take two clamp_offsets blocks (256-offset tiles)."""
    x = data(np.float32, 400)
    xi = data(np.int32, 400, -1000, 1000)
    begins, ends = wild_offsets(layout, n, x.size)
    b, e = clamped(x, begins, ends)
    got, kernels = {}, {}
    for convert in (0, 1, 2):
        out = {k: np.zeros(n, np.float32) for k in ("sum", "min", "max", "arg_max")}
        out["index"] = np.zeros(n, np.int64)
        out["user"] = np.zeros(n, np.int32)
        with policy("rows"), override_policy("segmented_reduce", convert_offsets=convert):
            calls = launched(monkeypatch, S.sum, x, out["sum"], n, begins, ends)
            for name in ("min", "max"):
                run(getattr(S, name), x, out[name], n, begins, ends)
            run(S.arg_max, x, out["arg_max"], out["index"], n, begins, ends)
            run(S.reduce, xi, out["user"], n, begins, ends, user_add, np.int32(3))
        got[convert], kernels[convert] = out, calls
    for k in got[0]:
        assert got[0][k].tobytes() == got[1][k].tobytes() == got[2][k].tobytes(), k
    out = got[1]
    assert_sums(out["sum"], x, b, e, np.float32)
    fmax = float(np.finfo(np.float32).max)
    assert out["min"].tolist() == ref_fold(x, b, e, np.min, fmax)
    assert out["max"].tolist() == ref_fold(x, b, e, np.max, -fmax)
    assert out["arg_max"].tolist() == ref_fold(x, b, e, np.max, -fmax)
    assert out["index"].tolist() == ref_fold(x, b, e, np.argmax, 1)
    assert out["user"].tolist() == [3 + int(xi[p:q].sum()) if q > p else 3 for p, q in zip(b, e)]
    # the sum's launches: the clamp once for shifted views (n + 1 offsets, 256 a
    # block), once per array otherwise (n each)
    count = n + 1 if layout == "shifted" else n
    clamps = [("clamp_offsets", (-(-count // 256),))] * (1 if layout == "shifted" else 2)
    assert kernels[0] == kernels[1][len(clamps):] == kernels[2]
    assert kernels[1][:len(clamps)] == clamps and kernels[0][0][0] == "rows_known"


def test_offsets_clamped_only_for_narrow_int64_rows_kernels(monkeypatch):
    """clamp_offsets runs before a rows kernel with int64 offsets on narrow inputs
    and convert_offsets=1 (once per int64 array unless they are shifted views);
    int32 offsets, the long kernels, wide inputs (2**30 items or segments, forced
    here) and convert_offsets 0 and 2 (the default) run as before, with 1 byte of
    temporary storage.
    Temporary storage: the int32 offsets, each array 256-byte aligned."""
    off = offsets(UNEVEN)
    n = len(UNEVEN)
    x = data(np.float64, int(off[-1]))
    out = np.zeros(n, np.float64)

    def kernels(begins, ends, kernel="rows", **over):
        over = {"convert_offsets": 1, **over}
        with policy(kernel), override_policy("segmented_reduce", **over):
            nbytes = S.sum(None, x, out, n, begins, ends)
            names = [k for k, _ in launched(monkeypatch, S.sum, x, out, n, begins, ends)]
        assert_sums(out, x, np.clip(begins, 0, x.size), np.clip(ends, 0, x.size), np.float64)
        return nbytes, names

    i32 = off.astype(np.int32)
    assert kernels(off[:-1], off[1:]) == (256, ["clamp_offsets", "rows_known"])   # 16 int32
    assert kernels(off[:-1].copy(), off[1:].copy()) == (512, ["clamp_offsets"] * 2 +
                                                        ["rows_known"])
    assert kernels(off[:-1], i32[1:]) == (256, ["clamp_offsets", "rows_known"])   # begins only
    assert kernels(i32[:-1], i32[1:]) == (1, ["rows_known"])
    assert kernels(off[:-1], off[1:], convert_offsets=0) == (1, ["rows_known"])
    assert kernels(off[:-1], off[1:], convert_offsets=2) == (1, ["rows_known"])
    assert kernels(off[:-1], off[1:], "long") == (1, ["long_known"])
    strided = np.zeros((n + 1, 2), np.int64)
    strided[:, 0] = off
    col = strided[:, 0]                                     # shifted views, a 16-byte stride
    assert kernels(col[:-1], col[1:]) == (256, ["clamp_offsets", "rows_known"])
    pairs = np.stack([off[:-1], off[1:]], 1)                # ends 8 bytes after the begins
    assert kernels(pairs[:, 0], pairs[:, 1]) == (512, ["clamp_offsets"] * 2 + ["rows_known"])
    assert kernels(off[1:], off[:-1]) == (512, ["clamp_offsets"] * 2 + ["rows_known"])
    rev = off[::-1]                                         # negative strides
    assert kernels(rev[1:], rev[:-1]) == (512, ["clamp_offsets"] * 2 + ["rows_known"])
    assert kernels(rev[:-1], rev[1:]) == (256, ["clamp_offsets", "rows_known"])  # all empty
    empty = np.zeros(0, np.int64)
    with policy("rows"):
        assert run(S.sum, x, out, 0, empty, empty) == 1                 # nothing to convert
    force_wide(monkeypatch)
    assert kernels(off[:-1], off[1:]) == (1, ["rows_known"])


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_int64_offset_kernels_compile_with_the_shipped_policy(monkeypatch, arch):
    """The kernels a float32 sum of 1000 segments of ~128 items with int64 offsets
    launches with the shipped policy for `arch` (the rows kernel clamping each
    row's bounds once) and with convert_offsets=1 (clamp_offsets, then the rows
    kernel on int32 bounds), for shifted views and for two arrays, compile under
    NVRTC without spilling. Launches are captured instead of run."""
    monkeypatch.setenv("TILECORE_ARCH", arch)              # the interpreter takes arch's policy
    off = offsets(RNG.integers(100, 157, 1000))
    x = np.zeros(int(off[-1]), np.float32)
    out = np.zeros(1000, np.float32)
    for begins, ends, clamps, over in ((off[:-1], off[1:], 0, {}),
                                       (off[:-1], off[1:], 1, {"convert_offsets": 1}),
                                       (off[:-1].copy(), off[1:].copy(), 2,
                                        {"convert_offsets": 1})):
        calls = []
        monkeypatch.setattr(ct, "launch", lambda s, g, kernel, a: calls.append((kernel, a)))
        with override_policy("segmented_reduce", **over):
            run(S.sum, x, out, 1000, begins, ends)
        assert [k.__name__ for k, _ in calls] == ["clamp_offsets"] * clamps + ["rows_known"]
        for kernel, args in calls:
            ck = ct.compile(kernel, args, arch=arch)
            assert ck.stack_bytes == 0, f"{kernel.__name__}: spills ({ck.stack_bytes} bytes)"


@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_rows_load_bounds_once_per_row(monkeypatch, odt):
    """convert_offsets 2: the rows kernels (sum, arg_max, a user operator) load
    each row's bounds once (ROWWISE) for int64 offsets, and for int32 offsets
    where a block holds one segment (rows of the whole tile); int32 offsets on
    rows of several segments are loaded by every element. Exact results either
    way (arg_max: the index within the segment, the first of ties)."""
    lens = {"one": RNG.integers(1, 4097, 40), "several": RNG.integers(0, 60, 300)}
    for name, ls in lens.items():
        off = offsets(ls, odt)
        n = ls.size
        x = data(np.int32, int(off[-1]), -50, 50)
        out, user = np.zeros(n, np.int32), np.zeros(n, np.int32)
        v, i = np.zeros(n, np.int32), np.zeros(n, np.int64)
        seen = []

        def record(stream, grid, kernel, kargs):
            seen.append((kernel.__name__, kargs[-1]))                 # ROWWISE
            if kernel.__name__ == "rows_known":
                seen.append(("SEGS", kargs[6]))
            return REAL_LAUNCH(stream, grid, kernel, kargs)
        monkeypatch.setattr(ct, "launch", record)
        with override_policy("segmented_reduce", **POLICIES["rows"]):
            run(S.sum, x, out, n, off[:-1], off[1:])
            run(S.arg_max, x, v, i, n, off[:-1], off[1:])
            run(S.reduce, x, user, n, off[:-1], off[1:], lambda a, b: a + b, np.int32(0))
        monkeypatch.setattr(ct, "launch", REAL_LAUNCH)
        one = name == "one"
        wide = odt == np.int64 or one
        segs = dict(seen)["SEGS"]
        assert seen == [("rows_known", wide), ("SEGS", segs), ("rows_arg", wide),
                        ("rows_user", wide)]
        assert (segs == 1) == one
        want = np.array([x[b:e].astype(np.int64).sum() for b, e in zip(off[:-1], off[1:])])
        np.testing.assert_array_equal(out, want.astype(np.int32))
        np.testing.assert_array_equal(user, want.astype(np.int32))
        nonempty = ls > 0
        starts = off[:-1][nonempty]
        np.testing.assert_array_equal(i[nonempty], [np.argmax(x[b:e]) for b, e in
                                                    zip(starts, off[1:][nonempty])])
        np.testing.assert_array_equal(v[nonempty], [x[b:e].max() for b, e in
                                                    zip(starts, off[1:][nonempty])])


# --- the long kernel's int32 bounds (NARROW) whatever the offsets' dtype ---------------------
def long_flags(monkeypatch, method, *args):
    """The two-phase call (as `run`), returning the NARROW flag of each long_known launch."""
    flags = []

    def record(stream, grid, kernel, kargs):
        if kernel.__name__ == "long_known":
            flags.append(kargs[-1])
        return REAL_LAUNCH(stream, grid, kernel, kargs)
    monkeypatch.setattr(ct, "launch", record)
    run(method, *args)
    monkeypatch.setattr(ct, "launch", REAL_LAUNCH)
    return flags


@pytest.mark.parametrize("kernel", ["long", "split"])
@pytest.mark.parametrize("layout", ["shifted", "separate"])
def test_long_kernel_int64_offsets_narrow_and_wide_give_the_same_bits(monkeypatch, kernel,
                                                                      layout):
    """The long kernel (a block per segment, and split over blocks) with int64
    offsets, some needing 64 bits (past 2**31, 2**32 and 2**40, negative: their
    low 32 bits alone would be in range), on its int32 path (NARROW: each block
    clamps its two bounds, then int32 math) and its int64 path (forced): the
    same bits as int32 offsets clamped on the host, equal to NumPy on the
    clamped bounds. Segments cross the 32-item tiles; some are empty or inverted."""
    x = data(np.float32, 400)
    n = 37
    begins, ends = wild_offsets(layout, n, x.size)
    b, e = clamped(x, begins, ends)

    def reduce_all(bb, ee, narrow):
        got = {}
        for name in ("sum", "min", "max"):
            got[name] = np.full(n + 1, 7, np.float32)
            with policy(kernel):
                assert long_flags(monkeypatch, getattr(S, name), x, got[name], n, bb, ee) \
                    == [narrow]
        return got
    narrow = reduce_all(begins, ends, True)
    host32 = reduce_all(b.astype(np.int32), e.astype(np.int32), True)
    force_wide(monkeypatch)
    wide = reduce_all(begins, ends, False)
    for k in narrow:
        assert narrow[k].tobytes() == host32[k].tobytes() == wide[k].tobytes(), k
        assert narrow[k][n] == 7                            # nothing past num_segments
    assert_sums(narrow["sum"], x, b, e, np.float32)
    fmax = float(np.finfo(np.float32).max)
    assert narrow["min"][:n].tolist() == ref_fold(x, b, e, np.min, fmax)
    assert narrow["max"][:n].tolist() == ref_fold(x, b, e, np.max, -fmax)


def test_narrow_limits_per_kernel():
    """int32 bounds and indices (NARROW) exactly while every index a kernel forms
    fits int32: rows kernels below 2**30 items and segments (one segment a
    block: d_in plus two rows at most 2**31); the long kernel while d_in plus
    two of its tiles is at most 2**31 (any segment count)."""
    from tilecore.algorithms.segmented_reduce import _narrow
    from tilecore.dispatch.segmented_policy import Shape
    rows, long = Shape("rows", 8, 128, 1), Shape("long", 1, 2048, 1)
    assert _narrow(rows, 2**30 - 1, 2**30 - 1)
    assert not _narrow(rows, 5, 2**30) and not _narrow(rows, 2**30, 5)
    # one segment a block: its positions stay within a row of its own end
    one = Shape("rows", 1, 1024, 1, 4)
    assert _narrow(one, 5, 2**31 - 2048) and not _narrow(one, 5, 2**31 - 2047)
    assert not _narrow(one, 2**30, 2**30)
    assert _narrow(long, 5, 2**31 - 4096) and not _narrow(long, 5, 2**31 - 4095)
    assert _narrow(Shape("long", 1, 32, 64), 2**31 - 1, 2**31 - 64)
    assert not _narrow(long, 5, 2**31 + 5)


@pytest.mark.interpreter_only
def test_long_kernel_int32_math_for_int64_offsets(monkeypatch):
    """The long kernel a float32 sum of segments of U(1..4096) items launches
    with the shipped sm_90 policy's long tiles (2048 items; that policy runs
    these segments on the rows kernel, so the test lowers long_min_avg_items)
    compiles without spilling, and with int64 offsets on a narrow input forms
    no 64-bit tile index (tc::tile_origin, the generated code's addressing by a
    64-bit tile index, clamped per tile), as with int32 offsets; its forced
    int64 path does."""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    off = offsets(RNG.permutation(np.arange(1, 4097, 13)))      # 316 lengths, 2048 on average
    n = off.size - 1
    x = np.zeros(int(off[-1]), np.float32)
    out = np.zeros(n, np.float32)

    def source(begins, ends):
        calls = []
        monkeypatch.setattr(ct, "launch", lambda s, g, kernel, a: calls.append((kernel, a)))
        with override_policy("segmented_reduce", long_min_avg_items=1024):
            run(S.sum, x, out, n, begins, ends)
        monkeypatch.setattr(ct, "launch", REAL_LAUNCH)
        assert [k.__name__ for k, _ in calls] == ["long_known"] and calls[0][1][5] == 2048
        ck = ct.compile(*calls[0], arch="sm_90")
        assert ck.stack_bytes == 0, f"long_known spills ({ck.stack_bytes} bytes)"
        return ck.source
    i32, i64 = off.astype(np.int32), off
    for begins, ends in ((i32[:-1], i32[1:]), (i64[:-1], i64[1:]), (i64[:-1], i32[1:])):
        src = source(begins, ends)
        assert "tile_origin" not in src
    force_wide(monkeypatch)
    assert "tile_origin" in source(i64[:-1], i64[1:])
