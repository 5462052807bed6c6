"""Device-array ingestion from CAI, DLPack, torch and CuPy look-alikes; host
arrays refused; device and overlap checks across arguments."""
import ctypes

import ml_dtypes
import numpy as np
import pytest

from tilecore.errors import TileTypeError, TileValueError
from tilecore.language import dtypes as dt
from tilecore.runtime import arrays
from tilecore.runtime.arrays import (DeviceArray, as_device_array, check_no_overlap,
                                     check_same_device, classify_arg, memory_extent)

# ---- stand-ins for GPU array producers, usable without a GPU: a DLPack producer
# built with ctypes, a __cuda_array_interface__ object, and look-alikes of
# torch.Tensor / cupy.ndarray (matched by module and class name).


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

KDL_CPU, KDL_CUDA = 1, 2
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6


class FakeDLPack:
    """Exports an unversioned DLPack capsule describing memory it does not own."""

    def __init__(self, ptr, shape, strides, code, bits, device=(KDL_CUDA, 0)):
        self.ptr, self.shape, self.strides = ptr, shape, strides
        self.code, self.bits, self.device = code, bits, device
        self._alive = []  # ctypes storage referenced by the capsules

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        n = len(self.shape)
        shape = (ctypes.c_int64 * n)(*self.shape)
        strides = None if self.strides is None else (ctypes.c_int64 * n)(*self.strides)
        managed = _DLManagedTensor()
        managed.dl_tensor = _DLTensor(self.ptr, _DLDevice(*self.device), n,
                                      _DLDataType(self.code, self.bits, 1), shape, strides, 0)
        self._alive.append((shape, strides, managed))
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)


class FakeCAI:
    """An object exposing __cuda_array_interface__ v3."""

    def __init__(self, ptr, shape, typestr, strides=None, mask=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3, "mask": mask,
                                         "stream": None}


class _Device:
    def __init__(self, kind, index):
        self.type, self.index, self.id = kind, index, index

    def __str__(self):
        return f"{self.type}:{self.index}" if self.type == "cuda" else self.type


class _TorchDType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


def _tensor_init(self, ptr, shape, strides, dtype_name, device="cuda", index=0):
    self._ptr, self.shape, self._strides = ptr, shape, strides
    self.dtype = _TorchDType(dtype_name)
    self.device = _Device(device, index)
    self.is_cuda = device == "cuda"


FakeTensor = type("Tensor", (), {
    "__module__": "torch._tensor",
    "__init__": _tensor_init,
    "data_ptr": lambda self: self._ptr,
    "stride": lambda self: self._strides,
    # a real tensor has both protocols; the fast path must win over them
    "__cuda_array_interface__": property(lambda self: 1 / 0),
    "__dlpack__": lambda self, **kw: 1 / 0,
})


class _CupyMemoryPointer:
    def __init__(self, ptr):
        self.ptr = ptr


def _cupy_init(self, ptr, shape, byte_strides, dtype, device=0):
    import numpy as np
    self.data, self.shape, self.strides = _CupyMemoryPointer(ptr), shape, byte_strides
    self.dtype, self.device = np.dtype(dtype), _Device("cuda", device)


FakeCupyArray = type("ndarray", (), {
    "__module__": "cupy._core.core",
    "__init__": _cupy_init,
    "__cuda_array_interface__": property(lambda self: 1 / 0),
})


# ---- tests

BASE = 0x7F00_0000_0000
HOST_HINT = ("kernel arrays must be in GPU memory (e.g. CuPy arrays or PyTorch CUDA tensors); "
             "to run on the CPU, pass NumPy arrays for all array arguments (the interpreter) "
             "or set TILECORE_INTERPRET=1")


@pytest.fixture
def pointer_devices(monkeypatch):
    """CAI pointers resolve to device 1 without asking a driver."""
    seen = []

    def fake(ptr):
        seen.append(ptr)
        return 1

    monkeypatch.setattr(arrays, "_pointer_device", fake)
    return seen


