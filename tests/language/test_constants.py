"""Loosely and strictly typed constants and constant embedding (seed 000)."""
from typing import Annotated

import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def check_const(out, WANT_DTYPE: ct.Constant, WANT: ct.Constant, WHICH: ct.Constant[int]):
    if WHICH == 0:
        v = ct.int16(5) + 2
    elif WHICH == 1:
        v = ct.int16(5) + ct.int32(7)
    elif WHICH == 2:
        v = 5 + 7
    elif WHICH == 3:
        v = 5 + 3.0
    elif WHICH == 4:
        v = 2 + ct.int16(5)
    elif WHICH == 5:
        v = ct.int8(100) + 100          # strict int8 wraps
    elif WHICH == 6:
        v = ct.float16(1.0) + 1e-4      # strict float16 rounds
    else:
        v = ct.uint8(3) * 2.5           # float constant: higher category -> float32
    # Compile-time checks: the value is a constant of the expected dtype and value.
    assert v.dtype == WANT_DTYPE
    assert v == WANT
    ct.store(out, (0,), ct.full((1,), v, ct.float64))


@pytest.mark.parametrize("which,dtype,want", [
    (0, ct.int16, 7), (1, ct.int32, 12), (2, ct.int32, 12), (3, ct.float32, 8.0),
    (4, ct.int16, 7), (5, ct.int8, -56), (6, ct.float16, 1.0), (7, ct.float32, 7.5)])
def test_constant_typing(which, dtype, want):
    out = np.zeros(1)
    ct.launch(None, (1,), check_const, (out, dtype, want, which))
    assert out[0] == want


@ct.kernel
def loose_vs_strict(out):
    # 5 + 7 stays loose: usable where a compile-time int is needed
    t = ct.zeros((5 + 3,), ct.float32)
    big = 2**40 * 4 // 2**41          # infinite-precision integer arithmetic: 2
    ct.store(out, (0,), t + big)


def test_loose_integer_arithmetic_is_exact():
    out = np.zeros(8, np.float32)
    ct.launch(None, (1,), loose_vs_strict, (out,))
    np.testing.assert_array_equal(out, 2.0)


@ct.kernel
def with_tile(x8, xi, out8, outf, outu):
    a = ct.load(x8, (0,), (4,))
    b = ct.load(xi, (0,), (4,))
    r8 = a + 1                        # loose int with int8 tile -> int8
    rf = b * 0.5                      # loose float with int tile -> float32
    ru = a.astype(ct.uint16) + 65000  # loose int, same category -> uint16 (the tile wraps)
    assert r8.dtype == ct.int8 and rf.dtype == ct.float32 and ru.dtype == ct.uint16
    ct.store(out8, (0,), r8)
    ct.store(outf, (0,), rf)
    ct.store(outu, (0,), ru)


def test_loose_constant_with_tiles():
    x8 = np.array([127, -128, 0, 5], np.int8)
    xi = np.array([1, 2, 3, -7], np.int32)
    out8, outf, outu = np.zeros(4, np.int8), np.zeros(4, np.float32), np.zeros(4, np.uint16)
    ct.launch(None, (1,), with_tile, (x8, xi, out8, outf, outu))
    np.testing.assert_array_equal(out8, [-128, -127, 1, 6])
    np.testing.assert_array_equal(outf, xi * np.float32(0.5))
    np.testing.assert_array_equal(outu, x8.astype(np.uint16) + np.uint16(65000))


@ct.kernel
def big_ints(o64, ou64, WHICH: ct.Constant[int]):
    a = ct.full((2,), 2**40)            # -> int64
    b = ct.full((2,), 2**63 + 5)        # -> uint64
    c = ct.full((2,), 7)                # -> int32
    d = ct.full((2,), 1.5)              # -> float32
    e = ct.full((2,), True)             # -> bool_
    assert a.dtype == ct.int64 and b.dtype == ct.uint64 and c.dtype == ct.int32
    assert d.dtype == ct.float32 and e.dtype == ct.bool_
    ct.store(o64, (0,), a + c.astype(ct.int64))
    ct.store(ou64, (0,), b)


def test_big_integer_constants():
    o64, ou64 = np.zeros(2, np.int64), np.zeros(2, np.uint64)
    ct.launch(None, (1,), big_ints, (o64, ou64, 0))
    np.testing.assert_array_equal(o64, 2**40 + 7)
    np.testing.assert_array_equal(ou64, np.uint64(2**63 + 5))


@ct.kernel
def too_big(out):
    t = ct.zeros((1,), ct.uint64) + 2**64  # TOO-BIG
    ct.store(out, (0,), t.astype(ct.float32))


def test_integer_constant_too_big():
    from frontend_helpers import expect_error
    expect_error(too_big, [np.zeros(1, np.float32)], ct.TileTypeError,
                 "Invalid operands of '+': the integer constant 18446744073709551616 is out of "
                 "range for uint64 ([0, 18446744073709551615]); use a wider dtype, e.g. "
                 "tilecore.int64(18446744073709551616) or astype()", "TOO-BIG")


