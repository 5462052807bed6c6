"""Parameter layout (C alignment), dtype -> struct codes, raw bits of small floats."""
import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest

from tilecore.language import dtypes as dt
from tilecore.runtime.params import ParamBuffer, param_offsets, scalar_bits, struct_code


def test_struct_code_covers_every_dtype_with_its_size():
    for d in dt.ALL_DTYPES:
        assert struct.calcsize(struct_code(d)) == d.itemsize, d
    assert struct_code(dt.float16) == struct_code(dt.bfloat16) == "H"
    assert struct_code(dt.bool_) == "?" and struct_code(dt.int8) == "b"
    assert struct_code(dt.uint64) == "Q" and struct_code(dt.float64) == "d"


@pytest.mark.parametrize("fmt,offsets", [
    ("@Qiiqq", (0, 8, 12, 16, 24)),
    ("@?Q", (0, 8)),
    ("@bhid", (0, 2, 4, 8)),
    ("@HHf?Q", (0, 2, 4, 8, 16)),
    ("@", ()),
])
def test_param_offsets_follow_c_alignment(fmt, offsets):
    assert param_offsets(fmt) == offsets


def test_param_offsets_match_ctypes_structure():
    fields = [("a", ctypes.c_bool), ("p", ctypes.c_uint64), ("h", ctypes.c_uint16),
              ("f", ctypes.c_float), ("b", ctypes.c_int8), ("d", ctypes.c_double)]
    S = type("S", (ctypes.Structure,), {"_fields_": fields})
    assert param_offsets("@?QHfbd") == tuple(getattr(S, n).offset for n, _ in fields)


def test_param_offsets_errors():
    with pytest.raises(ValueError) as e:
        param_offsets("Qi")
    assert str(e.value) == ("Invalid parameter format 'Qi': must start with '@' (native "
                            "alignment, as the C compiler lays out the parameters)")
    with pytest.raises(ValueError) as e:
        param_offsets("@Q2i")
    assert str(e.value) == ("Invalid parameter format '@Q2i': unsupported codes '2'; expected "
                            "one of '?BHIQbdfhiq', one per parameter")


def test_scalar_bits():
    assert scalar_bits(dt.float16, 1.0) == 0x3C00
    assert scalar_bits(dt.float16, -2.0) == 0xC000
    assert scalar_bits(dt.float16, 1e6) == 0x7C00             # rounds to +inf, no warning
    assert scalar_bits(dt.bfloat16, 1.0) == 0x3F80
    assert scalar_bits(dt.bfloat16, 1.00390625) == 0x3F80      # round to nearest even
    assert scalar_bits(dt.float8_e4m3fn, 3.0) == 0x44
    assert scalar_bits(dt.float16, np.float16(0.5)) == 0x3800
    with pytest.raises(TypeError) as e:
        scalar_bits(dt.float32, 1.0)
    assert str(e.value) == "scalar_bits() expects a float dtype of at most 16 bits, got float32"


def test_param_buffer_packs_at_the_pointed_addresses():
    buf = ParamBuffer("@QiHqd?")
    half = scalar_bits(dt.float16, 1.5)
    values = (0x7F00_1234_5678, -3, half, -(2 ** 40), 2.25, True)
    buf.pack(values)
    ptrs = (ctypes.c_void_p * 6).from_address(buf.kernel_params)
    ctypes_types = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint16, ctypes.c_int64,
                    ctypes.c_double, ctypes.c_bool]
    got = tuple(t.from_address(p).value for t, p in zip(ctypes_types, ptrs))
    assert got == values
    assert np.array(half, np.uint16).view(np.float16) == 1.5
    assert buf.raw() == struct.pack("@QiHqd?", *values)
    assert ptrs[0] % 8 == 0                                     # storage is 8-byte aligned


def test_param_buffer_repacks_and_rejects_wrong_arity():
    buf = ParamBuffer("@Qi")
    buf.pack((1, 2))
    buf.pack((3, 4))
    assert buf.raw() == struct.pack("@Qi", 3, 4)
    with pytest.raises(struct.error):
        buf.pack((1,))


def test_param_buffer_without_params():
    buf = ParamBuffer("@")
    buf.pack(())
    assert buf.kernel_params == 0 and buf.raw() == b""


def test_bfloat16_bits_round_trip():
    rng = np.random.default_rng(0)
    vals = rng.standard_normal(64).astype(np.float32)
    bits = [scalar_bits(dt.bfloat16, float(v)) for v in vals]
    back = np.array(bits, np.uint16).view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(back, vals.astype(ml_dtypes.bfloat16))
