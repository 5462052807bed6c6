"""The fast launchers (C and generated Python, one behaviour): they launch
with the flat parameter values while every fact of the specialization still
holds, and return False as soon as one does not (so the launch falls back to
the general path)."""
import ctypes
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tilecore.host.fastpath import make_fast_launch
from tilecore.language import dtypes as D
from tilecore.testing.fake_driver import build_fake_libcuda


class FakeTensor:
    """Just the attributes of a torch.Tensor that the fast launchers read."""

    def __init__(self, ptr, shape, strides, dtype="float32", device=0):
        self.ptr, self.shape, self.strides_, self.dtype, self.device = \
            ptr, shape, strides, dtype, device

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides_

    def get_device(self):
        return self.device

    @property
    def is_cuda(self):
        return self.device >= 0


FakeTensor.__module__ = "torch.fake"

KEY = ((D.float32, 2, True, True, True, False), D.int32, D.float32, ("c", int, 64))


class Recorder:
    def __init__(self, result=0):
        self.calls, self.result, self.failed = [], result, []

    def launch(self, stream, gx, gy, gz, values):
        self.calls.append((stream, (gx, gy, gz), values))
        return self.result

    def fail(self, err, grid):
        self.failed.append((err, grid))
        raise RuntimeError(f"launch failed: {err}")


@pytest.fixture(params=[True, False], ids=["C", "Python"])
def native(request):
    return request.param


def _fast(native, validated=None, result=0):
    rec = Recorder(result)
    t = FakeTensor(0x1000, (4, 8), (8, 1))
    if validated is None:
        validated = {(0x2000, 4, 8, 8, 1): 0}
    fast = make_fast_launch(KEY, (t, 3, 1.5, 64), 0, validated, rec, rec.fail, native=native)
    assert (type(fast).__name__ == "FastLaunch") is native
    return fast, rec


def test_launches_with_the_flat_values(native):
    fast, rec = _fast(native)
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    assert fast(None, (5,), (t, 7, 2.5, 64)) is True
    assert fast(0x77, (2, 3), (t, 7, 2.5, 64)) is True
    assert rec.calls == [(0, (5, 1, 1), (0x2000, 4, 8, 8, 1, 7, 2.5)),
                         (0x77, (2, 3, 1), (0x2000, 4, 8, 8, 1, 7, 2.5))]


def test_overlapping_arrays_take_the_fast_path_only_once_validated(native):
    """Arrays whose byte extents are disjoint launch at once; overlapping ones only when
    the general path has checked them (interleaved views pass its finer check)."""
    rec = Recorder()
    key = ((D.float32, 1, True, True, True, False), (D.float32, 2, True, True, True, False))
    a, b = FakeTensor(0x1000, (64,), (1,)), FakeTensor(0x1100, (4, 8), (16, 1))
    validated = {}
    fast = make_fast_launch(key, (a, b), 0, validated, rec, rec.fail, native=native)
    assert fast(None, (1,), (a, b)) is True                     # [0x1000, 0x1100), then b
    inside = FakeTensor(0x10f0, (4, 8), (16, 1))                # starts in a's last 16 bytes
    assert fast(None, (1,), (a, inside)) is False
    validated[(0x1000, 64, 1, 0x10f0, 4, 8, 16, 1)] = 0
    assert fast(None, (1,), (a, inside)) is True
    reversed_rows = FakeTensor(0x1130, (4, 8), (-16, 1))      # bytes [0x10f0, 0x1150)
    assert fast(None, (1,), (a, reversed_rows)) is False
    empty = FakeTensor(0x1000, (0, 8), (16, 1))                 # no bytes at all
    assert fast(None, (1,), (a, empty)) is True
    huge = FakeTensor(0x1000000, (2 ** 31, 8), (16, 1))         # wide: another specialization
    assert fast(None, (1,), (a, huge)) is False
    assert [c[2][3] for c in rec.calls] == [0x1100, 0x10f0, 0x1000]


