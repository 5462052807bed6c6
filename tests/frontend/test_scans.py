"""cumsum, cumprod, scan and reduce with a combining function (issue 14), in the
interpreter against NumPy (and, through the conftest, compiled for sm_80/sm_90
and compared with the GPU on a GPU machine).

References: float64 for floats, with the bound of any association of the
sums (first order: (depth + 1) ulps of the sum of magnitudes, depth
ceil(log2 n) for the interpreter's Hillis-Steele steps); integers exact,
wrapping. Non-commutative (associative) functions prove the combining order:
affine-map composition, 2x2 matrix products and digit concatenation, reversed
by reverse=True.
"""
import math
import operator

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, expect_error, run


# --- references ----------------------------------------------------------------------------------
def _along(x, axis, reverse, fn):
    """fn applied along `axis` (reversed first and after, for reverse)."""
    x = np.moveaxis(x, axis, -1)
    if reverse:
        x = x[..., ::-1]
    y = fn(x)
    if reverse:
        y = y[..., ::-1]
    return np.moveaxis(y, -1, axis)


def _float_bound(x, axis, reverse, dtype):
    """First-order error bound of any association of depth <= ceil(log2 n) + 1."""
    n = x.shape[axis]
    depth = math.ceil(math.log2(n)) + 2
    mag = _along(np.abs(x.astype(np.float64)), axis, reverse, lambda v: np.cumsum(v, -1))
    return depth * float(np.finfo(dtype).eps) * mag + np.finfo(dtype).tiny


def _seq_scan(xs, axis, reverse, f):
    """Sequential inclusive scan of the tuple of arrays `xs` with f(*earlier, *later)."""
    xs = [np.moveaxis(x, axis, -1) for x in xs]
    n = xs[0].shape[-1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    out = [np.empty_like(x) for x in xs]
    acc = None
    for i in order:
        cur = tuple(x[..., i] for x in xs)
        acc = cur if acc is None else f(*acc, *cur)
        for o, a in zip(out, acc):
            o[..., i] = a
    return [np.moveaxis(o, -1, axis) for o in out]


def _affine(a1, b1, a2, b2):
    """x -> a2 * (a1 * x + b1) + b2 in int32 (wrapping): associative, not commutative."""
    w = lambda v: np.asarray(v, np.int64).astype(np.int32)  # noqa: E731
    a1, b1, a2, b2 = (np.asarray(v, np.int64) for v in (a1, b1, a2, b2))
    return w(a1 * a2), w(a2 * b1 + b2)


# --- cumsum / cumprod -----------------------------------------------------------------------------
@ct.kernel
def cum2d(x, s, p, M: ct.Constant[int], N: ct.Constant[int], AX: ct.Constant[int],
          REV: ct.Constant[bool]):
    t = ct.load(x, (ct.bid(0), 0), (M, N))
    ct.store(s, (ct.bid(0), 0), ct.cumsum(t, AX, reverse=REV))
    ct.store(p, (ct.bid(0), 0), ct.cumprod(t, axis=AX, reverse=REV))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, axis, reverse", [
    ((1, 1024), 1, False), ((1, 1024), -1, True), ((32, 16), 0, False), ((32, 16), 0, True),
    ((8, 64), 1, True), ((64, 2), 0, False)])
def test_cumsum_cumprod_float(dtype, shape, axis, reverse):
    x = RNG.uniform(0.99, 1.01, (2 * shape[0], shape[1])).astype(dtype)
    x[:, ::3] *= -1
    s, p = np.zeros_like(x), np.zeros_like(x)
    run(cum2d, [x, s, p, *shape, axis, reverse], grid=(2,))
    for blk in range(2):
        xb = x[blk * shape[0]:(blk + 1) * shape[0]].astype(np.float64)
        sb, pb = s[blk * shape[0]:(blk + 1) * shape[0]], p[blk * shape[0]:(blk + 1) * shape[0]]
        ref = _along(xb, axis, reverse, lambda v: np.cumsum(v, -1))
        assert np.all(np.abs(sb - ref) <= _float_bound(xb, axis, reverse, dtype))
        # products: each output is a product of k factors, k - 1 roundings in any order
        ref = _along(xb, axis, reverse, lambda v: np.cumprod(v, -1))
        n = shape[axis]
        assert np.all(np.abs(pb - ref) <= n * np.finfo(dtype).eps * np.abs(ref))


