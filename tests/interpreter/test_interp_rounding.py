"""Rule coverage, tfloat32 rounding, and the astype conversions (`cast`)."""
import ml_dtypes
import numpy as np
import pytest

from tilecore.interpreter import RULES, cast, round_to_tf32
from tilecore.ir.ops import OPS
from tilecore.language import dtypes as dt

from interp_builder import eval_op, tile


def test_rules_cover_every_op():
    assert set(RULES) == set(OPS)


def _bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("src, expected", [
    (0x3F800000, 0x3F800000),  # 1.0 exact
    (0x3F801000, 0x3F800000),  # 1 + 2^-11: tie, kept lsb even -> down
    (0x3F803000, 0x3F804000),  # 1 + 3*2^-11: tie, kept lsb odd -> up
    (0x3F801001, 0x3F802000),  # just above the tie -> up
    (0x3F800FFF, 0x3F800000),  # just below the tie -> down
    (0xBF801001, 0xBF802000),  # negative: magnitude rounds the same way
    (0x7F7FE000, 0x7F7FE000),  # largest tfloat32 stays
    (0x7F7FFFFF, 0x7F800000),  # largest float32 rounds up to inf
    (0x7F800000, 0x7F800000),  # inf
    (0xFF800000, 0xFF800000),  # -inf
    (0x00001000, 0x00000000),  # subnormal tie -> even (zero)
    (0x00003000, 0x00004000),  # subnormal tie -> even (up)
    (0x80000000, 0x80000000),  # -0.0 keeps its sign
])
def test_round_to_tf32_bit_patterns(src, expected):
    x = np.array([src], np.uint32).view(np.float32)
    assert _bits(round_to_tf32(x))[0] == expected


def test_round_to_tf32_keeps_nan_even_with_low_payload():
    # A naive add-and-mask would turn this NaN (payload only in dropped bits) into inf.
    x = np.array([0x7F800001, 0xFFC00000], np.uint32).view(np.float32)
    assert np.isnan(round_to_tf32(x)).all()


def test_round_to_tf32_random_against_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(np.float32) * 1e3
    got = round_to_tf32(x).astype(np.float64)
    # Reference in float64: round the significand to 11 bits, ties to even.
    m, e = np.frexp(x.astype(np.float64))
    ref = np.ldexp(np.round(m * 2.0**11) / 2.0**11, e)  # np.round is half-to-even
    np.testing.assert_array_equal(got, ref)


def test_cast_float_to_int_truncates_and_saturates():
    x = np.array([2.7, -2.7, 0.5, -0.5, np.nan, np.inf, -np.inf, 3e9, -3e9], np.float64)
    assert cast(x, dt.int32).tolist() == [2, -2, 0, 0, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31]
    assert cast(x, dt.uint8).tolist() == [2, 0, 0, 0, 0, 255, 0, 255, 0]
    big = np.array([2.0**63, 2.0**63 - 1024, -2.0**63], np.float64)
    assert cast(big, dt.int64).tolist() == [2**63 - 1, 2**63 - 1024, -2**63]


def test_cast_int_wraps_and_bool():
    assert cast(np.array([300, -1, 255], np.int32), dt.uint8).tolist() == [44, 255, 255]
    assert cast(np.array([2**31], np.int64), dt.int32).tolist() == [-2**31]
    assert cast(np.array([0.0, -0.0, 0.5, np.nan]), dt.bool_).tolist() == [False, False, True,
                                                                         True]
    assert cast(np.array([True, False]), dt.float16).tolist() == [1.0, 0.0]


def test_cast_float64_to_bfloat16_rounds_once():
    # 1 + 2^-8 + 2^-30 is just above the bfloat16 tie at 1 + 2^-8; rounding via
    # float32 first (as ml_dtypes does) lands exactly on the tie and goes to 1.0.
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, 1e300, -1e-300])
    got = cast(x, dt.bfloat16).astype(np.float64)
    assert got[0] == 1 + 2**-7 and got[1] == 1.0 and got[2] == np.inf
    assert got[3] == 0 and np.signbit(got[3])


def test_cast_float64_to_tfloat32_rounds_once():
    x = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11])
    got = cast(x, dt.tfloat32)
    assert got.dtype == np.float32
    assert got.tolist() == [1 + 2**-10, 1.0]


@pytest.mark.parametrize("target", [dt.float16, dt.bfloat16, dt.float8_e4m3fn,
                                    dt.float8_e5m2, dt.float4_e2m1fn])
def test_cast_float32_matches_ml_dtypes_rne(target):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(2048) * 4).astype(np.float32)
    got = cast(x, target)
    assert got.dtype == target.numpy_dtype
    np.testing.assert_array_equal(got.view(np.uint8), x.astype(target.numpy_dtype).view(np.uint8))


def test_cast_narrow_float_hand_computed_ties():
    f8 = cast(np.array([1.0625, 1.1875, 448.0], np.float32), dt.float8_e4m3fn)
    assert f8.astype(np.float64).tolist() == [1.0, 1.25, 448.0]
    f4 = cast(np.array([0.25, 0.75, 1.25, 5.0], np.float32), dt.float4_e2m1fn)
    assert f4.astype(np.float64).tolist() == [0.0, 1.0, 1.0, 4.0]
    f16 = cast(np.array([2049, 2051], np.int32), dt.float16)
    assert f16.tolist() == [2048.0, 2052.0]


def test_astype_op_through_rule():
    x = np.array([1.5, -1.5, 70000.0], np.float32)
    got = eval_op("astype", [(x, dt.float32)], tile(dt.float16, 3), dtype=dt.float16)
    assert got.dtype == np.float16 and got.tolist() == [1.5, -1.5, np.inf]
    got = eval_op("astype", [(x, dt.float32)], tile(dt.int16, 3), dtype=dt.int16)
    assert got.tolist() == [1, -1, 32767]
    tf = eval_op("astype", [(np.array([1 + 2**-11], np.float32), dt.float32)],
                 tile(dt.tfloat32, 1), dtype=dt.tfloat32)
    assert tf.tolist() == [1.0]


def test_constant_rounds_to_its_dtype():
    got = eval_op("constant", [], tile(dt.bfloat16), value=0.1)
    assert got.shape == () and got == np.array(0.1, ml_dtypes.bfloat16)
    assert eval_op("constant", [], tile(dt.uint64), value=2**64 - 1) == 2**64 - 1