def test_guards_every_fact(native):
    fast, rec = _fast(native)
    ok = FakeTensor(0x2000, (4, 8), (8, 1))
    assert fast(None, (1,), (ok, 1, 1.0, 64))
    bad = [
        (FakeTensor(0x2008, (4, 8), (8, 1)), 1, 1.0, 64),   # misaligned
        (FakeTensor(0x2000, (4, 8), (6, 1)), 1, 1.0, 64),   # row stride 24 B
        (FakeTensor(0x2000, (4, 8), (16, 2)), 1, 1.0, 64),  # not unit stride
        (FakeTensor(0x2000, (4, 6), (8, 1)), 1, 1.0, 64),   # last dim 24 B: partial vectors
        (FakeTensor(0x2000, (32,), (1,)), 1, 1.0, 64),      # rank
        (FakeTensor(0x2000, (4, 8), (8, 1), dtype="float16"), 1, 1.0, 64),
        (FakeTensor(0x2000, (4, 8), (8, 1), device=1), 1, 1.0, 64),
        (ok, 2**31, 1.0, 64),                               # int64 now
        (FakeTensor(0x2000, (4, 8), (2**31, 1)), 1, 1.0, 64),    # a stride past int32: wide
        (FakeTensor(0x2000, (4, 8), (-2**31, 1)), 1, 1.0, 64),
        (ok, 1, 1, 64),                                     # int, not float
        (ok, 1, 1.0, 32),                                   # other constant
        (np.zeros(1), 1, 1.0, 64),                          # other type
        [ok, 1, 1.0, 64],                                   # a list: the general path
        (ok, 1, 1.0),                                       # too few arguments
    ]
    for args in bad:
        assert fast(None, (1,), args) is False, args
    assert len(rec.calls) == 1


def test_grid_and_stream_errors_match_the_general_path(native):
    fast, rec = _fast(native)
    ok = FakeTensor(0x2000, (4, 8), (8, 1))
    with pytest.raises(ValueError, match='Invalid argument "grid"'):
        fast(None, (-1,), (ok, 1, 1.0, 64))
    for empty in ((0,), (4, 0), (0, 1, 1)):      # empty grids: the general path launches nothing
        assert fast(None, empty, (ok, 1, 1.0, 64)) is False
    with pytest.raises(TypeError, match='Invalid argument "grid"'):
        fast(None, (1.0,), (ok, 1, 1.0, 64))
    with pytest.raises(TypeError, match='Invalid argument "stream"'):
        fast("stream", (1,), (ok, 1, 1.0, 64))
    assert rec.calls == []


def test_written_arrays_must_have_distinct_elements(native):
    """An output view whose elements overlap (stride 0, folded) takes the general
    path, which refuses it; inputs may be such views."""
    key = ((D.float32, 1, True, True, True, False), (D.float32, 2, False, False, True, False))
    rec = Recorder()
    x, out = FakeTensor(0x1000, (64,), (1,)), FakeTensor(0x2004, (4, 8), (16, 2))
    fast = make_fast_launch(key, (x, out), 0, {}, rec, rec.fail, native=native,
                            written=frozenset({1}))
    assert fast(None, (1,), (x, out)) is True
    for bad in (FakeTensor(0x2004, (4, 8), (0, 2)), FakeTensor(0x2004, (4, 8), (2, 2)),
                FakeTensor(0x2004, (4, 8), (16, 0))):
        assert fast(None, (1,), (x, bad)) is False
    assert fast(None, (1,), (x, FakeTensor(0x2004, (4, 8), (2, 8)))) is True   # transposed
    assert fast(None, (1,), (FakeTensor(0x1000, (64,), (0,)), out)) is False  # unit-stride guard
    assert len(rec.calls) == 2


def test_wide_arrays_have_no_fast_launcher(native):
    """Arrays past int32 take the general path (their kernels run for milliseconds)."""
    key = ((D.float32, 1, True, True, True, True),)
    a = FakeTensor(0x1000, (2**31,), (1,))
    rec = Recorder()
    assert make_fast_launch(key, (a,), 0, {}, rec, rec.fail, native=native) is None


class FakeTorchStream:
    """A stream type whose handle is a property, as torch.cuda.Stream's cuda_stream."""

    def __init__(self, handle):
        self.handle = handle

    @property
    def cuda_stream(self):
        return self.handle


class FakeCupyStream:
    def __init__(self, handle):
        self.handle = handle

    @property
    def ptr(self):
        return self.handle


class ProtocolStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


FakeTorchStream.__module__ = "torch.cuda.fake"
FakeCupyStream.__module__ = "cupy.cuda.fake"


