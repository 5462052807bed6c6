"""Factories (arange, zeros, ones, full), shape manipulation (reshape,
permute, transpose, broadcast_to, expand_dims, x[:, None]) and reductions
(sum, prod, max, min, argmax, argmin with axis/keepdims)."""
import re

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, expect_error, run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@ct.kernel
def factories(o_i, o_f, o_z, o_o, o_full, o_b):
    ct.store(o_i, (0,), ct.arange(8, dtype=ct.int16) * 3)
    ct.store(o_f, (0,), ct.arange(8, dtype=ct.float32) / 2)
    ct.store(o_z, (0, 0), ct.zeros((2, 4), dtype=ct.float16))
    ct.store(o_o, (0, 0), ct.ones((2, 4), ct.int8))
    ct.store(o_full, (0, 0), ct.full((2, 4), -2.5, ct.float64))
    ct.store(o_b, (0,), ct.full((4,), True) & (ct.arange(4) > 1))


def test_factories():
    o_i, o_f = np.zeros(8, np.int16), np.zeros(8, np.float32)
    o_z, o_o = np.ones((2, 4), np.float16), np.zeros((2, 4), np.int8)
    o_full, o_b = np.zeros((2, 4)), np.zeros(4, np.bool_)
    run(factories, [o_i, o_f, o_z, o_o, o_full, o_b])
    np.testing.assert_array_equal(o_i, np.arange(8) * 3)
    np.testing.assert_array_equal(o_f, np.arange(8) / 2)
    np.testing.assert_array_equal(o_z, 0)
    np.testing.assert_array_equal(o_o, 1)
    np.testing.assert_array_equal(o_full, -2.5)
    np.testing.assert_array_equal(o_b, [False, False, True, True])


@ct.kernel
def full_runtime(out, v):
    ct.store(out, (0,), ct.full((4,), v * 2, ct.int32) + ct.full((4,), v))


def test_full_with_runtime_scalar():
    out = np.zeros(4, np.int32)
    run(full_runtime, [out, 5])
    np.testing.assert_array_equal(out, 15)


@ct.kernel
def shapes_k(x, o_r, o_p, o_t, o_b, o_e, o_n):
    t = ct.load(x, (0, 0, 0), (2, 4, 8))
    ct.store(o_r, (0, 0), ct.reshape(t, (8, 8)) + t.reshape(8, -1) * 0)
    ct.store(o_p, (0, 0, 0), ct.permute(t, (2, 0, 1)))
    ct.store(o_t, (0, 0, 0), ct.transpose(t, 0, 2) + t.transpose(-1, 0) * 0)
    row = ct.load(x, (0, 0, 0), (1, 1, 8)).reshape((8,))
    ct.store(o_b, (0, 0), ct.broadcast_to(row, (4, 8)) + row.broadcast_to((4, 8)) * 0)
    ct.store(o_e, (0, 0, 0), ct.expand_dims(ct.expand_dims(row, 0), axis=-1))
    ct.store(o_n, (0, 0), row[:, None] + row[None, :] + row[None][..., None].reshape((1, 8)) * 0)


def test_shape_functions():
    x = np.arange(64, dtype=np.float32).reshape(2, 4, 8)
    o_r, o_p, o_t = np.zeros((8, 8), np.float32), np.zeros((8, 2, 4), np.float32), \
        np.zeros((8, 4, 2), np.float32)
    o_b, o_e, o_n = np.zeros((4, 8), np.float32), np.zeros((1, 8, 1), np.float32), \
        np.zeros((8, 8), np.float32)
    run(shapes_k, [x, o_r, o_p, o_t, o_b, o_e, o_n])
    row = x[0, 0]
    np.testing.assert_array_equal(o_r, x.reshape(8, 8))
    np.testing.assert_array_equal(o_p, x.transpose(2, 0, 1))
    np.testing.assert_array_equal(o_t, x.transpose(2, 1, 0))
    np.testing.assert_array_equal(o_b, np.broadcast_to(row, (4, 8)))
    np.testing.assert_array_equal(o_e, row[None, :, None])
    np.testing.assert_array_equal(o_n, row[:, None] + row[None, :])


@ct.kernel
def transpose_2d(x, out):
    t = ct.load(x, (0, 0), (4, 8))
    ct.store(out, (0, 0), ct.transpose(t) + t.T * 0)


def test_transpose_default_axes():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    out = np.zeros((8, 4), np.float32)
    run(transpose_2d, [x, out])
    np.testing.assert_array_equal(out, x.T)


@ct.kernel
def reduce_k(x, out, FN: ct.Constant[str], AXIS: ct.Constant, KEEP: ct.Constant[bool],
             OUT_SHAPE: ct.Constant):
    t = ct.load(x, (0, 0), (4, 8))
    if FN == "sum":
        r = ct.sum(t, axis=AXIS, keepdims=KEEP)
    elif FN == "prod":
        r = ct.prod(t, AXIS, keepdims=KEEP)
    elif FN == "max":
        r = ct.max(t, axis=AXIS, keepdims=KEEP)
    elif FN == "min":
        r = t.min(axis=AXIS, keepdims=KEEP)
    elif FN == "argmax":
        r = ct.argmax(t, axis=AXIS, keepdims=KEEP)
    else:
        r = t.argmin(AXIS, keepdims=KEEP)
    ct.store(out, (0,) * out.ndim, r.astype(out.dtype).reshape(OUT_SHAPE))