@pytest.mark.parametrize("dtype, lo, hi", [(np.int8, -100, 100), (np.uint16, 0, 60000),
                                           (np.int32, -2**31, 2**31 - 1),
                                           (np.uint64, 0, 2**64 - 1), (np.int64, -5, 5)])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_cumprod_int_wrap(dtype, lo, hi, reverse):
    x = RNG.integers(lo, hi, (8, 64), dtype=dtype, endpoint=True)
    s, p = np.zeros_like(x), np.zeros_like(x)
    run(cum2d, [x, s, p, 8, 64, 1, reverse])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, _along(x, 1, reverse, lambda v: np.cumsum(v, -1,
                                                                                   dtype=dtype)))
        np.testing.assert_array_equal(p, _along(x, 1, reverse, lambda v: np.cumprod(v, -1,
                                                                                    dtype=dtype)))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_cumsum_narrow_floats_exact_on_small_integers(dtype):
    """Small integers (sums below 256) are exact in float16 and bfloat16 in any order
    (values in -1..1 keep the products of cum2d exact too: the conftest compares them with
    the GPU's, and an overflow to inf times 0 would depend on the combining order)."""
    x = RNG.integers(-1, 2, (4, 64)).astype(dtype)
    s, p = np.zeros_like(x), np.zeros_like(x)
    run(cum2d, [x, s, p, 4, 64, 1, False])
    np.testing.assert_array_equal(s.astype(np.float64), np.cumsum(x.astype(np.float64), 1))


@ct.kernel
def cum_bool(x, s, p):
    t = ct.load(x, (0,), (64,)) > 0
    ct.store(s, (0,), ct.cumsum(t))
    ct.store(p, (0,), ct.cumprod(t, reverse=True))


def test_cumsum_of_bool_counts_in_int32():
    x = RNG.integers(-2, 3, 64).astype(np.int32)
    x[-1] = 1
    s, p = np.zeros(64, np.int32), np.zeros(64, np.int32)
    run(cum_bool, [x, s, p])
    np.testing.assert_array_equal(s, np.cumsum(x > 0))
    np.testing.assert_array_equal(p, np.cumprod((x > 0)[::-1])[::-1])


@ct.kernel
def cum_partial(x, y, yr, T: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (ct.bid(0),), ct.cumsum(t))
    ct.store(yr, (ct.bid(0),), ct.cumsum(t, reverse=True))


def test_partial_tiles_padded_with_zero():
    n, tile = 1000, 256
    x = RNG.integers(-50, 50, n).astype(np.int32)
    y, yr = np.zeros(n, np.int32), np.zeros(n, np.int32)
    run(cum_partial, [x, y, yr, tile], grid=(ct.cdiv(n, tile),))
    padded = np.zeros(4 * tile, np.int32)
    padded[:n] = x
    rows = padded.reshape(4, tile)
    np.testing.assert_array_equal(y, np.cumsum(rows, 1).ravel()[:n])
    np.testing.assert_array_equal(yr, np.cumsum(rows[:, ::-1], 1)[:, ::-1].ravel()[:n])


@ct.kernel
def cum3d(x, y):
    t = ct.load(x, (0, 0, 0), (2, 8, 4))
    ct.store(y, (0, 0, 0), ct.cumsum(t, 1) * 100 + ct.cumsum(t, 0, reverse=True))


def test_cumsum_3d_middle_and_first_axis():
    x = RNG.integers(0, 10, (2, 8, 4)).astype(np.int32)
    y = np.zeros_like(x)
    run(cum3d, [x, y])
    np.testing.assert_array_equal(y, np.cumsum(x, 1) * 100 + np.cumsum(x[::-1], 0)[::-1])


# --- scan with a combining function ---------------------------------------------------------------
def affine(a1, b1, a2, b2):
    """Compose x -> a1 x + b1, then x -> a2 x + b2 (a plain function, inlined)."""
    return a1 * a2, a2 * b1 + b2


@ct.kernel
def affine_scan(a, b, oa, ob, M: ct.Constant[int], N: ct.Constant[int], AX: ct.Constant[int],
                REV: ct.Constant[bool]):
    ta = ct.load(a, (0, 0), (M, N))
    tb = ct.load(b, (0, 0), (M, N))
    ra, rb = ct.scan((ta, tb), AX, affine, (1, 0), reverse=REV)
    ct.store(oa, (0, 0), ra)
    ct.store(ob, (0, 0), rb)