def test_stream_objects_give_their_handles(native):
    fast, rec = _fast(native)
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    streams = [FakeTorchStream(11), FakeTorchStream(12), FakeCupyStream(13), ProtocolStream(14),
               ProtocolStream(15), FakeTorchStream(16), None, 17]
    for stream in streams:  # type changes in between: each is read the right way
        assert fast(stream, (1,), (t, 1, 1.0, 64)) is True
    assert [c[0] for c in rec.calls] == [11, 12, 13, 14, 15, 16, 0, 17]
    with pytest.raises(TypeError, match='Invalid argument "stream"'):
        fast(object(), (1,), (t, 1, 1.0, 64))
    assert fast(FakeTorchStream(18), (1,), (t, 1, 1.0, 64)) is True
    assert rec.calls[-1][0] == 18


def test_launch_errors_are_raised(native):
    fast, rec = _fast(native, result=700)
    with pytest.raises(RuntimeError, match="launch failed: 700"):
        fast(None, (4,), (FakeTensor(0x2000, (4, 8), (8, 1)), 1, 1.0, 64))
    assert rec.failed == [(700, (4, 1, 1))]


def test_no_fast_launch_for_raw_bit_scalars_or_unknown_array_types(native):
    rec = Recorder()
    for dtype in (D.float16, D.bfloat16, D.float8_e4m3fn):
        assert make_fast_launch((dtype,), (np.float16(1),), 0, {}, rec, rec.fail,
                                native=native) is None
    key = ((D.float32, 1, True, True, True, False),)
    assert make_fast_launch(key, (np.zeros(4, np.float32),), 0, {}, rec, rec.fail,
                            native=native) is None


def test_kernel_without_parameters(native):
    rec = Recorder()
    fast = make_fast_launch((), (), 0, {(): 0}, rec, rec.fail, native=native)
    assert fast(None, (3,), ()) is True and rec.calls == [(0, (3, 1, 1), ())]


class FakeCupy:
    """Just the attributes of a cupy.ndarray that the fast launchers read."""

    def __init__(self, ptr, shape, byte_strides, dtype=np.dtype(np.float32), device=0):
        self.data = type("Mem", (), {"ptr": ptr, "device_id": device})()
        self.shape, self.strides, self.dtype = shape, byte_strides, dtype


FakeCupy.__module__ = "cupy.fake"


def test_cupy_arrays_use_element_strides(native):
    rec = Recorder()
    key = ((D.float32, 2, True, True, True, False), (D.float32, 1, False, False, False, False))
    a, b = FakeCupy(0x1000, (4, 8), (32, 4)), FakeCupy(0x2004, (3,), (8,))
    validated = {(0x1000, 4, 8, 8, 1, 0x2004, 3, 2): 0}
    fast = make_fast_launch(key, (a, b), 0, validated, rec, rec.fail, native=native)
    assert fast(5, (1, 2, 3), (a, b)) is True
    assert rec.calls == [(5, (1, 2, 3), (0x1000, 4, 8, 8, 1, 0x2004, 3, 2))]
    assert fast(5, (1,), (a, FakeCupy(0x2004, (3,), (8,), dtype=np.dtype(np.int32)))) is False
    assert fast(5, (1,), (a, FakeCupy(0x2004, (3,), (8,), device=1))) is False


def test_no_reference_leaks(native):
    fast, rec = _fast(native)
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    args = (t, 7, 2.5, 64)
    bad = (FakeTensor(0x2000, (4, 8), (16, 2)), 7, 2.5, 64)
    import sys
    stream = FakeTorchStream(1 << 40)
    watched = (t, t.ptr, t.shape, t.strides_, args, bad, stream, stream.handle)
    fast(None, (1,), args)
    fast(stream, (1,), args)
    rec.calls.clear()  # the recorded values hold references
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(1000):
        assert fast(None, (1,), args) is True
        assert fast(stream, (2, 2), args) is True
        assert fast(None, (1,), bad) is False
        rec.calls.clear()
    assert [sys.getrefcount(o) for o in watched] == before


def test_single_gpu_checks_is_cuda_instead_of_the_ordinal(native):
    rec = Recorder()
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    fast = make_fast_launch(KEY, (t, 3, 1.5, 64), 0, {(0x2000, 4, 8, 8, 1): 0}, rec, rec.fail,
                            native=native, only_device=True)
    assert fast(None, (1,), (t, 1, 1.0, 64)) is True
    host = FakeTensor(0x2000, (4, 8), (8, 1), device=-1)  # a CPU tensor: get_device() is -1
    assert fast(None, (1,), (host, 1, 1.0, 64)) is False
    assert len(rec.calls) == 1