def _ref(fn, x, axis, keep):
    if fn.startswith("arg"):
        f = getattr(np, fn)
        if axis is None:
            r = np.asarray(f(x))
            return r.reshape((1,) * x.ndim) if keep else r
        return f(x, axis=axis, keepdims=keep)
    return getattr(np, {"max": "max", "min": "min"}.get(fn, fn))(x, axis=axis, keepdims=keep)


_AXES = [(0, False), (1, True), (-1, False), (None, False), (None, True), ((0, 1), False)]


@pytest.mark.parametrize("fn,axis,keep", [
    (fn, axis, keep) for fn in ["sum", "prod", "max", "min", "argmax", "argmin"]
    for axis, keep in _AXES if not (fn.startswith("arg") and isinstance(axis, tuple))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, ml_dtypes.bfloat16])
def test_reductions(fn, axis, keep, dtype):
    if dtype == np.uint8:
        x = RNG.integers(0, 5, (4, 8)).astype(dtype)
    elif dtype == np.int32:
        x = RNG.integers(-3, 4, (4, 8)).astype(dtype)
    else:
        x = (RNG.standard_normal((4, 8)) * (0.6 if fn == "prod" else 10)).astype(dtype)
    ref = np.asarray(_ref(fn, x.astype(np.float64) if dtype != np.uint8 else x, axis, keep))
    out_dtype = np.int32 if fn.startswith("arg") else dtype
    out_shape = ref.shape if ref.shape else (1,)
    out = np.zeros(out_shape, out_dtype)
    run(reduce_k, [x, out, fn, axis, keep, out.shape])
    want = ref.reshape(out_shape)
    if dtype == np.float32 and fn in ("sum", "prod"):
        np.testing.assert_allclose(out, want, rtol=1e-5)
    elif dtype == ml_dtypes.bfloat16 and fn in ("sum", "prod"):
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=3e-2, atol=0.1)
    else:
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(out, want.astype(out_dtype))


def test_reductions_nan():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    x[1, 3] = np.nan
    x[2, 5] = np.nan
    for fn in ("max", "min", "sum"):
        out = np.zeros(4, np.float32)
        run(reduce_k, [x, out, fn, 1, False, (4,)])
        np.testing.assert_array_equal(np.isnan(out), [False, True, True, False])
    for fn in ("argmax", "argmin"):
        out = np.zeros(4, np.int32)
        run(reduce_k, [x, out, fn, 1, False, (4,)])
        np.testing.assert_array_equal(out, getattr(np, fn)(x, axis=1))


@ct.kernel
def bool_sum(x, out):
    t = ct.load(x, (0,), (8,))
    s = ct.sum(t)
    assert s.dtype == ct.int32
    ct.store(out, (0,), s)


def test_sum_of_bool_counts():
    x = np.array([1, 0, 1, 1, 0, 0, 1, 1], np.bool_)
    out = np.zeros(1, np.int32)
    run(bool_sum, [x, out])
    assert out[0] == 5


@ct.kernel
def int8_sum_wraps(x, out):
    ct.store(out, (0,), ct.sum(ct.load(x, (0,), (8,))))


def test_int8_sum_wraps():
    x = np.full(8, 100, np.int8)
    out = np.zeros(1, np.int8)
    run(int8_sum_wraps, [x, out])
    assert out[0] == np.int8(np.int64(800).astype(np.int8))


@ct.kernel
def sum_all(x, out, N: ct.Constant[int]):
    ct.store(out, (0,), ct.sum(ct.load(x, (0,), (N,))))


@ct.kernel
def max_all(x, out, N: ct.Constant[int]):
    ct.store(out, (0,), ct.max(ct.load(x, (0,), (N,))))


@pytest.mark.parametrize("n", [1, 8, 4096])
def test_signed_zeros_in_sum_and_max(n):
    """A sum of -0.0 is +0.0 (NumPy's sums start from +0.0); a max of -0.0 stays -0.0."""
    x = np.full(n, -0.0, np.float32)
    out = np.ones(1, np.float32)
    run(sum_all, [x, out, n])
    assert out[0] == 0 and not np.signbit(out[0]) and not np.signbit(np.sum(x))
    run(max_all, [x, out, n])
    assert out[0] == 0 and np.signbit(out[0]) and np.signbit(np.max(x))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [8, 4096])
