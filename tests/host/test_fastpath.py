"""The generated launch stubs: they return the flat parameter values while
every fact of the specialization still holds, and None as soon as one does
not (so the launch falls back to the general path)."""
import numpy as np

from tilecore.host.fastpath import make_stub
from tilecore.language import dtypes as D


class FakeTensor:
    """Just the attributes of a torch.Tensor that the stubs read."""

    def __init__(self, ptr, shape, strides, dtype="float32", device=0):
        self.ptr, self.shape, self.strides_, self.dtype, self.device = \
            ptr, shape, strides, dtype, device

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides_

    def get_device(self):
        return self.device


FakeTensor.__module__ = "torch.fake"

KEY = ((D.float32, 2, True, True), D.int32, D.float32, ("c", int, 64))


def _stub():
    t = FakeTensor(0x1000, (4, 8), (8, 1))
    return make_stub(KEY, (t, 3, 1.5, 64), device=0, bits=False)


def test_stub_reads_the_flat_values():
    stub = _stub()
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    assert stub((t, 7, 2.5, 64)) == (0x2000, 4, 8, 8, 1, 7, 2.5)


def test_stub_guards_every_fact():
    stub = _stub()
    ok = FakeTensor(0x2000, (4, 8), (8, 1))
    assert stub((ok, 1, 1.0, 64)) is not None
    assert stub((FakeTensor(0x2008, (4, 8), (8, 1)), 1, 1.0, 64)) is None   # misaligned
    assert stub((FakeTensor(0x2000, (4, 8), (6, 1)), 1, 1.0, 64)) is None   # row stride 24 B
    assert stub((FakeTensor(0x2000, (4, 8), (16, 2)), 1, 1.0, 64)) is None  # not unit stride
    assert stub((FakeTensor(0x2000, (32,), (1,)), 1, 1.0, 64)) is None      # rank
    assert stub((FakeTensor(0x2000, (4, 8), (8, 1), dtype="float16"), 1, 1.0, 64)) is None
    assert stub((FakeTensor(0x2000, (4, 8), (8, 1), device=1), 1, 1.0, 64)) is None
    assert stub((ok, 2**31, 1.0, 64)) is None                               # int64 now
    assert stub((ok, 1, 1, 64)) is None                                     # int, not float
    assert stub((ok, 1, 1.0, 32)) is None                                   # other constant
    assert stub((np.zeros(1), 1, 1.0, 64)) is None                          # other type


def test_no_stub_for_raw_bit_scalars_or_unknown_array_types():
    t = FakeTensor(0x1000, (4, 8), (8, 1))
    assert make_stub(KEY, (t, 3, 1.5, 64), device=0, bits=True) is None
    assert make_stub(((D.float16,)), (np.float16(1),), device=0, bits=False) is None