def test_single_gpu_skips_the_cupy_device_check(native):
    class NoDeviceId:
        ptr = 0x2000

        @property
        def device_id(self):
            raise AssertionError("device_id read in a one-GPU process")

    rec = Recorder()
    key = ((D.float32, 1, True, True, True, False),)
    a = FakeCupy(0x2000, (8,), (4,))
    a.data = NoDeviceId()
    fast = make_fast_launch(key, (a,), 0, {(0x2000, 8, 1): 0}, rec, rec.fail, native=native,
                            only_device=True)
    assert fast(None, (1,), (a,)) is True
    assert rec.calls == [(0, (1, 1, 1), (0x2000, 8, 1))]
    checked = make_fast_launch(key, (a,), 0, {(0x2000, 8, 1): 0}, rec, rec.fail, native=native)
    with pytest.raises(AssertionError, match="device_id read"):
        checked(None, (1,), (a,))


def test_uninitialized_c_fast_launch_raises():
    from tilecore.runtime import _cudriver
    fast = _cudriver.FastLaunch.__new__(_cudriver.FastLaunch)
    with pytest.raises(TypeError):  # no vectorcall entry until __init__ ran: never a crash
        fast(None, (1,), ())


class FlatCupy(FakeCupy):
    """A 1-D CuPy array with the size and contiguity flag that CuPy keeps: the fast
    launchers read those, not the shape and strides tuples."""

    def __init__(self, ptr, size, contiguous=True, ndim=1, itemsize=4):
        super().__init__(ptr, None, None)
        self.size, self._c_contiguous, self.ndim = size, contiguous, ndim
        self.item = itemsize

    @property
    def shape(self):
        return self.__dict__.get("shape_") or _unread("shape")

    @property
    def strides(self):
        return self.__dict__.get("strides_") or _unread("strides")

    @shape.setter
    def shape(self, value):
        self.__dict__["shape_"] = value

    @strides.setter
    def strides(self, value):
        self.__dict__["strides_"] = value


FlatCupy.__module__ = "cupy.fake"


def _unread(name):
    raise AssertionError(f"{name} read")


def test_contiguous_1d_cupy_arrays_are_read_from_size_and_flag(native):
    rec = Recorder()
    key = ((D.float32, 1, True, True, True, False),)
    a = FlatCupy(0x2000, 8)
    fast = make_fast_launch(key, (a,), 0, {(0x2000, 8, 1): 0, (0x2000, 1, 1): 0,
                                           (0x2000, 8, 2): 0}, rec, rec.fail, native=native)
    assert fast(None, (1,), (a,)) is True
    assert rec.calls == [(0, (1, 1, 1), (0x2000, 8, 1))]
    import sys
    big = FlatCupy(0x3000, 1 << 30)
    fast_big = make_fast_launch(key, (big,), 0, {(0x3000, 1 << 30, 1): 0}, rec, rec.fail,
                                native=native)
    watched = (big, big.data, big.size)
    fast_big(None, (1,), (big,))
    rec.calls.clear()
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(1000):
        assert fast_big(None, (1,), (big,)) is True
    rec.calls.clear()  # the recorded values hold references
    assert [sys.getrefcount(o) for o in watched] == before
    rec.calls.append((0, (1, 1, 1), (0x2000, 8, 1)))
    # not contiguous, or one element: the shape and strides decide
    strided = FlatCupy(0x2000, 8, contiguous=False)
    strided.shape, strided.strides = (8,), (8,)
    assert fast(None, (1,), (strided,)) is False  # stride 2: the unit-stride guard fails
    single = FlatCupy(0x2000, 1)
    single.shape, single.strides = (1,), (4,)
    assert fast(None, (1,), (single,)) is False   # 4 bytes: not whole 16-byte vectors
    with pytest.raises(AssertionError, match="shape read"):
        fast(None, (1,), (FlatCupy(0x2000, 8, ndim=2),))
    assert len(rec.calls) == 1