def test_signed_zeros_in_sum_and_max_on_the_gpu(n):
    """The same on the GPU, where the comparison with the interpreter does not see signs."""
    torch = pytest.importorskip("torch")
    x = torch.full((n,), -0.0, device="cuda")
    out = torch.ones(1, device="cuda")
    ct.launch(None, (1,), sum_all, (x, out, n))
    torch.cuda.synchronize()
    assert out.item() == 0 and not torch.signbit(out).item()
    ct.launch(None, (1,), max_all, (x, out, n))
    torch.cuda.synchronize()
    assert out.item() == 0 and torch.signbit(out).item()


@ct.kernel
def block_reductions(x, out, N: ct.Constant[int]):
    t = ct.load(x, (0,), (N,))
    mean = ct.sum(t) / N
    d = t - mean
    ct.store(out, (0,), mean)
    ct.store(out, (1,), ct.sum(d * d) / N)  # the same reducer again
    ct.store(out, (2,), ct.max(t))
    acc = ct.full((), 0.0, ct.float32)
    for i in range(4):  # one call site, run four times
        acc = acc + ct.max(ct.load(x, (i,), (N // 4,)) * (i + 1))
    ct.store(out, (3,), acc)


def test_block_reductions_in_sequence_and_in_a_loop():
    """Reductions over a 16-warp block: each call site has its own partials in
    shared memory; one inside a loop also waits before they are rewritten."""
    n = 4096
    x = RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(4, np.float32)
    run(block_reductions, [x, out, n])
    x64 = x.astype(np.float64)
    want = [x64.mean(), x64.var(), x64.max(),
            sum((i + 1) * x64[i * n // 4:(i + 1) * n // 4].max() for i in range(4))]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    src = ct.compile(block_reductions, (x, out, n), arch="sm_90").source
    sites = re.findall(r"block_allreduce<[^;]*, 512, (\d+), (true|false)>", src)
    assert sites == [("0", "false"), ("1", "false"), ("2", "false"), ("3", "true")], sites


# --- compile-time shape errors ------------------------------------------------------------------
@ct.kernel
def not_pow2(x):
    t = ct.load(x, (0, 0), (4, 6))  # NOT-POW2


@ct.kernel
def not_pow2_arange(x):
    t = ct.arange(12, dtype=ct.int32)  # NOT-POW2-AR


@ct.kernel
def not_pow2_zeros(x):
    t = ct.zeros((3,), ct.float32)  # NOT-POW2-Z


@ct.kernel
def bad_reshape(x):
    t = ct.reshape(ct.zeros((4, 4), ct.float32), (8, 4))  # BAD-RESHAPE


@ct.kernel
def bad_axis(x):
    s = ct.sum(ct.zeros((4, 4), ct.float32), axis=2)  # BAD-AXIS


@ct.kernel
def bad_shape_arg(x):
    t = ct.load(x, (0, 0), (4,))  # BAD-NDIM


@ct.kernel
def runtime_shape(x, n):
    t = ct.load(x, (0,), (n,))  # RT-SHAPE


@pytest.mark.parametrize("kernel,args,cls,message,marker", [
    (not_pow2, [np.zeros((8, 8))], ct.TileValueError,
     'Invalid argument "shape" of load(): tile dimensions must be powers of two, got (4, 6)',
     "NOT-POW2"),
    (not_pow2_arange, [np.zeros(1)], ct.TileValueError,
     'Invalid argument "size" of arange(): tile dimensions must be powers of two, got 12',
     "NOT-POW2-AR"),
    (not_pow2_zeros, [np.zeros(1)], ct.TileValueError,
     'Invalid argument "shape" of zeros(): tile dimensions must be powers of two, got (3,)',
     "NOT-POW2-Z"),
    (bad_reshape, [np.zeros(1)], ct.TileValueError,
     "Cannot reshape a tile of shape (4, 4) (16 elements) to (8, 4)", "BAD-RESHAPE"),
    (bad_axis, [np.zeros(1)], ct.TileValueError,
     'Invalid argument "axis" of sum(): axis 2 is out of range for a tile with 2 dimension(s)',
     "BAD-AXIS"),
    (bad_shape_arg, [np.zeros((8, 8))], ct.TileValueError,
     'Invalid argument "shape" of load(): expected a tuple of 2 ints, got (4,)', "BAD-NDIM"),
    (runtime_shape, [np.zeros(8), 4], ct.TileTypeError,
     'Invalid argument "shape" of load(): expected a tuple of constant ints, got a tuple '
     "(an int32 scalar,)", "RT-SHAPE"),
], ids=lambda v: v if isinstance(v, str) and v.isupper() else None)
def test_shape_errors(kernel, args, cls, message, marker):
    expect_error(kernel, args, cls, message, marker)


@ct.kernel
def argmax_two_axes(x, out):
    ct.store(out, (0,), ct.argmax(ct.load(x, (0, 0), (2, 2)), axis=(0, 1)).reshape((1,)))


def test_argmax_takes_one_axis():
    with pytest.raises(ct.TileTypeError) as e:
        ct.launch(None, (1,), argmax_two_axes, (np.zeros((2, 2), np.float32),
                                                np.zeros(1, np.int32)))
    assert str(e.value).startswith('Invalid argument "axis" of argmax(): expected a constant '
                                   'int, got a tuple')