def test_cai_contiguous_and_strided(pointer_devices):
    a = as_device_array(FakeCAI(BASE, (3, 4), "<f4"), "x")
    assert a == DeviceArray(BASE, (3, 4), (4, 1), dt.float32, 1)
    assert a.itemsize == 4 and a.size == 12
    b = as_device_array(FakeCAI(BASE, (3, 2), "<f8", strides=(64, 16)), "y")
    assert b.strides == (8, 2) and b.dtype is dt.float64
    assert pointer_devices == [BASE, BASE]


@pytest.mark.parametrize("typestr,dtype", [("|b1", dt.bool_), ("|i1", dt.int8), ("<u2", dt.uint16),
                                           ("<i8", dt.int64), ("<f2", dt.float16)])
def test_cai_dtypes(pointer_devices, typestr, dtype):
    assert as_device_array(FakeCAI(BASE, (2,), typestr), "x").dtype is dtype


def test_cai_empty_array_has_unknown_device(pointer_devices):
    a = as_device_array(FakeCAI(0, (0, 5), "<f4"), "x")
    assert a.device_id == -1 and a.strides == (5, 1) and pointer_devices == []


def test_cai_errors(pointer_devices):
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeCAI(BASE, (2,), "<V2"), "x")
    assert str(e.value) == ('Invalid argument "x": dtype \'|V2\' is an opaque 2-byte type '
                            "(bfloat16 is exported this way and cannot be told apart); pass the "
                            "array through DLPack instead")
    with pytest.raises(TileValueError) as e:
        as_device_array(FakeCAI(BASE, (2, 2), "<f4", strides=(8, 6)), "x")
    assert str(e.value) == ('Invalid argument "x": strides (8, 6) (bytes) are not multiples of '
                            "the item size 4")
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeCAI(BASE, (2,), ">f4"), "x")
    assert str(e.value) == 'Invalid argument "x": big-endian dtype \'>f4\' is not supported'
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeCAI(BASE, (2,), "<c8"), "z")
    assert str(e.value) == 'Invalid argument "z": dtype complex64 has no tilecore equivalent'
    with pytest.raises(TileTypeError, match="masked arrays"):
        as_device_array(FakeCAI(BASE, (2,), "<f4", mask=object()), "x")


def test_dlpack_cuda_arrays():
    a = as_device_array(FakeDLPack(BASE, (3, 4), (8, 2), KDL_FLOAT, 32, (KDL_CUDA, 2)), "x")
    assert a == DeviceArray(BASE, (3, 4), (8, 2), dt.float32, 2)
    b = as_device_array(FakeDLPack(BASE, (3, 4), None, KDL_BFLOAT, 16), "y")
    assert b == DeviceArray(BASE, (3, 4), (4, 1), dt.bfloat16, 0)
    assert as_device_array(FakeDLPack(BASE, (5,), (1,), KDL_BOOL, 8), "m").dtype is dt.bool_
    assert as_device_array(FakeDLPack(BASE, (5,), (1,), KDL_INT, 64), "n").dtype is dt.int64


def test_dlpack_cpu_is_refused():
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeDLPack(BASE, (5,), (1,), KDL_FLOAT, 32, (KDL_CPU, 0)), "x")
    assert str(e.value) == ('Invalid argument "x": a DLPack tensor of type FakeDLPack on the CPU '
                            f"is in host memory; {HOST_HINT}")


def test_numpy_is_refused_with_hint():
    with pytest.raises(TileTypeError) as e:
        as_device_array(np.zeros(3, np.float32), "out")
    assert str(e.value) == f'Invalid argument "out": a NumPy array is in host memory; {HOST_HINT}'