@ct.kernel
def out_of_range(x, out):
    t = ct.load(x, (0,), (4,)) + 200  # OUT-OF-RANGE
    ct.store(out, (0,), t)


@ct.kernel
def fill_out_of_range(out):
    ct.store(out, (0,), ct.full((4,), 300, ct.int8))  # FILL


def test_loose_integer_constant_must_fit_the_tile_dtype():
    """As NumPy 2 does: int8 + 200 is an error, not a silent wrap."""
    from frontend_helpers import expect_error
    expect_error(out_of_range, [np.zeros(4, np.int8), np.zeros(4, np.int8)], ct.TileTypeError,
                 "Invalid operands of '+': the integer constant 200 is out of range for int8 "
                 "([-128, 127]); use a wider dtype, e.g. tilecore.int64(200) or astype()",
                 "OUT-OF-RANGE")
    expect_error(fill_out_of_range, [np.zeros(4, np.int8)], ct.TileValueError,
                 "Invalid constant: the integer constant 300 is out of range for int8 "
                 "([-128, 127]); use a wider dtype, e.g. tilecore.int64(300) or astype()",
                 "FILL")


def test_runtime_scalar_arguments_take_constant_dtypes():
    @ct.kernel
    def k(out, a, b, c, d):
        assert a.dtype == ct.int32 and b.dtype == ct.int64 and c.dtype == ct.float32
        assert d.dtype == ct.float64
        ct.store(out, (0,), ct.full((1,), a + b + d, ct.float64))
        ct.store(out, (1,), ct.full((1,), c, ct.float64))

    out = np.zeros(2)
    ct.launch(None, (1,), k, (out, 3, 2**40, 0.1, np.float64(0.5)))
    assert out[0] == 3 + 2**40 + 0.5
    assert out[1] == np.float32(0.1)


# --- constant embedding ----------------------------------------------------------------------------
@ct.kernel
def embedded(out, A: ct.Constant[int], B: ct.Constant, C: Annotated[int, ct.ConstantAnnotation()],
             s):
    t = ct.zeros((A,), ct.int32) + B + C + s
    ct.store(out, (0,), t)


def test_one_specialization_per_constant_value():
    embedded._ir.clear()
    out4, out8 = np.zeros(4, np.int32), np.zeros(8, np.int32)
    ct.launch(None, (1,), embedded, (out4, 4, 10, 100, 1))
    ct.launch(None, (1,), embedded, (out4, 4, 10, 100, 2))   # same constants: cached
    ct.launch(None, (1,), embedded, (out8, 8, 10, 100, 3))
    ct.launch(None, (1,), embedded, (out4, 4, 20, 100, 4))
    ct.launch(None, (1,), embedded, (out4, 4, 20, 300, 5))
    assert len(embedded._ir) == 4
    np.testing.assert_array_equal(out4, 325)
    np.testing.assert_array_equal(out8, 113)
    assert embedded.constant_params == {"A", "B", "C"}
    for fn in embedded._ir.values():
        # constant parameters take no runtime argument
        assert [p.name for p in fn.params] == ["out", "s"]


def test_constant_of_any_type():
    @ct.kernel
    def k(out, DT: ct.Constant, SHAPE: ct.Constant, FLAG: ct.Constant[bool]):
        t = ct.ones(SHAPE, DT)
        if FLAG:
            t = t * 2
        ct.store(out, (0, 0), t.astype(ct.float32))

    out = np.zeros((2, 4), np.float32)
    ct.launch(None, (1,), k, (out, ct.int8, (2, 4), True))
    np.testing.assert_array_equal(out, 2)
    ct.launch(None, (1,), k, (out, ct.float16, (2, 4), False))
    np.testing.assert_array_equal(out, 1)
    assert len(k._ir) == 2


def test_constant_must_be_hashable():
    @ct.kernel
    def k(out, C: ct.Constant):
        pass

    with pytest.raises(TypeError, match='Invalid kernel argument "C": A Constant argument must '
                                        'be hashable, got list'):
        ct.launch(None, (1,), k, (np.zeros(1), [1, 2]))


def test_dtype_constructor_in_host_code():
    v = ct.int16(70000)
    assert v.dtype == np.int16 and v == 70000 - 65536
    assert ct.float32(1.5) == np.float32(1.5)


def test_global_constants_are_embedded():
    out = np.zeros(4, np.float32)
    ct.launch(None, (1,), uses_global, (out,))
    np.testing.assert_array_equal(out, GLOBAL_SCALE * 2)


GLOBAL_SCALE = 3
GLOBAL_SHAPE = (4,)


@ct.kernel
def uses_global(out):
    ct.store(out, (0,), ct.full(GLOBAL_SHAPE, GLOBAL_SCALE * 2, ct.float32))
