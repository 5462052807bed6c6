"""Constant folding under hostile input (issue 13): every failure of a constant
expression is a TileValueError at the kernel line, loosely typed integers stop
at 2**1024 before anything huge is computed, and conversions of constants to
integer dtypes follow `astype` (truncate, saturate, NaN -> 0)."""
import math
import time

import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import expect_error, run

BIG = 10 ** 5000          # a global beyond the bound
WIDE = 2 ** 1024 - 1      # the widest integer allowed: 1024 bits


@ct.kernel
def fold_error(out, WHICH: ct.Constant[int]):
    if WHICH == 0:
        v = int(1e400)  # E0
    elif WHICH == 1:
        v = int(float("nan"))  # E1
    elif WHICH == 2:
        v = 10 ** 10 ** 8  # E2
    elif WHICH == 3:
        v = 1 << 10 ** 9  # E3
    elif WHICH == 4:
        v = 1 // 0  # E4
    elif WHICH == 5:
        v = 7 % 0  # E5
    elif WHICH == 6:
        v = 1.0 / 0  # E6
    elif WHICH == 7:
        v = 2 ** 1024  # E7
    elif WHICH == 8:
        v = (2 ** 1023) * 2  # E8
    elif WHICH == 9:
        v = 1 << -1  # E9
    elif WHICH == 10:
        v = (-8) ** 0.5  # E10
    elif WHICH == 11:
        v = 10.0 ** 400  # E11
    elif WHICH == 12:
        v = float(WIDE)  # E12
    elif WHICH == 13:
        v = BIG  # E13
    elif WHICH == 14:
        v = ct.int32(5) ** -1  # E14
    elif WHICH == 15:
        v = ct.int32(7) // 0  # E15
    elif WHICH == 16:
        v = ~WIDE  # E16
    elif WHICH == 17:
        v = int("x")  # E17
    elif WHICH == 18:
        v = ct.exp(WIDE)  # E18
    elif WHICH == 19:
        v = ct.float32(WIDE)  # E19
    elif WHICH == 20:
        v = 10 ** 400 < 1.5  # E20
    else:
        v = 1.5 & 1  # E21
    ct.store(out, (0,), ct.full((1,), v, ct.float64))


_TOO_LARGE = ("is too large: its integer value would have about {} bits; loosely typed integer "
              "constants are exact only below 2**1024 in magnitude")

FOLD_ERRORS = [
    (0, ct.TileValueError,
     "Invalid constant expression int(inf): cannot convert float infinity to integer"),
    (1, ct.TileValueError,
     "Invalid constant expression int(nan): cannot convert float NaN to integer"),
    (2, ct.TileValueError, "Constant expression 10 ** 100000000 " + _TOO_LARGE.format(332192810)),
    (3, ct.TileValueError, "Constant expression 1 << 1000000000 " + _TOO_LARGE.format(1000000001)),
    (4, ct.TileValueError, "Division by zero in constant expression 1 // 0"),
    (5, ct.TileValueError, "Division by zero in constant expression 7 % 0"),
    (6, ct.TileValueError, "Division by zero in constant expression 1.0 / 0"),
    (7, ct.TileValueError, "Constant expression 2 ** 1024 " + _TOO_LARGE.format(1025)),
    (8, ct.TileValueError, "Constant expression 2**1023 * 2 " + _TOO_LARGE.format(1025)),
    (9, ct.TileValueError, "Negative shift count in constant expression 1 << -1"),
    (10, ct.TileValueError,
     "Constant expression (-8) ** 0.5 has a complex result; tile code has no complex numbers"),
    (11, ct.TileValueError,
     "Constant expression 10.0 ** 400 overflows: Numerical result out of range"),
    (12, ct.TileValueError, "Invalid constant expression float(<a 1024-bit integer>): int too "
                            "large to convert to float"),
    (13, ct.TileValueError, "The integer constant <a 16610-bit integer> is out of the range of "
                            "loosely typed integer constants: their magnitude must be below "
                            "2**1024"),
    (14, ct.TileValueError, "Invalid constant expression 5 ** -1: an integer power of int32 "
                            "needs a non-negative exponent"),
    (15, ct.TileValueError, "Division by zero in constant expression 7 // 0"),
    (16, ct.TileValueError, "Constant expression ~<a 1024-bit integer> " +
     _TOO_LARGE.format(1025)),
    (17, ct.TileValueError,
     "Invalid constant expression int('x'): invalid literal for int() with base 10: 'x'"),
    (18, ct.TileValueError,
     "Constant expression exp(<a 1024-bit integer>) overflows: int too large to convert to float"),
    (19, ct.TileValueError, "Constant expression float32(<a 1024-bit integer>) overflows: int too "
                            "large to convert to float"),
    (20, ct.TileValueError, "Constant expression 10 ** 400 " + _TOO_LARGE.format(1329)),
    (21, ct.TileTypeError, "Operator '&' needs integer or bool operands, got a loosely typed "
                           "constant 1.5 and a loosely typed constant 1"),
]