def test_torch_fast_path():
    t = FakeTensor(BASE, (4, 6), (1, 4), "bfloat16", "cuda", 3)
    assert as_device_array(t, "x") == DeviceArray(BASE, (4, 6), (1, 4), dt.bfloat16, 3)
    for name, dtype in [("float32", dt.float32), ("bool", dt.bool_), ("uint64", dt.uint64),
                        ("float8_e4m3fn", dt.float8_e4m3fn)]:
        assert as_device_array(FakeTensor(BASE, (1,), (1,), name), "x").dtype is dtype
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeTensor(BASE, (1,), (1,), "complex64"), "w")
    assert str(e.value) == 'Invalid argument "w": dtype torch.complex64 has no tilecore equivalent'
    with pytest.raises(TileTypeError) as e:
        as_device_array(FakeTensor(BASE, (1,), (1,), "float32", "cpu"), "x")
    assert str(e.value) == ("Invalid argument \"x\": a PyTorch tensor on device 'cpu' is in "
                            f"host memory; {HOST_HINT}")


def test_cupy_fast_path():
    a = FakeCupyArray(BASE, (2, 3), (24, 8), np.int64, device=1)
    assert as_device_array(a, "x") == DeviceArray(BASE, (2, 3), (3, 1), dt.int64, 1)
    b = FakeCupyArray(BASE, (4,), (2,), ml_dtypes.bfloat16)
    assert as_device_array(b, "x").dtype is dt.bfloat16


def test_non_array_is_refused():
    with pytest.raises(TileTypeError) as e:
        as_device_array([1, 2], "x")
    assert str(e.value) == ('Invalid argument "x": expected a GPU array (an object with '
                            "__cuda_array_interface__ or __dlpack__, e.g. a CuPy array or a "
                            "PyTorch CUDA tensor), got list")


def test_extractor_is_cached_per_type(pointer_devices):
    as_device_array(FakeCAI(BASE, (1,), "<f4"), "x")
    assert arrays._extractors[FakeCAI] is arrays._extract_cai


def test_classify_arg():
    assert classify_arg(3) == classify_arg(2.5) == classify_arg(True) == "scalar"
    assert classify_arg(np.float16(1)) == classify_arg(np.int8(1)) == "scalar"
    assert classify_arg(np.zeros(2)) == "host"
    assert classify_arg(FakeCAI(BASE, (1,), "<f4")) == "device"
    assert classify_arg(FakeTensor(BASE, (1,), (1,), "float32")) == "device"
    assert classify_arg(FakeTensor(BASE, (1,), (1,), "float32", "cpu")) == "host"
    assert classify_arg(FakeCupyArray(BASE, (1,), (4,), np.float32)) == "device"
    assert classify_arg(FakeDLPack(BASE, (1,), None, KDL_FLOAT, 32)) == "device"
    assert classify_arg(FakeDLPack(BASE, (1,), None, KDL_FLOAT, 32, (KDL_CPU, 0))) == "host"
    assert classify_arg("text") == classify_arg(None) == "other"


def _arr(ptr, shape, strides, dtype=dt.float32, device=0):
    return DeviceArray(ptr, shape, strides, dtype, device)


def test_same_device():
    a, b, e = _arr(BASE, (2,), (1,)), _arr(BASE, (2,), (1,), device=0), _arr(0, (0,), (1,), device=-1)
    assert check_same_device([("a", a), ("e", e), ("b", b)]) == 0
    assert check_same_device([("e", e)]) == -1
    with pytest.raises(TileValueError) as err:
        check_same_device([("e", e), ("a", a), ("c", _arr(BASE, (2,), (1,), device=1))])
    assert str(err.value) == ('Arguments "a" and "c" are on different devices (cuda:0 and '
                              "cuda:1); all arrays of a launch must be on the same GPU")


def test_memory_extent():
    assert memory_extent(_arr(BASE, (3, 4), (4, 1))) == (BASE, BASE + 48)
    assert memory_extent(_arr(BASE, (3, 2), (8, 2))) == (BASE, BASE + (16 + 2 + 1) * 4)
    assert memory_extent(_arr(BASE, (4,), (-1,))) == (BASE - 12, BASE + 4)
    assert memory_extent(_arr(BASE, (4, 0), (1, 1))) == (BASE, BASE)
    assert memory_extent(_arr(BASE, (5,), (0,), dt.int64)) == (BASE, BASE + 8)


