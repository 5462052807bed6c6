"""Arithmetic, comparison and bitwise operators (with broadcasting and
scalars), the math functions, where/minimum/maximum and astype, over several
dtypes, compared with NumPy (float64 references where rounding matters)."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, expect_error, run

BF16 = ml_dtypes.bfloat16
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@ct.kernel
def binop(x, y, out, OP: ct.Constant[str]):
    a = ct.load(x, (0, 0), (4, 8))
    b = ct.load(y, (0,), (8,))             # broadcast (8,) against (4, 8)
    if OP == "+":
        r = a + b
    elif OP == "-":
        r = a - b
    elif OP == "*":
        r = a * b
    elif OP == "/":
        r = a / b
    elif OP == "//":
        r = a // b
    elif OP == "%":
        r = a % b
    elif OP == "**":
        r = a ** b
    elif OP == "&":
        r = a & b
    elif OP == "|":
        r = a | b
    elif OP == "^":
        r = a ^ b
    elif OP == "<<":
        r = a << b
    elif OP == ">>":
        r = a >> b
    elif OP == "minimum":
        r = ct.minimum(a, b)
    elif OP == "maximum":
        r = ct.maximum(a, b)
    elif OP == "pow":
        r = ct.pow(a, b)
    elif OP == "atan2":
        r = ct.atan2(a, b)
    ct.store(out, (0, 0), r.astype(out.dtype))


def _np_binop(op, a, b):
    import operator as o
    return {"+": o.add, "-": o.sub, "*": o.mul, "/": o.truediv, "//": o.floordiv, "%": o.mod,
            "**": o.pow, "&": o.and_, "|": o.or_, "^": o.xor, "<<": o.lshift, ">>": o.rshift,
            "minimum": np.minimum, "maximum": np.maximum, "pow": np.power,
            "atan2": np.arctan2}[op](a, b)


def _operands(dtype, op):
    if np.dtype(dtype).kind == "f" or dtype is BF16:
        a = RNG.uniform(-4, 4, (4, 8))
        b = RNG.uniform(0.5, 3, 8) * RNG.choice([-1, 1], 8)
        if op in ("**", "pow"):
            a = np.abs(a) + 0.1
        a[0, 0] = np.nan if op in ("minimum", "maximum", "+") else a[0, 0]
        return a.astype(dtype), b.astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    a = RNG.integers(lo, hi, (4, 8), endpoint=True).astype(dtype)
    b = RNG.integers(max(lo, 1) if op in ("//", "%") else lo, hi, 8, endpoint=True).astype(dtype)
    if op in ("//", "%") and info.min < 0:
        b = np.where(b == 0, 3, b * RNG.choice([-1, 1], 8)).astype(dtype)
    if op in ("<<", ">>"):
        b = RNG.integers(0, 8, 8).astype(dtype)
    if op in ("**", "pow"):
        a = RNG.integers(0, 4, (4, 8)).astype(dtype)
        b = RNG.integers(0, 4, 8).astype(dtype)
    return a, b


FLOAT_OPS = ["+", "-", "*", "/", "//", "%", "**", "minimum", "maximum", "pow", "atan2"]
INT_OPS = ["+", "-", "*", "//", "%", "**", "&", "|", "^", "<<", ">>", "minimum", "maximum"]


@pytest.mark.parametrize("op", FLOAT_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_float_binops(op, dtype):
    a, b = _operands(dtype, op)
    out = np.zeros((4, 8), dtype)
    run(binop, [a, b, out, op])
    with np.errstate(all="ignore"):
        want = _np_binop(op, a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    if dtype in (np.float32, np.float64):
        np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64),
                                   rtol=1e-6 if dtype == np.float32 else 1e-13, equal_nan=True)
    else:
        # computed in float32 then rounded: at most one ulp from the float64 reference
        ulp = 2.0 ** -10 if dtype == np.float16 else 2.0 ** -7
        got, ref = out.astype(np.float64), want.astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        ok = np.isnan(ref) | (np.abs(got - ref) <= ulp * np.maximum(np.abs(ref), 1e-3) * 1.01)
        assert ok.all(), (got[~ok], ref[~ok])


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32, np.int64])
def test_int_binops(op, dtype):
    a, b = _operands(dtype, op)
    out = np.zeros((4, 8), dtype)
    run(binop, [a, b, out, op])
    with np.errstate(all="ignore"):
        want = _np_binop(op, a, b).astype(dtype)
    np.testing.assert_array_equal(out, want)


def test_int_division_gives_float32():
    a = np.array([[7] * 8] * 4, np.int16)
    b = np.arange(1, 9, dtype=np.int16)
    out = np.zeros((4, 8), np.float32)
    run(binop, [a, b, out, "/"])
    np.testing.assert_array_equal(out, np.broadcast_to(np.float32(7) / b.astype(np.float32),
                                                       (4, 8)))


def test_int8_wraps():
    a = np.full((4, 8), 120, np.int8)
    b = np.full(8, 10, np.int8)
    out = np.zeros((4, 8), np.int8)
    run(binop, [a, b, out, "+"])
    np.testing.assert_array_equal(out, -126)
    run(binop, [a, b, out, "*"])
    np.testing.assert_array_equal(out, np.int8(np.int32(1200).astype(np.int8)))


def test_bool_bitwise():
    a = RNG.integers(0, 2, (4, 8)).astype(np.bool_)
    b = RNG.integers(0, 2, 8).astype(np.bool_)
    for op in ("&", "|", "^"):
        out = np.zeros((4, 8), np.bool_)
        run(binop, [a, b, out, op])
        np.testing.assert_array_equal(out, _np_binop(op, a, b))


@ct.kernel
def compare(x, y, out, OP: ct.Constant[str]):
    a = ct.load(x, (0, 0), (4, 8))
    b = ct.load(y, (0, 0), (4, 1))           # broadcast (4, 1)
    if OP == "==":
        r = a == b
    elif OP == "!=":
        r = a != b
    elif OP == "<":
        r = a < b
    elif OP == "<=":
        r = a <= b
    elif OP == ">":
        r = a > b
    elif OP == ">=":
        r = ct.greater_equal(a, b)
    else:
        r = (a < 2) & (1 <= a)               # scalars on either side
    ct.store(out, (0, 0), r)


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "chain"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8, BF16])
def test_comparisons(op, dtype):
    a = RNG.integers(0, 4, (4, 8)).astype(dtype)
    b = RNG.integers(0, 4, (4, 1)).astype(dtype)
    if dtype in (np.float32, BF16):
        a[1, 1] = np.nan
    out = np.zeros((4, 8), np.bool_)
    run(compare, [a, b, out, op])
    import operator as o
    fn = {"==": o.eq, "!=": o.ne, "<": o.lt, "<=": o.le, ">": o.gt, ">=": o.ge}.get(op)
    want = fn(a, b) if fn else (a < 2) & (a >= 1)
    np.testing.assert_array_equal(out, want)


@ct.kernel
def scalars_mix(x, out, s):
    a = ct.load(x, (0,), (8,))
    r = (2 * a + s) * 0.5 - 1 / (a + 1) + (a > 3) + -a + abs(a) + (+a)
    ct.store(out, (0,), r)


def test_scalars_and_unary_operators():
    x = (np.arange(8) - 3).astype(np.float32)
    out = np.zeros(8, np.float32)
    run(scalars_mix, [x, out, 3.0])
    x64 = x.astype(np.float64)
    want = (2 * x64 + 3) * 0.5 - 1 / (x64 + 1) + (x64 > 3) - x64 + np.abs(x64) + x64
    np.testing.assert_allclose(out, want, rtol=1e-6)


@ct.kernel
def int_unary(x, out):
    a = ct.load(x, (0,), (8,))
    ct.store(out, (0,), ~a + (-a) * 2 + ct.abs(a) + ct.bitwise_not(ct.negative(a)))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32])
def test_int_unary(dtype):
    x = RNG.integers(0, 50, 8).astype(dtype)
    out = np.zeros(8, dtype)
    run(int_unary, [x, out])
    with np.errstate(all="ignore"):
        want = (~x + (-x) * dtype(2) + np.abs(x) + ~(-x)).astype(dtype)
    np.testing.assert_array_equal(out, want)


MATH = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh",
        "tanh", "floor", "ceil", "abs"]
NP_MATH = {"rsqrt": lambda v: 1 / np.sqrt(v)}


@ct.kernel
def math_fn(x, out, FN: ct.Constant[str]):
    a = ct.load(x, (0,), (16,))
    if FN == "exp":
        r = ct.exp(a)
    elif FN == "exp2":
        r = ct.exp2(a)
    elif FN == "log":
        r = ct.log(a)
    elif FN == "log2":
        r = ct.log2(a)
    elif FN == "sqrt":
        r = ct.sqrt(a)
    elif FN == "rsqrt":
        r = ct.rsqrt(a)
    elif FN == "sin":
        r = ct.sin(a)
    elif FN == "cos":
        r = ct.cos(a)
    elif FN == "tan":
        r = ct.tan(a)
    elif FN == "sinh":
        r = ct.sinh(a)
    elif FN == "cosh":
        r = ct.cosh(a)
    elif FN == "tanh":
        r = ct.tanh(a)
    elif FN == "floor":
        r = ct.floor(a)
    elif FN == "ceil":
        r = ct.ceil(a)
    else:
        r = ct.abs(a)
    ct.store(out, (0,), r.astype(out.dtype))


@pytest.mark.parametrize("fn", MATH)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_math(fn, dtype):
    x = RNG.uniform(0.1, 3, 16)
    if fn in ("sin", "cos", "tan", "floor", "ceil", "abs", "tanh", "sinh"):
        x = x * RNG.choice([-1, 1], 16)
    x[3] = np.nan
    x = x.astype(dtype)
    out = np.zeros(16, dtype)
    run(math_fn, [x, out, fn])
    ref = NP_MATH.get(fn, getattr(np, fn, None))(x.astype(np.float64)).astype(dtype)
    rtol = {np.float32: 2e-6, np.float64: 1e-13}.get(dtype, 1e-2)
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_math_on_ints_gives_float32(dtype):
    x = np.arange(1, 17).astype(dtype)
    out = np.zeros(16, np.float32)
    run(math_fn, [x, out, "sqrt"])
    np.testing.assert_allclose(out, np.sqrt(x.astype(np.float64)), rtol=1e-6)


@ct.kernel
def nan_ops(x, out_b, out_f):
    a = ct.load(x, (0,), (8,))
    ct.store(out_b, (0,), ct.isnan(a))
    ct.store(out_f, (0,), ct.where(ct.isnan(a), 0.0, ct.maximum(a, 1.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_isnan_where_maximum(dtype):
    x = np.array([1, np.nan, -2, 5, np.nan, 0, -0.0, np.inf]).astype(dtype)
    ob, of = np.zeros(8, np.bool_), np.zeros(8, dtype)
    run(nan_ops, [x, ob, of])
    np.testing.assert_array_equal(ob, np.isnan(x))
    np.testing.assert_array_equal(of, np.where(np.isnan(x), 0, np.maximum(x, 1)).astype(dtype))


@ct.kernel
def where_k(c, x, out):
    cond = ct.load(c, (0, 0), (4, 1))
    a = ct.load(x, (0, 0), (4, 8))
    r = ct.where(cond, a, 7) + ct.where(a > 0, 1, 2) + ct.where(cond, 0.5, 0.25)
    ct.store(out, (0, 0), r)


def test_where_broadcast_and_scalars():
    c = np.array([[True], [False], [True], [False]])
    x = RNG.integers(-3, 3, (4, 8)).astype(np.int32)
    out = np.zeros((4, 8), np.float32)
    run(where_k, [c, x, out])
    want = np.where(c, x, 7) + np.where(x > 0, 1, 2) + np.where(c, 0.5, 0.25)
    np.testing.assert_array_equal(out, want)


@ct.kernel
def minmax_int(x, out):
    a = ct.load(x, (0,), (8,))
    ct.store(out, (0,), ct.minimum(a, 3) + ct.maximum(a, -2) + min(a, 1) + max(2, a, 0))


def test_minimum_maximum_scalars():
    x = np.arange(-4, 4, dtype=np.int16)
    out = np.zeros(8, np.int16)
    run(minmax_int, [x, out])
    want = np.minimum(x, 3) + np.maximum(x, -2) + np.minimum(x, 1) + np.maximum(np.maximum(2, x), 0)
    np.testing.assert_array_equal(out, want)


@ct.kernel
def convert(x, out):
    a = ct.load(x, (0,), (8,))
    r = ct.astype(a, out.dtype)
    r2 = a.astype(out.dtype)
    assert r2.dtype == r.dtype and r2.shape == r.shape
    ct.store(out, (0,), r)


@pytest.mark.parametrize("src,dst", [
    (np.float32, np.int32), (np.float64, np.float16), (np.float32, BF16), (np.int32, np.int8),
    (np.int32, np.uint8), (np.float32, np.bool_), (np.bool_, np.float32), (np.uint8, np.float16),
    (np.int64, np.float32), (BF16, np.float32), (np.float16, np.int16)])
def test_astype(src, dst):
    if np.dtype(src).kind == "f" or src is BF16:
        x = np.array([1.5, -2.7, 0.0, 300.3, -0.4, 7.9999, 1e-3, 65.5]).astype(src)
    elif src is np.bool_:
        x = np.array([1, 0, 1, 1, 0, 0, 1, 0], np.bool_)
    else:
        x = np.array([1, -2, 0, 300, 255, 256, 70000, -129]).astype(src)
    out = np.zeros(8, dst)
    if dst is np.bool_:
        out = np.zeros(8, np.bool_)
        run(convert, [x, out])
        np.testing.assert_array_equal(out, x != 0)
        return
    run(convert, [x, out])
    if np.dtype(dst).kind in "iu" and np.dtype(src).kind == "f":
        want = np.trunc(x.astype(np.float64)).astype(np.int64).astype(dst)
    else:
        want = x.astype(dst)
    np.testing.assert_array_equal(out, want)


def test_bfloat16_float16_rounding():
    # float32 values halfway between bf16/f16 neighbours round to even, as ml_dtypes does
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, 65520, -1e-8, 3.14159,
                  1e38], np.float32)
    for dst in (BF16, np.float16):
        out = np.zeros(8, dst)
        run(convert, [x, out])
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(out.astype(np.float32), x.astype(dst).astype(np.float32))


@ct.kernel
def bf16_add(x, y, out):
    ct.store(out, (0,), ct.load(x, (0,), (8,)) + ct.load(y, (0,), (8,)))


def test_bfloat16_add_rounds_once():
    x = np.array([1, 1, 256, 3, -1, 0.1, 100, 1e-3], BF16)
    y = np.array([2**-8, 3 * 2**-8, 1, 2**-7, 2**-9, 0.2, -0.5, 1], BF16)
    out = np.zeros(8, BF16)
    run(bf16_add, [x, y, out])
    want = (x.astype(np.float64) + y.astype(np.float64)).astype(np.float32).astype(BF16)
    np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


# --- compile-time errors of element-wise code -------------------------------------------------------
@ct.kernel
def bad_promotion(x, y, out):
    r = ct.load(x, (0,), (4,)) + ct.load(y, (0,), (4,))  # BAD-PROMO


def test_err_promotion_rejected():
    expect_error(bad_promotion, [np.zeros(4, np.uint8), np.zeros(4, np.int8), np.zeros(4)],
                 ct.TileTypeError,
                 "Invalid operands of '+': Implicit promotion between uint8 and int8 is not "
                 "supported; convert one operand explicitly with astype()", "BAD-PROMO")


@ct.kernel
def bad_broadcast(x, out):
    r = ct.load(x, (0, 0), (4, 8)) * ct.load(x, (0, 0), (2, 8))  # BAD-BCAST


def test_broadcast_mismatch():
    expect_error(bad_broadcast, [np.zeros((8, 8)), np.zeros(4)], ct.TileValueError,
                 "Shapes (4, 8) and (2, 8) of the operands cannot be broadcast together "
                 "(dimension 4 vs 2)", "BAD-BCAST")


@ct.kernel
def bad_bitwise(x, out):
    r = ct.load(x, (0,), (4,)) & 1  # BAD-BITS


def test_bitwise_on_floats():
    expect_error(bad_bitwise, [np.zeros(4, np.float32), np.zeros(4)], ct.TileTypeError,
                 "Operator '&' needs integer or bool operands, got a tile of float32 with shape "
                 "(4,) and a loosely typed constant 1", "BAD-BITS")


@ct.kernel
def bad_store_dtype(x, out):
    ct.store(out, (0,), ct.load(x, (0,), (4,)))  # BAD-STORE


def test_store_dtype_mismatch():
    expect_error(bad_store_dtype, [np.zeros(4, np.float32), np.zeros(4)], ct.TileTypeError,
                 'Invalid argument "tile" of store(): its dtype float32 differs from the '
                 "array's float64; convert it with astype()", "BAD-STORE")


@ct.kernel
def where_constant_condition(x, out, FLAG: ct.Constant[bool]):
    t = ct.load(x, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=(t / ct.where(FLAG, ct.float32(2.0), 3.0)).astype(out.dtype))


def test_where_with_a_constant_condition_types_like_a_run_time_one():
    """ct.where(False, float32, 3.0) is a float32 tile, so float16 / it computes in float32
    (a fuzzer finding: the constant condition used to return the loose 3.0)."""
    x = np.array([1, 2, 3, 65504], np.float16)
    for flag, divisor in ((True, 2.0), (False, 3.0)):
        out = np.zeros(4, np.float32)
        ct.launch(None, (1,), where_constant_condition, (x, out, flag))
        np.testing.assert_array_equal(out, x.astype(np.float32) / np.float32(divisor))