def test_1d_cupy_arrays_without_the_flag_read_shape_and_strides(native):
    rec = Recorder()
    key = ((D.float32, 1, True, True, True, False),)
    a = FakeCupy(0x2000, (8,), (4,))      # no _c_contiguous attribute
    fast = make_fast_launch(key, (a,), 0, {(0x2000, 8, 1): 0}, rec, rec.fail, native=native)
    assert fast(None, (1,), (a,)) is True and fast(None, (1,), (a,)) is True
    assert rec.calls == [(0, (1, 1, 1), (0x2000, 8, 1))] * 2


# --- DLPack's C exchange API (torch >= 2.10): a tensor type's table of C readers -------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_READER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_DLTensor))


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p), ("allocator", ctypes.c_void_p),
                ("managed_from", ctypes.c_void_p), ("managed_to", ctypes.c_void_p),
                ("dltensor_from", _READER), ("current_work_stream", ctypes.c_void_p)]


def _exchange_capsule(reader, major=1):
    """A PyCapsule named "dlpack_exchange_api" holding a table whose DLTensor reader is
    `reader(obj, out) -> int`; the table and callback live as long as the returned tuple."""
    callback = _READER(lambda p, out: reader(ctypes.cast(p, ctypes.py_object).value, out[0]))
    table = _ExchangeAPI(major=major, minor=3, dltensor_from=callback)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.c_char_p,
                                                  ctypes.c_void_p)
    return new(ctypes.addressof(table), b"dlpack_exchange_api", None), (table, callback)


class DLTensorLike(FakeTensor):
    """A torch-like tensor whose type exposes a DLPack reader; counts the reads of its
    Python getters (the fast launcher reads dtype once, to learn the DLPack dtype code)."""
    reads = 0
    fail = False

    def __init__(self, ptr, shape, strides, dtype="float32", code=2, device_type=2, device=0):
        super().__init__(ptr, shape, strides, dtype, device)
        self.code, self.device_type = code, device_type
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides)

    def data_ptr(self):
        DLTensorLike.reads += 1
        return self.ptr


def _read(t, out):
    if DLTensorLike.fail:  # (a real reader also sets a Python exception)
        return -1
    out.data, out.device_type, out.device_id = t.ptr, t.device_type, t.device
    out.ndim, out.code, out.bits, out.lanes = len(t.shape), t.code, 32, 1
    out.shape, out.strides, out.byte_offset = t._shape, t._strides, 0
    return 0


DLTensorLike.__dlpack_c_exchange_api__, _TABLE = _exchange_capsule(_read)
DLTensorLike.__module__ = "torch.fake"


def test_dlpack_reader_gives_the_values_without_the_getters():
    rec = Recorder()
    t = DLTensorLike(0x2000, (4, 8), (8, 1))
    validated = {(0x2000, 4, 8, 8, 1): 0}
    fast = make_fast_launch(KEY, (t, 3, 1.5, 64), 0, validated, rec, rec.fail, native=True)
    DLTensorLike.reads, DLTensorLike.fail = 0, False
    for _ in range(3):
        assert fast(None, (1,), (t, 3, 1.5, 64)) is True
    assert rec.calls == [(0, (1, 1, 1), (0x2000, 4, 8, 8, 1, 3, 1.5))] * 3
    assert DLTensorLike.reads == 0
    # each guard, through the DLPack fields
    assert fast(None, (1,), (DLTensorLike(0x2000, (4, 8), (8, 1), code=0), 3, 1.5, 64)) is False
    assert fast(None, (1,), (DLTensorLike(0x2000, (4, 8), (8, 1), device_type=1), 3, 1.5, 64)) \
        is False
    assert fast(None, (1,), (DLTensorLike(0x2000, (4, 8), (8, 1), device=1), 3, 1.5, 64)) is False
    assert fast(None, (1,), (DLTensorLike(0x2000, (4, 8), (8, 2)), 3, 1.5, 64)) is False
    assert fast(None, (1,), (DLTensorLike(0x2008, (4, 8), (8, 1)), 3, 1.5, 64)) is False
    assert fast(None, (1,), (DLTensorLike(0x2000, (2 ** 31, 8), (8, 1)), 3, 1.5, 64)) is False
    assert len(rec.calls) == 3 and DLTensorLike.reads == 0