def test_no_overlap():
    a = _arr(BASE, (4,), (1,))
    b = _arr(BASE + 16, (4,), (1,))          # adjacent: [BASE+16, BASE+32)
    empty = _arr(BASE + 4, (0,), (1,))
    check_no_overlap([("a", a), ("b", b), ("e", empty)])
    check_no_overlap([])
    with pytest.raises(TileValueError) as e:
        check_no_overlap([("b", b), ("c", _arr(BASE + 12, (2,), (1,))), ("a", a)])
    lo = BASE
    assert str(e.value) == (f'Arguments "a" and "c" overlap in memory (bytes [{lo:#x}, '
                            f"{lo + 16:#x}) and [{lo + 12:#x}, {lo + 20:#x}))")


def test_overlap_found_past_a_nested_array():
    big = _arr(BASE, (100,), (1,))
    inner = _arr(BASE + 8, (1,), (1,))
    late = _arr(BASE + 200, (4,), (1,))
    with pytest.raises(TileValueError, match='"big" and "inner"'):
        check_no_overlap([("late", late), ("inner", inner), ("big", big)])
    with pytest.raises(TileValueError, match='"x" and "x2"'):
        check_no_overlap([("x", late), ("x2", late)])


def test_interleaved_views_do_not_overlap():
    even = _arr(BASE, (50,), (2,))          # x[0::2] of a float32 buffer
    odd = _arr(BASE + 4, (50,), (2,))       # x[1::2]
    check_no_overlap([("even", even), ("odd", odd)])
    rows = _arr(BASE, (4, 8), (16, 1))      # every other row of a (8, 8) float32 matrix...
    other_rows = _arr(BASE + 32, (4, 8), (16, 1))  # ...and the rows between them
    check_no_overlap([("rows", rows), ("other_rows", other_rows)])
    left = _arr(BASE, (8, 4), (8, 1))       # left and right halves of the same matrix
    right = _arr(BASE + 16, (8, 4), (8, 1))
    check_no_overlap([("left", left), ("right", right)])
    wide = _arr(BASE + 16, (8, 5), (8, 1))  # one column too many: overlaps the next row
    with pytest.raises(TileValueError, match='"left" and "wide"'):
        check_no_overlap([("left", left), ("wide", wide)])
    half_row = _arr(BASE + 16, (4, 8), (16, 1))  # starts mid-row of `rows`
    with pytest.raises(TileValueError, match='"rows" and "half_row"'):
        check_no_overlap([("rows", rows), ("half_row", half_row)])
    with pytest.raises(TileValueError, match='"even" and "shifted"'):
        check_no_overlap([("even", even), ("shifted", _arr(BASE + 8, (50,), (2,)))])


def test_overlap_check_is_sound_on_random_layouts():
    """Whenever check_no_overlap accepts two arrays, they really share no byte
    (brute force over 3000 random 1-D and 2-D layouts, negative strides included)."""
    rng = np.random.default_rng(3)
    accepted = 0
    for _ in range(3000):
        arrays = []
        for _ in range(2):
            nd = int(rng.integers(1, 3))
            shape = tuple(int(x) for x in rng.integers(1, 5, nd))
            strides = tuple(int(x) * int(rng.choice([-1, 1])) for x in rng.integers(1, 9, nd))
            arrays.append(_arr(BASE + 4 * int(rng.integers(40, 64)), shape, strides))

        def byte_set(a):
            out = set()
            for idx in np.ndindex(*a.shape):
                addr = a.ptr + 4 * sum(i * s for i, s in zip(idx, a.strides))
                out.update(range(addr, addr + 4))
            return out

        try:
            check_no_overlap([("a", arrays[0]), ("b", arrays[1])])
        except TileValueError:
            continue
        accepted += 1
        assert not byte_set(arrays[0]) & byte_set(arrays[1]), arrays
    assert accepted > 100