@pytest.mark.parametrize("shape, axis", [((4, 256), 1), ((64, 8), 0), ((1, 32), 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_noncommutative_affine_scan(shape, axis, reverse):
    a = RNG.integers(-3, 4, shape).astype(np.int32)
    b = RNG.integers(-1000, 1000, shape).astype(np.int32)
    oa, ob = np.zeros_like(a), np.zeros_like(b)
    run(affine_scan, [a, b, oa, ob, *shape, axis, reverse])
    ra, rb = _seq_scan([a, b], axis, reverse, _affine)
    np.testing.assert_array_equal(oa, ra)
    np.testing.assert_array_equal(ob, rb)
    # the order matters: composing the other way round gives other maps
    swapped = _seq_scan([a, b], axis, reverse, lambda a1, b1, a2, b2: _affine(a2, b2, a1, b1))
    assert not np.array_equal(ob, swapped[1])


def matmul2(a1, b1, c1, d1, a2, b2, c2, d2):
    """[[a1, b1], [c1, d1]] @ [[a2, b2], [c2, d2]]: associative, not commutative."""
    return a1 * a2 + b1 * c2, a1 * b2 + b1 * d2, c1 * a2 + d1 * c2, c1 * b2 + d1 * d2


@ct.kernel
def matrix_scan(m, o, ored, N: ct.Constant[int]):
    a = ct.load(m, (0, 0), (1, N)).reshape((N,))
    b = ct.load(m, (1, 0), (1, N)).reshape((N,))
    c = ct.load(m, (2, 0), (1, N)).reshape((N,))
    d = ct.load(m, (3, 0), (1, N)).reshape((N,))
    ra, rb, rc, rd = ct.scan((a, b, c, d), 0, matmul2, (1, 0, 0, 1))
    ct.store(o, (0, 0), ra.reshape((1, N)))
    ct.store(o, (1, 0), rb.reshape((1, N)))
    ct.store(o, (2, 0), rc.reshape((1, N)))
    ct.store(o, (3, 0), rd.reshape((1, N)))
    pa, pb, pc, pd = ct.reduce((a, b, c, d), 0, lambda a1, b1, c1, d1, a2, b2, c2, d2: matmul2(
        a1, b1, c1, d1, a2, b2, c2, d2), (1, 0, 0, 1), keepdims=True)
    ct.store(ored, (0,), pa)
    ct.store(ored, (1,), pb)
    ct.store(ored, (2,), pc)
    ct.store(ored, (3,), pd)


def test_2x2_matrix_product_scan_and_reduce():
    n = 128
    m = RNG.integers(-2, 3, (4, n)).astype(np.int64)
    o, ored = np.zeros_like(m), np.zeros(4, np.int64)
    run(matrix_scan, [m, o, ored, n])
    acc = np.eye(2, dtype=object)
    with np.errstate(over="ignore"):
        for i in range(n):
            acc = acc.dot(np.array([[int(m[0, i]), int(m[1, i])], [int(m[2, i]), int(m[3, i])]],
                                   dtype=object))
            acc = np.vectorize(lambda v: (v + 2**63) % 2**64 - 2**63)(acc)
            np.testing.assert_array_equal(o[:, i], acc.ravel().astype(np.int64))
    np.testing.assert_array_equal(ored, o[:, -1])


def concat(v1, p1, v2, p2):
    """Digit strings (value, 10**length): concatenation."""
    return v1 * p2 + v2, p1 * p2


@ct.kernel
def digits(x, fwd, rev, red0, red1):
    t = ct.load(x, (0, 0), (4, 8))
    p = ct.full((4, 8), 10, ct.int64)
    ct.store(fwd, (0, 0), ct.scan((t, p), 1, concat, (0, 1))[0])
    ct.store(rev, (0, 0), ct.scan((t, p), 1, concat, (0, 1), reverse=True)[0])
    ct.store(red0, (0,), ct.reduce((t, p), 0, concat, (0, 1))[0])
    ct.store(red1, (0, 0), ct.reduce((t, p), 1, concat, (0, 1), keepdims=True)[0])


def test_digit_concatenation_order():
    x = np.arange(1, 33, dtype=np.int64).reshape(4, 8) % 10
    fwd, rev = np.zeros_like(x), np.zeros_like(x)
    red0, red1 = np.zeros(8, np.int64), np.zeros((4, 1), np.int64)
    run(digits, [x, fwd, rev, red0, red1])
    s = ["".join(str(d) for d in row) for row in x]
    assert fwd[0].tolist() == [int(s[0][:i + 1]) for i in range(8)]
    assert rev[1].tolist() == [int(s[1][i:][::-1]) for i in range(8)]
    assert red0.tolist() == [int("".join(str(d) for d in x[:, j])) for j in range(8)]
    assert red1[:, 0].tolist() == [int(v) for v in s]


@ct.kernel
def argmax_scan(x, v, i, am, N: ct.Constant[int]):
    t = ct.load(x, (0, 0), (4, N))
    idx = ct.arange(N, dtype=ct.int32)

    def pick(va, ia, vb, ib):
        left = (va > vb) | ((va == vb) & (ia < ib))
        return ct.where(left, va, vb), ct.where(left, ia, ib)

    rv, ri = ct.scan((t, idx), 1, pick, (float("-inf"), 0))
    ct.store(v, (0, 0), rv)
    ct.store(i, (0, 0), ri)
    ct.store(am, (0,), ct.reduce((t, idx), 1, pick, (float("-inf"), 0))[1])


def test_running_argmax_first_on_ties():
    n = 64
    x = RNG.integers(0, 5, (4, n)).astype(np.float32)
    v, i, am = np.zeros_like(x), np.zeros((4, n), np.int32), np.zeros(4, np.int32)
    run(argmax_scan, [x, v, i, am, n])
    np.testing.assert_array_equal(v, np.maximum.accumulate(x, 1))
    np.testing.assert_array_equal(i, [[np.argmax(r[:k + 1]) for k in range(n)] for r in x])
    np.testing.assert_array_equal(am, np.argmax(x, 1))


@ct.kernel
def segmented(flags, x, out, N: ct.Constant[int]):
    f = ct.load(flags, (0,), (N,)) != 0
    t = ct.load(x, (0,), (N,))
    _, s = ct.scan((f, t), 0, lambda f1, v1, f2, v2: (f1 | f2, ct.where(f2, v2, v1 + v2)),
                   (False, 0))
    ct.store(out, (0,), s)


def test_segmented_sum_with_flags():
    n = 512
    flags = (RNG.random(n) < 0.05).astype(np.int8)
    x = RNG.integers(-9, 10, n).astype(np.int32)
    out = np.zeros_like(x)
    run(segmented, [flags, x, out, n])
    ref, acc = np.zeros_like(x), 0
    for k in range(n):
        acc = x[k] if flags[k] else acc + x[k]
        ref[k] = acc
    np.testing.assert_array_equal(out, ref)


@ct.function
def tile_max(a, b):
    return ct.maximum(a, b)


@ct.kernel
def funcs(x, o_lam, o_op, o_mul, o_max, o_stub, o_tf, o_def, o_var, o_cap, o_val,
          N: ct.Constant[int]):
    t = ct.load(x, (0,), (N,))
    scale = 1000
    limit = ct.full((), 50, ct.int32)

    def nested_min(a, b):
        if scale > 0:   # a compile-time condition is no branch
            return ct.minimum(a, b)
        return a

    add = lambda a, b: a + b  # noqa: E731
    ct.store(o_lam, (0,), ct.scan(t, 0, lambda a, b: a + b, 0))
    ct.store(o_op, (0,), ct.scan(t, 0, operator.add, 0, reverse=True))
    ct.store(o_mul, (0,), ct.scan(t % 3 + 1, 0, operator.mul, 1))
    ct.store(o_max, (0,), ct.scan(t, 0, max, -2**31))
    ct.store(o_stub, (0,), ct.scan(t, 0, ct.maximum, -2**31, reverse=True))
    ct.store(o_tf, (0,), ct.scan(t, -1, tile_max, -2**31))
    ct.store(o_def, (0,), ct.scan(t, 0, nested_min, 2**31 - 1))
    ct.store(o_var, (0,), ct.scan(t, 0, add, 0))
    ct.store(o_cap, (0,), ct.scan(t, 0, lambda a, b: (a + b) % scale, 0))
    ct.store(o_val, (0,), ct.scan(t, 0, lambda a, b: ct.minimum(ct.minimum(a, b), limit),
                                  2**31 - 1))


def test_function_kinds():
    n = 64
    x = RNG.integers(-20, 30, n).astype(np.int32)
    outs = [np.zeros_like(x) for _ in range(10)]
    run(funcs, [x, *outs, n])
    o_lam, o_op, o_mul, o_max, o_stub, o_tf, o_def, o_var, o_cap, o_val = outs
    np.testing.assert_array_equal(o_lam, np.cumsum(x))
    np.testing.assert_array_equal(o_op, np.cumsum(x[::-1])[::-1])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(o_mul, np.cumprod(x % 3 + 1, dtype=np.int32))
    np.testing.assert_array_equal(o_max, np.maximum.accumulate(x))
    np.testing.assert_array_equal(o_stub, np.maximum.accumulate(x[::-1])[::-1])
    np.testing.assert_array_equal(o_tf, np.maximum.accumulate(x))
    np.testing.assert_array_equal(o_def, np.minimum.accumulate(x))
    np.testing.assert_array_equal(o_var, np.cumsum(x))
    ref = _seq_scan([x], 0, False, lambda a, b: (np.remainder(a + b, 1000),))[0]
    np.testing.assert_array_equal(o_cap, ref)
    ref = _seq_scan([x], 0, False, lambda a, b: (min(a, b, 50),))[0]
    np.testing.assert_array_equal(o_val, ref)


@ct.kernel
def result_casts(x8, x32, o8, o32, oc, ot):
    t8 = ct.load(x8, (0,), (16,))
    t32 = ct.load(x32, (0,), (16,))
    ct.store(o8, (0,), ct.scan(t8, 0, lambda a, b: a + b, 0))  # int8 + int8 wraps in int8
    ct.store(o32, (0,), ct.scan(t32, 0, lambda a, b: ct.astype(ct.maximum(a, b), ct.int8), 0))
    ct.store(oc, (0,), ct.scan(t32, 0, lambda a, b: 7, 0))
    ct.store(ot, (0,), ct.scan(t32, 0, lambda a, b: ct.int16(-3), 0))


def test_function_results_convert_implicitly():
    x8 = np.full(16, 100, np.int8)
    x32 = RNG.integers(-100, 100, 16).astype(np.int32)
    o8, o32, oc, ot = np.zeros_like(x8), *(np.zeros_like(x32) for _ in range(3))
    run(result_casts, [x8, x32, o8, o32, oc, ot])
    np.testing.assert_array_equal(o8, np.cumsum(x8.astype(np.int64)).astype(np.int8))
    np.testing.assert_array_equal(o32, np.maximum.accumulate(x32))   # int8 results, widened
    np.testing.assert_array_equal(oc, [x32[0]] + [7] * 15)
    np.testing.assert_array_equal(ot, [x32[0]] + [-3] * 15)


# --- reduce with a combining function -------------------------------------------------------------
@ct.kernel
def reduces(x, s0, s1, m1, x1, M: ct.Constant[int], N: ct.Constant[int]):
    t = ct.load(x, (0, 0), (M, N))
    ct.store(s0, (0,), ct.reduce(t, 0, operator.add, 0) - ct.sum(t, 0) + ct.sum(t, 0))
    ct.store(s1, (0, 0), ct.reduce(t, 1, lambda a, b: a + b, 0, keepdims=True))
    ct.store(m1, (0,), ct.reduce(t, -1, ct.minimum, 2**31 - 1))
    ct.store(x1, (0,), ct.reduce(t, 1, operator.xor, 0))


@pytest.mark.parametrize("shape", [(4, 256), (64, 8), (1, 1), (8, 1)])
def test_reduce_ints(shape):
    x = RNG.integers(-2**31, 2**31 - 1, shape, dtype=np.int32, endpoint=True)
    s0, s1 = np.zeros(shape[1], np.int32), np.zeros((shape[0], 1), np.int32)
    m1, x1 = np.zeros(shape[0], np.int32), np.zeros(shape[0], np.int32)
    run(reduces, [x, s0, s1, m1, x1, *shape])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s0, x.sum(0, dtype=np.int32))
        np.testing.assert_array_equal(s1, x.sum(1, dtype=np.int32, keepdims=True))
    np.testing.assert_array_equal(m1, x.min(1))
    np.testing.assert_array_equal(x1, np.bitwise_xor.reduce(x, 1))


@ct.kernel
def reduce_float(x, o, N: ct.Constant[int]):
    ct.store(o, (0,), ct.reduce(ct.load(x, (0,), (N,)), 0, lambda a, b: a + b, 0.0,
                                keepdims=True))


def test_reduce_float_sum_bound():
    n = 4096
    x = RNG.uniform(-1, 1, n).astype(np.float32)
    o = np.zeros(1, np.float32)
    run(reduce_float, [x, o, n])
    bound = (math.log2(n) + 2) * np.finfo(np.float32).eps * np.abs(x.astype(np.float64)).sum()
    assert abs(float(o[0]) - x.astype(np.float64).sum()) <= bound


# --- sequential reduce (tilecore's extension: left to right) ------------------------------
@ct.kernel
def seq_folds(x, f, ok, o1, o_rows, o_cols, o_float, o_pairs, N: ct.Constant[int]):
    t = ct.load(x, (0,), (N,))
    ct.store(o1, (0,), ct.reduce(t, 0, lambda a, b: a - b, 0, keepdims=True, sequential=True))
    m = ct.reshape(t, (4, N // 4))
    ct.store(o_rows, (0,), ct.reduce(m, 1, operator.sub, 0, sequential=True))
    ct.store(o_cols, (0, 0), ct.reduce(m, 0, operator.sub, 0, keepdims=True, sequential=True))
    ct.store(o_float, (0,), ct.reduce(ct.load(f, (0,), (N,)), 0, operator.add, 0.0,
                                      keepdims=True, sequential=True))
    # (ok, value) pairs: lanes with ok == 0 pass the running value through
    o, v = ct.reduce((ct.load(ok, (0,), (N,)), t), 0,
                     lambda oa, a, ob, b: (ct.maximum(oa, ob),
                                           ct.where((oa != 0) & (ob != 0), a - b,
                                                    ct.where(ob != 0, b, a))),
                     (0, 0), keepdims=True, sequential=True)
    ct.store(o_pairs, (0,), v)


def _left_fold(values, f):
    acc = values[0]
    for v in values[1:]:
        acc = f(acc, v)
    return acc


@pytest.mark.parametrize("n", [8, 16, 32, 64, 256])
def test_sequential_reduce_folds_left_to_right(n):
    """Subtraction and float32 sums (1e8, then 3s: each is below half an ulp of
    1e8, so left to right they vanish, where a tree of the 3s first would carry)
    tell a left-to-right fold from any other."""
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    f = np.concatenate(([1e8], np.full(n - 1, 3.0))).astype(np.float32)   # 3 < half an ulp
    ok = (RNG.random(n) < 0.6).astype(np.int32)
    ok[n // 2] = 1
    o1, o_rows = np.zeros(1, np.int32), np.zeros(4, np.int32)
    o_cols, o_float, o_pairs = (np.zeros((1, n // 4), np.int32), np.zeros(1, np.float32),
                                np.zeros(1, np.int32))
    run(seq_folds, [x, f, ok, o1, o_rows, o_cols, o_float, o_pairs, n])
    assert o1[0] == x[0] - x[1:].sum()
    m = x.reshape(4, n // 4)
    np.testing.assert_array_equal(o_rows, m[:, 0] - m[:, 1:].sum(1))
    np.testing.assert_array_equal(o_cols[0], m[0] - m[1:].sum(0))
    want = _left_fold(list(f), lambda a, b: np.float32(a + b))
    assert o_float[0] == want == np.float32(1e8) != np.float32(f.astype(np.float64).sum())
    kept = x[ok != 0]
    assert o_pairs[0] == kept[0] - kept[1:].sum()


# --- exclusive scans (tilecore's extension) ------------------------------------------------------
def _exclusive(xs, axis, reverse, f, ids):
    """The sequential inclusive scan shifted by one along `axis` (toward the end, or
    toward the start for reverse), the vacated first element `ids`."""
    incl = _seq_scan(xs, axis, reverse, f)
    out = []
    for y, i in zip(incl, ids):
        y = np.moveaxis(y, axis, -1)
        fill = np.full(y.shape[:-1] + (1,), i, y.dtype)
        y = np.concatenate((y[..., 1:], fill) if reverse else (fill, y[..., :-1]), axis=-1)
        out.append(np.moveaxis(y, -1, axis))
    return out


@ct.kernel
def affine_exclusive(a, b, oa, ob, M: ct.Constant[int], N: ct.Constant[int],
                     AX: ct.Constant[int], REV: ct.Constant[bool]):
    ta = ct.load(a, (0, 0), (M, N))
    tb = ct.load(b, (0, 0), (M, N))
    ra, rb = ct.scan((ta, tb), AX, affine, (1, 0), reverse=REV, exclusive=True)
    ct.store(oa, (0, 0), ra)
    ct.store(ob, (0, 0), rb)


@pytest.mark.parametrize("shape, axis", [
    ((4, 256), 1), ((1, 4096), 1), ((64, 8), 0), ((1, 32), 1), ((256, 2), 1), ((64, 4), 1),
    ((16, 1), 1), ((1, 1), 0)])
@pytest.mark.parametrize("reverse", [False, True])
def test_exclusive_noncommutative_scan(shape, axis, reverse):
    """Element i gets the composition of the maps before it (after it, reversed), the
    first one the identity map; segments inside a thread's chunk (N = 2, 4) too."""
    a = RNG.integers(-3, 4, shape).astype(np.int32)
    b = RNG.integers(-1000, 1000, shape).astype(np.int32)
    oa, ob = np.full_like(a, 77), np.full_like(b, 77)
    run(affine_exclusive, [a, b, oa, ob, *shape, axis, reverse])
    ra, rb = _exclusive([a, b], axis, reverse, _affine, (1, 0))
    np.testing.assert_array_equal(oa, ra)
    np.testing.assert_array_equal(ob, rb)


@ct.kernel
def exclusive_seeded(x, o_add, o_max, o_f, f, N: ct.Constant[int]):
    t = ct.load(x, (0,), (N,))
    # the identity is only put first, never combined: a seed that is no identity
    ct.store(o_add, (0,), ct.scan(t, 0, lambda a, b: a + b, -7, exclusive=True))
    ct.store(o_max, (0,), ct.scan(t, 0, ct.maximum, 5, reverse=True, exclusive=True))
    tf = ct.load(f, (0,), (N,))
    ct.store(o_f, (0,), ct.scan(tf, 0, lambda a, b: a + b, 0.5, exclusive=True))


@pytest.mark.parametrize("n", [2, 64, 1024])
def test_exclusive_scan_identity_only_first(n):
    x = RNG.integers(-20, 30, n).astype(np.int32)
    f = RNG.uniform(-1, 1, n).astype(np.float32)
    o_add, o_max, o_f = np.zeros_like(x), np.zeros_like(x), np.zeros_like(f)
    run(exclusive_seeded, [x, o_add, o_max, o_f, f, n])
    np.testing.assert_array_equal(o_add, np.concatenate(([-7], np.cumsum(x)[:-1])))
    np.testing.assert_array_equal(
        o_max, np.concatenate((np.maximum.accumulate(x[::-1])[::-1][1:], [5])))
    want = np.concatenate(([0.5], np.cumsum(f.astype(np.float64))[:-1]))
    bound = np.concatenate(([0], _float_bound(f, 0, False, np.float32)[:-1]))
    assert np.all(np.abs(o_f - want) <= bound)


@ct.kernel
def exclusive_in_loop(x, o, T: ct.Constant[int], N: ct.Constant[int]):
    carry = ct.full((1,), 0, ct.int32)
    for i in range(N // T):
        t = ct.load(x, (i,), (T,))
        e = ct.scan(t, 0, lambda a, b: a + b, 0, exclusive=True) + carry
        ct.store(o, (i,), e)
        carry = carry + ct.sum(t, 0, keepdims=True)


def test_exclusive_scan_in_a_loop():
    x = RNG.integers(-50, 50, 4 * 512).astype(np.int32)
    o = np.zeros_like(x)
    run(exclusive_in_loop, [x, o, 512, x.size])
    np.testing.assert_array_equal(o, np.concatenate(([0], np.cumsum(x)[:-1])))


# --- errors ---------------------------------------------------------------------------------------
@ct.kernel
def e_capture(x, p):
    t = ct.load(x, (0,), (8,))
    m = ct.load(p, (0,), (1,)).item()
    ct.store(x, (0,), ct.scan(t, 0, lambda a, b: (a + b) % m, 0))  # E-CAPTURE


@ct.kernel
def e_loop(x, p):
    t = ct.load(x, (0,), (8,))

    def f(a, b):
        for i in range(ct.bid(0) + 1):  # E-LOOP
            a = a + b
        return a
    ct.store(x, (0,), ct.scan(t, 0, f, 0))


@ct.kernel
def e_branch(x, p):
    t = ct.load(x, (0,), (8,))

    def f(a, b):
        if ct.bid(0) == 0:  # E-BRANCH
            return a + b
        return a
    ct.store(x, (0,), ct.reduce(t, 0, f, 0))


@ct.kernel
def e_memory(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, lambda a, b: ct.load(p, (a,), (1,)).item(), 0))  # E-MEM


@ct.kernel
def e_nested(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, lambda a, b: ct.cumsum(ct.full((1,), a)).item(), 0))  # E-NEST


@ct.kernel
def e_tile(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, lambda a, b: ct.full((4,), a + b), 0))  # E-TILE


@ct.kernel
def e_dtype(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, lambda a, b: a / b, 0))  # E-DTYPE


@ct.kernel
def e_tuple_len(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan((t, t), 0, lambda a, b, c, d: (a, b, c), (0, 0))[0])  # E-TLEN


@ct.kernel
def e_identities(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan((t, t), 0, lambda a, b, c, d: (a, b), (0,))[0])  # E-IDS


@ct.kernel
def e_identity_float(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.reduce(t, 0, operator.add, 0.5))  # E-IDF


@ct.kernel
def e_func(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, 3, 0))  # E-FUNC


@ct.kernel
def e_axis(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.reduce(t, None, operator.add, 0))  # E-AXIS


@ct.kernel
def e_exclusive(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.scan(t, 0, operator.add, 0, exclusive=ct.bid(0) > 0))  # E-EXCL


@ct.kernel
def e_fp8(x, p):
    t = ct.load(x, (0,), (8,))
    ct.store(x, (0,), ct.cumsum(ct.astype(t, ct.float8_e4m3fn)).astype(ct.int32))  # E-FP8


@ct.kernel
def e_rounding(x, p):
    t = ct.load(x, (0,), (8,)).astype(ct.float32)
    ct.store(x, (0,), ct.cumprod(t, rounding_mode=ct.RoundingMode.RZ).astype(ct.int32))  # E-RM


SCAN_ERRORS = [
    (e_capture, ct.TileSyntaxError, "scan body captures runtime value 'm'", "E-CAPTURE"),
    (e_loop, ct.TileSyntaxError, "Loops inside scan body are not supported", "E-LOOP"),
    (e_branch, ct.TileSyntaxError, "Branching inside reduction body is not supported. Consider "
                                   "ct.where() as a workaround.", "E-BRANCH"),
    (e_memory, ct.TileSyntaxError, "Operations with memory effects are not supported inside "
                                   "scan body", "E-MEM"),
    (e_nested, ct.TileSyntaxError, "Nested scan/reduction is not supported", "E-NEST"),
    (e_tile, ct.TileTypeError, "Scan function returned a tile of non-scalar shape (4,)",
     "E-TILE"),
    (e_dtype, ct.TileTypeError, "Scan function returned a tile of unexpected dtype: expected "
                                "int32, got float32", "E-DTYPE"),
    (e_tuple_len, ct.TileTypeError, "Scan function must return a tuple of 2 values to match "
                                    "the number of inputs, but a tuple of length 3 was found.",
     "E-TLEN"),
    (e_identities, ct.TileTypeError, "Number of identity values (1) must match the number of "
                                     "input tiles (2)", "E-IDS"),
    (e_identity_float, ct.TileTypeError, 'Invalid argument "identity" of reduce(): 0.5: cannot '
                                         "implicitly cast it to int32", "E-IDF"),
    (e_func, ct.TileTypeError, 'Invalid argument "func" of scan(): expected a function (a tile '
                               "function, a lambda or an operator function), got a loosely "
                               "typed constant 3", "E-FUNC"),
    (e_axis, ct.TileTypeError, 'Invalid argument "axis" of reduce(): expected a constant int, '
                               "got NoneType None", "E-AXIS"),
    (e_exclusive, ct.TileTypeError, 'Invalid argument "exclusive" of scan(): expected a '
                                    "constant bool, got a bool_ scalar", "E-EXCL"),
    (e_fp8, ct.TileTypeError, 'Invalid argument "x" of cumsum(): non-arithmetic dtype '
                              "float8_e4m3fn is unsupported (convert it with astype())",
     "E-FP8"),
    (e_rounding, ct.TileValueError, 'Invalid argument "rounding_mode" of cumprod(): only the '
                                    "default rounding (None or RoundingMode.RN) is supported, "
                                    "got RoundingMode <RoundingMode.RZ: 'zero'>", "E-RM"),
]


@pytest.mark.parametrize("kernel, cls, message, marker", SCAN_ERRORS,
                         ids=[e[3] for e in SCAN_ERRORS])
def test_scan_errors(kernel, cls, message, marker):
    expect_error(kernel, [np.zeros(8, np.int32), np.zeros(1, np.int32)], cls, message, marker)