def test_dlpack_reader_failure_falls_back_to_the_getters():
    rec = Recorder()
    t = DLTensorLike(0x2000, (4, 8), (8, 1))
    fast = make_fast_launch(KEY, (t, 3, 1.5, 64), 0, {(0x2000, 4, 8, 8, 1): 0}, rec, rec.fail,
                            native=True)
    DLTensorLike.reads, DLTensorLike.fail = 0, True
    try:
        assert fast(None, (1,), (t, 3, 1.5, 64)) is True
        DLTensorLike.fail = False   # the reader is not asked again
        assert fast(None, (1,), (t, 3, 1.5, 64)) is True
    finally:
        DLTensorLike.fail = False
    assert DLTensorLike.reads == 2
    assert rec.calls == [(0, (1, 1, 1), (0x2000, 4, 8, 8, 1, 3, 1.5))] * 2


def test_dlpack_table_of_another_major_version_is_not_used():
    class Other(DLTensorLike):
        pass
    Other.__module__ = "torch.fake"
    Other.__dlpack_c_exchange_api__, keep = _exchange_capsule(_read, major=2)
    rec = Recorder()
    t = Other(0x2000, (4, 8), (8, 1))
    fast = make_fast_launch(KEY, (t, 3, 1.5, 64), 0, {(0x2000, 4, 8, 8, 1): 0}, rec, rec.fail,
                            native=True)
    DLTensorLike.reads = 0
    assert fast(None, (1,), (t, 3, 1.5, 64)) is True and DLTensorLike.reads == 1


def test_device_arrays_of_tilecore_take_the_fast_path(native):
    """tilecore.runtime.DeviceArray arguments (the algorithms' views of their
    temporary storage) are read from their fields; dtype, rank, device,
    layout and (when written) read-only are guarded."""
    from tilecore.runtime import DeviceArray
    rec = Recorder()
    a = DeviceArray(0x1000, (4, 8), (8, 1), D.float32, 0)
    key = ((D.float32, 2, True, True, True, False), D.int32)
    fast = make_fast_launch(key, (a, 5), 0, {}, rec, rec.fail, native=native,
                            written=frozenset({0}))
    assert fast is not None
    assert fast(None, (3,), (a, 5))
    assert rec.calls[-1] == (0, (3, 1, 1), (0x1000, 4, 8, 8, 1, 5))
    b = DeviceArray(0x2000, (4, 8), (8, 1), D.float32, 0)
    assert fast(7, (1,), (b, 6)) and rec.calls[-1][2] == (0x2000, 4, 8, 8, 1, 6)
    for bad in (DeviceArray(0x1000, (4, 8), (8, 1), D.int32, 0),        # dtype
                DeviceArray(0x1000, (32,), (1,), D.float32, 0),         # rank
                DeviceArray(0x1000, (4, 8), (8, 1), D.float32, 1),      # device
                DeviceArray(0x1004, (4, 8), (8, 1), D.float32, 0),      # alignment
                DeviceArray(0x1000, (4, 8), (8, 2), D.float32, 0),      # unit stride
                DeviceArray(0x1000, (4, 8), (0, 1), D.float32, 0),      # written, repeated
                DeviceArray(0x1000, (4, 8), (8, 1), D.float32, 0, True)):  # read-only
        n = len(rec.calls)
        assert not fast(None, (1,), (bad, 5)) and len(rec.calls) == n, bad
    assert not fast(None, (1,), ((0x1000, (4, 8), (8, 1), D.float32, 0, False), 5))  # a tuple


def test_a_nan_constant_passed_again_takes_the_fast_path(native):
    """A float min/max scan passes its identity, NaN, as a constant: the same
    object again is the same constant (identity first, as Python's containers
    compare), another value is not."""
    rec = Recorder()
    nan = float("nan")
    key = (D.int32, ("c", float, nan))
    fast = make_fast_launch(key, (3, nan), 0, {}, rec, rec.fail, native=native)
    assert fast(None, (1,), (5, nan))
    assert not fast(None, (1,), (5, 0.0))
    assert not fast(None, (1,), (5, float("nan")))     # another NaN object: the general path
    assert len(rec.calls) == 1


# -- run-time scalars: Python numbers and NumPy scalars ---------------------------------------------

# Values around every boundary of the general path's scalar kinds (gpu._scalar_dtype): Python
# ints by range, floats, bools, NumPy scalars of every dtype a parameter can have (NaN,
# infinities, -0.0, the extremes), an int subclass
class Flag(int):
    pass


