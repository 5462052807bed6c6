"""ct.bitcast(x, dtype): the same bits read as another dtype of the same width,
against NumPy's view (bit for bit: NaN payloads, negative zero, infinities and
the extremes of each dtype included), inside scans, and its errors."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import expect_error, run

PAIRS = [(np.float32, np.int32), (np.int32, np.float32), (np.float32, np.uint32),
         (np.float64, np.int64), (np.uint64, np.float64), (np.float16, np.int16),
         (np.uint16, np.float16), (ml_dtypes.bfloat16, np.uint16), (np.int16, ml_dtypes.bfloat16),
         (np.int8, np.uint8), (ml_dtypes.float8_e4m3fn, np.uint8), (np.uint8, ml_dtypes.float8_e5m2),
         (np.float16, ml_dtypes.bfloat16)]


@ct.kernel
def bitcast_tile(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0),), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (ct.bid(0),), ct.bitcast(t, y.dtype))


def _bits(n: int, dtype, seed: int) -> np.ndarray:
    """Every bit pattern class: random words, zero, all ones, the sign bit alone,
    the largest and smallest values, and a few NaN payloads where dtype is a float."""
    size = np.dtype(dtype).itemsize
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, np.iinfo(word).max, n, dtype=word, endpoint=True)
    top = word(1) << word(8 * size - 1)
    raw[:4] = [0, np.iinfo(word).max, top, top - word(1)]
    return raw.view(dtype)


@pytest.mark.parametrize("src,dst", PAIRS, ids=lambda d: np.dtype(d).name)
def test_bits_unchanged(src, dst):
    x = _bits(300, src, 1)   # 300: a partial last tile
    y = np.zeros(300, dst)
    run(bitcast_tile, (x, y, 128), grid=(3,))
    np.testing.assert_array_equal(y.view(f"u{y.itemsize}"), x.view(f"u{x.itemsize}"))


@ct.kernel
def round_trip(x, y, TILE: ct.Constant[int]):
    t = ct.load(x, (0,), (TILE,))
    ct.store(y, (0,), ct.bitcast(ct.bitcast(t, ct.uint32) ^ 0x80000000, ct.float32))


def test_flip_the_sign_bit():
    x = np.array([1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 3e38, 1e-45], np.float32)
    y = np.zeros_like(x)
    run(round_trip, (x, y, 8))
    np.testing.assert_array_equal(y.view(np.uint32), x.view(np.uint32) ^ np.uint32(0x80000000))


@ct.kernel
def packed_max_scan(x, y, TILE: ct.Constant[int]):
    """Pack (value bits, position) into int64 words and take the running max of
    the words: for non-negative floats the integer order of the bits is the float
    order, so the result is the running max with the last position that holds it."""
    t = ct.load(x, (0,), (TILE,))
    words = (ct.bitcast(t, ct.int32).astype(ct.int64) << 32) | ct.arange(TILE, dtype=ct.int64)
    ct.store(y, (0,), ct.scan(words, 0, lambda a, b: ct.maximum(a, b), 0))


def test_packed_words_in_a_scan():
    x = np.random.default_rng(4).integers(0, 5, 64).astype(np.float32)
    y = np.zeros(64, np.int64)
    run(packed_max_scan, (x, y, 64))
    assert (((y >> 32).astype(np.int32)).view(np.float32) == np.maximum.accumulate(x)).all()
    last = [max(j for j in range(i + 1) if x[j] == x[:i + 1].max()) for i in range(64)]
    np.testing.assert_array_equal(y & 0xFFFFFFFF, last)


@ct.kernel
def bad_bitcast(x, DT: ct.Constant):
    ct.store(x, (0,), ct.bitcast(ct.load(x, (0,), (4,)), DT))  # bitcast


@pytest.mark.parametrize("dtype,message", [
    (ct.int64, 'Invalid argument "dtype" of bitcast(): expected a dtype of 32 bits (as x\'s '
               'float32), got int64 of 64 bits'),
    (ct.float16, 'Invalid argument "dtype" of bitcast(): expected a dtype of 32 bits (as x\'s '
                 'float32), got float16 of 16 bits'),
    (ct.tfloat32, 'Invalid argument "dtype" of bitcast(): expected a dtype of whole bytes other '
                  'than bool and tfloat32, got tfloat32'),
])
def test_errors(dtype, message):
    expect_error(bad_bitcast, (np.zeros(4, np.float32), dtype), ct.TileTypeError, message,
                 "bitcast")


def test_bool_is_refused():
    expect_error(bad_bitcast, (np.zeros(4, np.bool_), ct.int8), ct.TileTypeError,
                 'Invalid argument "x" of bitcast(): expected a dtype of whole bytes other than '
                 'bool and tfloat32, got bool_', "bitcast")


@ct.kernel
def bitcast_scalar(x, y):
    s = ct.load(x, (0,), (1,)).item()          # a 0-d tile
    ct.store(y, (0,), ct.full((1,), ct.bitcast(s, ct.int32), ct.int32))


def test_scalar():
    """A 0-d tile stays 0-d (a fuzzer finding: the interpreter made it 1-d)."""
    x, y = np.array([-2.5], np.float32), np.zeros(1, np.int32)
    run(bitcast_scalar, (x, y))
    assert y[0] == x.view(np.int32)[0]
