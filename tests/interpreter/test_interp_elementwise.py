"""unary / binary / compare / where against float64 NumPy and hand-computed cases."""
import math

import ml_dtypes
import numpy as np
import pytest

from tilecore.ir.ops import BINARY_FNS, COMPARE_FNS, UNARY_FNS
from tilecore.language import dtypes as dt

from interp_builder import eval_op, tile

RNG_SEED = 1234


def unary(fn, x, dtype):
    res_dtype = dt.bool_ if fn == "isnan" else dtype
    return eval_op("unary", [(x, dtype)], tile(res_dtype, *x.shape), fn=fn)


def binary(fn, a, b, dtype):
    return eval_op("binary", [(a, dtype), (b, dtype)], tile(dtype, *a.shape), fn=fn)


def compare(fn, a, b, dtype):
    return eval_op("compare", [(a, dtype), (b, dtype)], tile(dt.bool_, *a.shape), fn=fn)


_UNARY_REF = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil, "isnan": np.isnan,
}
_POSITIVE_ONLY = ("log", "log2", "sqrt", "rsqrt")


@pytest.mark.parametrize("fn", [f for f in UNARY_FNS if f != "invert"])
@pytest.mark.parametrize("dtype, rtol", [(dt.float32, 3e-6), (dt.float64, 1e-14),
                                         (dt.float16, 1e-3), (dt.bfloat16, 8e-3)])
def test_float_unary_matches_float64(fn, dtype, rtol):
    rng = np.random.default_rng(RNG_SEED)
    x64 = rng.uniform(-3, 3, 64)
    if fn in _POSITIVE_ONLY:
        x64 = np.abs(x64) + 0.01
    x = x64.astype(dtype.numpy_dtype)
    got = unary(fn, x, dtype)
    ref = _UNARY_REF[fn](x.astype(np.float64))
    if fn == "isnan":
        np.testing.assert_array_equal(got, ref)
        return
    assert got.dtype == dtype.numpy_dtype
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=rtol)


def test_unary_special_values():
    x = np.array([0.0, -1.0, np.inf, np.nan], np.float32)
    with np.errstate(all="raise"):  # the interpreter must not warn or raise
        log = unary("log", x, dt.float32)
        sqrt = unary("sqrt", x, dt.float32)
        rsqrt = unary("rsqrt", x, dt.float32)
    assert log[0] == -np.inf and np.isnan(log[1]) and log[2] == np.inf and np.isnan(log[3])
    assert np.isnan(sqrt[1]) and sqrt[2] == np.inf
    assert rsqrt[0] == np.inf and rsqrt[2] == 0
    assert unary("isnan", x, dt.float32).tolist() == [False, False, False, True]


def test_integer_unary_wraps():
    assert unary("neg", np.array([1, 0, 255], np.uint8), dt.uint8).tolist() == [255, 0, 1]
    assert unary("neg", np.array([-128, 5], np.int8), dt.int8).tolist() == [-128, -5]
    assert unary("abs", np.array([-128, -5], np.int8), dt.int8).tolist() == [-128, 5]
    assert unary("invert", np.array([0, 5, -1], np.int32), dt.int32).tolist() == [-1, -6, 0]
    assert unary("invert", np.array([0, 0xF0], np.uint8), dt.uint8).tolist() == [255, 0x0F]
    assert unary("invert", np.array([True, False]), dt.bool_).tolist() == [False, True]


_FLOAT_BINARY_REF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "atan2": np.arctan2,
    "minimum": np.minimum, "maximum": np.maximum,
}


@pytest.mark.parametrize("fn", sorted(_FLOAT_BINARY_REF))
@pytest.mark.parametrize("dtype, rtol", [(dt.float32, 3e-6), (dt.float64, 1e-14)])
def test_float_binary_matches_float64(fn, dtype, rtol):
    rng = np.random.default_rng(RNG_SEED)
    a = rng.uniform(-4, 4, 64).astype(dtype.numpy_dtype)
    b = rng.uniform(0.5, 3, 64).astype(dtype.numpy_dtype) * rng.choice([-1, 1], 64)
    if fn == "pow":
        a = np.abs(a)
    got = binary(fn, a, b, dtype)
    ref = _FLOAT_BINARY_REF[fn](a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == dtype.numpy_dtype
    if fn == "floordiv":  # exact results; compare as integers-valued floats
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=rtol, atol=rtol)