SCALARS = [0, 7, -2 ** 31, 2 ** 31 - 1, 2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, -2 ** 63, 2 ** 63,
           2 ** 64 - 1, 2 ** 64, -2 ** 63 - 1, True, False, 1.5, float("nan"), float("inf"),
           -0.0, 1e300, Flag(3),
           np.float32(np.nan), np.float32(-np.inf), np.float32(-0.0),
           np.float32(np.finfo(np.float32).max), np.float32(np.finfo(np.float32).tiny),
           np.float64(np.nan), np.float64(1e300), np.float64(5e-324),
           np.int8(-128), np.int16(32767), np.int32(-2 ** 31), np.int32(2 ** 31 - 1),
           np.int64(-2 ** 63), np.int64(2 ** 63 - 1), np.int64(3),
           np.uint8(255), np.uint16(65535), np.uint32(2 ** 32 - 1), np.uint64(2 ** 64 - 1),
           np.bool_(True), np.bool_(False), np.float16(1.5), np.longlong(3)]
PASSED_AS_THEY_ARE = [D.bool_, D.int8, D.int16, D.int32, D.int64, D.uint8, D.uint16, D.uint32,
                      D.uint64, D.float32, D.float64]


def _general_dtype(value):
    """The dtype the general path specializes a scalar argument as (None: it raises)."""
    from tilecore.host.gpu import _scalar_dtype
    try:
        return _scalar_dtype("v", value)
    except (TypeError, ValueError):
        return None


@pytest.mark.parametrize("dtype", PASSED_AS_THEY_ARE, ids=lambda d: d.name)
def test_scalars_take_the_fast_path_exactly_when_the_general_path_would_keep_the_kind(native,
                                                                                      dtype):
    """A scalar parameter's fast launcher takes a value when the general path
    gives it this specialization (the NumPy scalar of the dtype, or a Python
    number of the dtype's class) and hands the launcher that very object, so
    it is packed as on the general path; anything else (a np.float64 for a
    float32 parameter, an int past int32, an int subclass) returns False
    and the general path decides, as before."""
    rec = Recorder()
    first = dtype.numpy_dtype.type(1)
    fast = make_fast_launch((dtype,), (first,), 0, {}, rec, rec.fail, native=native)
    for value in SCALARS:
        n = len(rec.calls)
        exact = type(value) in (int, float, bool) or type(value) is dtype.numpy_dtype.type
        taken = fast(None, (1,), (value,))
        if exact:
            assert taken is (_general_dtype(value) is dtype), value
        else:                                   # the general path may keep the kind: slower only
            assert taken is False, value
        assert len(rec.calls) == n + taken
        if taken:
            assert rec.calls[-1][2][0] is value


def test_a_new_nan_scalar_each_call_launches_fast(native):
    """Run-time scalars are values, not constants: a NaN (a new object each
    time, never equal to itself) launches like any other value."""
    rec = Recorder()
    fast = make_fast_launch((D.float32, D.float64), (1.0, np.float64(1)), 0, {}, rec, rec.fail,
                            native=native)
    for _ in range(2):
        assert fast(None, (1,), (float("nan"), np.float64("nan")))
        assert fast(None, (1,), (np.float32("nan"), np.float64("-inf")))
    assert len(rec.calls) == 4



# -- the parameter bytes, through the real launchers and a stand-in driver library ------------------

FAKE_LIBCUDA = r"""
int launches = 0, param_bytes = 0;
unsigned char params[64];  /* the last launch's parameter block */
int cuCtxGetCurrent(void **c) { *c = (void *)0xC0; return 0; }
int cuCtxSetCurrent(void *c) { return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned smem, void *stream, void **p, void **extra) {
    memcpy(params, p[0], param_bytes);  /* one parameter: the block starts at it */
    launches++;
    return 0;
}
int cuLaunchKernelEx() { return 1; }
int cuMemHostAlloc(void **p, size_t n, unsigned f) { static u64 m[64]; *p = m; return 0; }
int cuMemHostGetDevicePointer_v2(u64 *d, void *p, unsigned f) { *d = (u64)p; return 0; }
int cuMemAlloc_v2(u64 *d, size_t n) { static u64 m[64]; *d = (u64)m; return 0; }
int cuModuleGetGlobal_v2(u64 *d, size_t *n, void *m, const char *name) { *n = 0; return 0; }
int cuMemcpyHtoD_v2(u64 d, const void *s, size_t n) { return 0; }
int cuCtxSynchronize(void) { return 0; }
int cuStreamSynchronize(void *s) { return 0; }
"""