@pytest.mark.parametrize("which,cls,message", FOLD_ERRORS)
def test_failing_constant_expressions_are_errors_at_their_line(which, cls, message):
    start = time.perf_counter()
    expect_error(fold_error, [np.zeros(1), which], cls, message, f"E{which}")
    assert time.perf_counter() - start < 5   # 10 ** 10 ** 8 is refused, not computed


@ct.kernel
def fold_value(out, WHICH: ct.Constant[int]):
    if WHICH == 0:
        v = -float("inf")            # float() of a string, as in Python
    elif WHICH == 1:
        v = float("nan")
    elif WHICH == 2:
        v = int("12") + int(2.9)
    elif WHICH == 3:
        v = 2 ** 1023 + 1 > 8.98846567431158e307   # exact (that float is 2**1023)
    elif WHICH == 4:
        v = 2 ** 1023 // 2 ** 1020   # the widest integers fold exactly
    elif WHICH == 5:
        v = 10 ** 300 / 10 ** 299
    elif WHICH == 6:
        v = ct.int32(1e10)           # converted as astype converts: saturates
    elif WHICH == 7:
        v = ct.int32(float("nan"))   # NaN -> 0
    elif WHICH == 8:
        v = ct.uint8(-3.5)           # truncates to -3, saturates to 0
    elif WHICH == 9:
        v = ct.int8(-1e10)
    elif WHICH == 10:
        v = WIDE - (2 ** 1023 - 1) * 2   # 2**1024 - 1 is within the bound
    else:
        v = -WIDE // 2 ** 1020           # and so is its negation
    ct.store(out, (0,), ct.full((1,), v, ct.float64))


@pytest.mark.parametrize("which,want", [
    (0, -math.inf), (1, math.nan), (2, 14.0), (3, 1.0), (4, 8.0), (5, 10.0),
    (6, 2147483647.0), (7, 0.0), (8, 0.0), (9, -128.0), (10, 1.0), (11, -16.0)])
def test_legal_constant_expressions_fold(which, want):
    out = run(fold_value, [np.zeros(1), which])[0]
    np.testing.assert_array_equal(out, [want])


@ct.kernel
def _int64_fold_vs_run_time(src, folded, computed):
    ct.store(folded, (0,), ct.full((2,), ct.float32(1152921573326323713), ct.float32))  # 2^60+2^36+1
    ct.store(computed, (0,), ct.load(src, (0,), (2,)).astype(ct.float32))


def test_integer_constants_round_once_like_run_time():
    """2^60 + 2^36 + 1 is just above the midpoint of two float32 neighbours:
    rounded once it is 2^60 + 2^37; through float64 first (which drops the + 1)
    it would tie and round to even, 2^60."""
    src = np.full(2, 2**60 + 2**36 + 1, np.int64)
    folded, computed = np.zeros(2, np.float32), np.zeros(2, np.float32)
    ct.launch(None, (1,), _int64_fold_vs_run_time, (src, folded, computed))
    assert computed.tolist() == folded.tolist() == [float(2**60 + 2**37)] * 2