def test_float_floordiv_mod_follow_python():
    pairs = [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (1e-3, -1.0), (-0.0, 3.0)]
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    fd = binary("floordiv", a, b, dt.float64)
    md = binary("mod", a, b, dt.float64)
    assert fd.tolist() == [x // y for x, y in pairs]
    got_mod = md.tolist()
    for (x, y), m in zip(pairs, got_mod):
        assert m == x % y and math.copysign(1, m) == math.copysign(1, x % y)


@pytest.mark.parametrize("dtype", [dt.int8, dt.int32, dt.int64])
def test_int_floordiv_mod_follow_python(dtype):
    vals = [-7, -6, -1, 0, 1, 6, 7, 100]
    divs = [-3, -2, -1, 1, 2, 3]
    pairs = [(a, b) for a in vals for b in divs]
    a = np.array([p[0] for p in pairs], dtype.numpy_dtype)
    b = np.array([p[1] for p in pairs], dtype.numpy_dtype)
    assert binary("floordiv", a, b, dtype).tolist() == [x // y for x, y in pairs]
    assert binary("mod", a, b, dtype).tolist() == [x % y for x, y in pairs]


def test_int_division_by_zero_and_overflow_never_raise():
    a = np.array([5, -5, -2**31, -2**31], np.int32)
    b = np.array([0, 0, -1, 0], np.int32)
    with np.errstate(all="raise"):
        fd = binary("floordiv", a, b, dt.int32)
        md = binary("mod", a, b, dt.int32)
    assert fd.tolist() == [0, 0, -2**31, 0]  # int min // -1 wraps
    assert md.tolist() == [0, 0, 0, 0]


def test_int_arithmetic_wraps():
    assert binary("add", np.array([100, -100], np.int8), np.array([100, -100], np.int8),
                  dt.int8).tolist() == [-56, 56]
    assert binary("sub", np.array([0], np.uint8), np.array([1], np.uint8),
                  dt.uint8).tolist() == [255]
    assert binary("mul", np.array([2**20], np.int32), np.array([2**12], np.int32),
                  dt.int32).tolist() == [0]
    assert binary("pow", np.array([3, 2, 2, 7], np.int32), np.array([4, 31, 32, 0], np.int32),
                  dt.int32).tolist() == [81, -2**31, 0, 1]
    u = np.array([2**64 - 1], np.uint64)
    assert binary("add", u, np.array([2], np.uint64), dt.uint64).tolist() == [1]


def test_bitwise_and_shifts():
    a = np.array([0b1100, 1, 1, -8, -8, 8, -1], np.int32)
    b = np.array([0b1010, 31, 32, 1, 40, 40, -3], np.int32)
    assert binary("bitand", a[:1], b[:1], dt.int32).tolist() == [0b1000]
    assert binary("bitor", a[:1], b[:1], dt.int32).tolist() == [0b1110]
    assert binary("bitxor", a[:1], b[:1], dt.int32).tolist() == [0b0110]
    with np.errstate(all="raise"):
        shl = binary("lshift", a, b, dt.int32).tolist()
        shr = binary("rshift", a, b, dt.int32).tolist()
    assert shl[:4] == [0b1100 << 0b1010, -2**31, 0, -16]
    assert shl[6] == 0  # negative count is out of range
    assert shr[3:] == [-4, -1, 0, -1]  # arithmetic, sign fill past the width
    u = np.array([2**31, 2**31, 5], np.uint32)
    assert binary("rshift", u, np.array([31, 32, 1], np.uint32), dt.uint32).tolist() == [1, 0, 2]
    assert binary("bitxor", np.array([True, True]), np.array([True, False]),
                  dt.bool_).tolist() == [False, True]


def test_minimum_maximum_propagate_nan():
    a = np.array([1.0, np.nan, 3.0, -0.5], np.float32)
    b = np.array([np.nan, 2.0, 1.0, -1.5], np.float32)
    mn = binary("minimum", a, b, dt.float32)
    mx = binary("maximum", a, b, dt.float32)
    assert np.isnan(mn[:2]).all() and np.isnan(mx[:2]).all()
    assert mn[2:].tolist() == [1.0, -1.5] and mx[2:].tolist() == [3.0, -0.5]


def test_bfloat16_and_float16_arithmetic_rounds_once_to_nearest_even():
    bf = ml_dtypes.bfloat16
    a = np.array([1.0, 1 + 2**-7, 3.0], bf)
    b = np.array([2**-8, 2**-8, 5.0], bf)
    got = binary("add", a, b, dt.bfloat16)
    assert got.dtype == bf
    # 1 + 2^-8 ties to even (1.0); 1 + 3*2^-8 ties to even (1 + 2^-6); 8 exact.
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2**-6, 8.0]
    h = binary("add", np.array([2048, 2050], np.float16), np.array([1, 1], np.float16),
               dt.float16)
    assert h.tolist() == [2048.0, 2052.0]


@pytest.mark.parametrize("dtype", [dt.bfloat16, dt.float16])
@pytest.mark.parametrize("fn", ["add", "sub", "mul"])
def test_narrow_float_arithmetic_random_matches_exact_rounding(dtype, fn):
    rng = np.random.default_rng(RNG_SEED)
    a = rng.uniform(-8, 8, 256).astype(dtype.numpy_dtype)
    b = rng.uniform(-8, 8, 256).astype(dtype.numpy_dtype)
    got = binary(fn, a, b, dtype)
    # The float64 result is exact for these operands; round it once (via an exact float32).
    exact = _FLOAT_BINARY_REF[fn](a.astype(np.float64), b.astype(np.float64))
    assert np.array_equal(exact.astype(np.float32).astype(np.float64), exact)
    ref = exact.astype(np.float32).astype(dtype.numpy_dtype)
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


@pytest.mark.parametrize("fn", COMPARE_FNS)
@pytest.mark.parametrize("dtype", [dt.float32, dt.bfloat16, dt.int16, dt.uint32, dt.bool_])
def test_compare_matches_numpy(fn, dtype):
    rng = np.random.default_rng(RNG_SEED)
    if dtype.is_bool:
        a, b = rng.integers(0, 2, 32).astype(bool), rng.integers(0, 2, 32).astype(bool)
    elif dtype.is_float:
        a = rng.integers(-3, 4, 32).astype(dtype.numpy_dtype)
        b = rng.integers(-3, 4, 32).astype(dtype.numpy_dtype)
        a[0] = b[1] = np.nan
    else:
        a = rng.integers(0, 5, 32).astype(dtype.numpy_dtype)
        b = rng.integers(0, 5, 32).astype(dtype.numpy_dtype)
    ops = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
    ref = ops[fn](a.astype(np.float64), b.astype(np.float64))
    got = compare(fn, a, b, dtype)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ref)


def test_where_selects_and_keeps_dtype():
    cond = np.array([[True, False], [False, True]])
    a = np.array([[1, 2], [3, 4]], ml_dtypes.bfloat16)
    b = np.array([[-1, -2], [-3, -4]], ml_dtypes.bfloat16)
    got = eval_op("where", [(cond, dt.bool_), (a, dt.bfloat16), (b, dt.bfloat16)],
                  tile(dt.bfloat16, 2, 2))
    assert got.dtype == ml_dtypes.bfloat16
    assert got.astype(np.float64).tolist() == [[1, -2], [-3, 4]]


def test_scalar_operands_are_zero_d():
    got = binary("add", np.array(2, np.int32), np.array(3, np.int32), dt.int32)
    assert isinstance(got, np.ndarray) and got.shape == () and got == 5
    lt = compare("lt", np.array(2.0, np.float32), np.array(3.0, np.float32), dt.float32)
    assert isinstance(lt, np.ndarray) and lt.dtype == np.bool_ and lt


def test_binary_fns_all_tested():
    tested = set(_FLOAT_BINARY_REF) | {"bitand", "bitor", "bitxor", "lshift", "rshift"}
    assert tested == set(BINARY_FNS)