PACK_SCRIPT = r"""
import ctypes, json, struct, sys
import numpy as np
from tilecore.runtime import driver as rt
rt.LIBCUDA = sys.argv[1]                        # before the driver is first loaded
from tilecore.host.fastpath import make_fast_launch
from tilecore.host.gpu import _scalar_dtype
from tilecore.language import dtypes as D
from tilecore.testing.fake_driver import build_fake_libcuda
from tilecore.runtime.device import get_device
from tilecore.runtime.launch import LoadedKernel
from tilecore.runtime.params import struct_code
lib = ctypes.CDLL(sys.argv[1])
launches, size = (ctypes.c_int.in_dll(lib, name) for name in ("launches", "param_bytes"))
params = (ctypes.c_ubyte * 64).in_dll(lib, "params")
values = eval(sys.argv[2], {"np": np})
out = []
for name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64"):
    dtype = getattr(D, name)
    fmt = "@" + struct_code(dtype)
    size.value = struct.calcsize(fmt)
    k = LoadedKernel(b"CUBIN", "tc_k", 32, 0, fmt, 1, "k", get_device(0))
    first = dtype.numpy_dtype.type(1)
    fast = {native: make_fast_launch((dtype,), (first,), 0, {}, k.launcher, k.fail, native=native)
            for native in (True, False)}
    for i, v in enumerate(values):
        if _scalar_dtype("v", v) is not dtype:
            continue
        row = [name, i]
        for run in (lambda: k.launch(0, (1, 1, 1), (v,)), lambda: fast[True](None, (1,), (v,)),
                    lambda: fast[False](None, (1,), (v,))):
            before = launches.value
            run()
            row.append(bytes(params[:size.value]).hex() if launches.value > before else None)
        out.append(row)
print(json.dumps([type(f).__name__ for f in fast.values()]))
print(json.dumps(out))
"""

PACKED = ["0", "-7", "-2 ** 31", "2 ** 31 - 1", "2 ** 31", "2 ** 63 - 1", "-2 ** 63", "2 ** 63",
          "2 ** 64 - 1", "True", "1.5", "float('nan')", "float('-inf')", "-0.0", "3.4e38",
          "np.float32(np.nan)", "np.float32(-0.0)", "np.float32(np.finfo(np.float32).max)",
          "np.float32(1e-45)", "np.float64(np.nan)", "np.float64(-1e300)", "np.float64(5e-324)",
          "np.int8(-128)", "np.int16(-32768)", "np.int32(-2 ** 31)", "np.int64(-2 ** 63)",
          "np.int64(2 ** 63 - 1)", "np.uint8(255)", "np.uint16(65535)", "np.uint32(2 ** 32 - 1)",
          "np.uint64(2 ** 64 - 1)", "np.bool_(True)", "np.bool_(False)"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_scalars_are_packed_as_the_general_path_packs_them(tmp_path):
    """Through the real launcher (C, against a stand-in libcuda that keeps the
    parameter block), each scalar the general path launches as dtype d is
    packed by both fast launchers into the same bytes: the value in d's C
    type (NumPy's bytes for the value as a d; NaN stays NaN, -0.0 keeps its
    sign, the extremes are exact)."""
    from tilecore import config
    from tilecore.runtime.driver import native_module
    if not config.native():
        pytest.skip("TILECORE_NATIVE=0 turns the C extension off")
    assert native_module() is not None, "the _cudriver extension was not built"
    lib = build_fake_libcuda(tmp_path, FAKE_LIBCUDA)
    done = subprocess.run([sys.executable, "-c", PACK_SCRIPT, str(lib),
                           "[" + ", ".join(PACKED) + "]"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kinds, rows = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert kinds == ["FastLaunch", "function"]
    seen = set()
    for name, i, general, c_fast, py_fast in rows:
        value = eval(PACKED[i], {"np": np})
        with np.errstate(over="ignore"):
            want = np.array(value, getattr(D, name).numpy_dtype).tobytes().hex()
        assert general == c_fast == py_fast == want, (name, PACKED[i])
        seen.add(i)
    assert seen == set(range(len(PACKED)))        # every value launched as some dtype
