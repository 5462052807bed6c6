"""LoadedKernel over the cuda.bindings driver API, against a recording
stand-in for cuda.bindings.driver: load steps, parameters as the driver reads
them, context switches, cluster and programmatic dependent launches, error texts. (The C launcher's
packing is checked in test_native.py, its launches on the GPU.)"""
import ctypes
from types import SimpleNamespace

import pytest
from cuda.bindings import driver as real

from tilecore.errors import TileLaunchError
from tilecore.language import dtypes as dt
from tilecore.runtime import device_errors
from tilecore.runtime import launch as launch_mod
from tilecore.runtime.bindings_driver import BindingsDriver
from tilecore.runtime.launch import LoadedKernel, launch_error
from tilecore.runtime.params import scalar_bits

OK = real.CUresult.CUDA_SUCCESS
CTYPES = {"Q": ctypes.c_uint64, "i": ctypes.c_int32, "q": ctypes.c_int64, "H": ctypes.c_uint16,
          "f": ctypes.c_float, "?": ctypes.c_bool}


class FakeDriver(SimpleNamespace):
    """Records calls; cuLaunchKernel* read the parameters through kernelParams
    as the real driver does."""

    def __init__(self, fmt, launch_result=OK, load_result=OK):
        super().__init__(CUfunction_attribute=real.CUfunction_attribute,
                         CUlaunchAttribute=real.CUlaunchAttribute,
                         CUlaunchAttributeID=real.CUlaunchAttributeID,
                         CUlaunchConfig=real.CUlaunchConfig)
        self.fmt, self.calls = fmt, []
        self.launch_result, self.load_result = launch_result, load_result
        self.current = 0  # the current context

    def cuCtxGetCurrent(self):
        return (OK, self.current)

    def cuCtxSetCurrent(self, ctx):
        self.calls.append(("set_current", ctx))
        self.current = ctx
        return (OK,)

    def _read_params(self, address):
        codes = self.fmt[1:]
        ptrs = (ctypes.c_void_p * len(codes)).from_address(address)
        return tuple(CTYPES[c].from_address(p).value for c, p in zip(codes, ptrs))

    def cuModuleLoadData(self, image):
        self.calls.append(("load", image))
        return (self.load_result, 0x30D)

    def cuModuleGetFunction(self, module, entry):
        self.calls.append(("function", module, entry))
        return (OK, 0xF00)

    def cuFuncSetAttribute(self, f, attr, value):
        self.calls.append(("attr", f, attr, value))
        return (OK,)

    def cuMemHostAlloc(self, size, flags):  # the device's error record (not in `calls`)
        self.host_memory = ctypes.create_string_buffer(size)
        return (OK, ctypes.addressof(self.host_memory))

    def cuMemHostGetDevicePointer(self, ptr, flags):
        return (OK, ptr)

    def cuMemAlloc(self, size):  # the device's claim counter (not in `calls`)
        return (OK, 0xC1A1_0000)

    def cuMemcpyHtoD(self, dptr, src, size):  # zeroes it
        return (OK,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(("launch", f, (gx, gy, gz), (bx, by, bz), smem, stream,
                           self._read_params(params), extra))
        return (self.launch_result,)

    def cuLaunchKernelEx(self, config, f, params, extra):
        self.calls.append(("launch_ex", f, (config.gridDimX, config.gridDimY, config.gridDimZ),
                           (config.blockDimX, config.blockDimY, config.blockDimZ),
                           config.sharedMemBytes, int(config.hStream),
                           tuple(_attr(a) for a in config.attrs[:config.numAttrs]),
                           self._read_params(params)))
        return (self.launch_result,)


def _attr(a):
    """A launch attribute as (name, value)."""
    if a.id == real.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        return ("cluster", (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z))
    if a.id == real.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        return ("pdl", a.value.programmaticStreamSerializationAllowed)
    raise AssertionError(f"unexpected launch attribute {a.id}")


CTX = 0xC0
FN = 0xF00


def fake_device():
    dev = SimpleNamespace(name="FakeGPU", arch="sm_90", max_shared_optin=227 * 1024, current=0,
                          context=CTX)
    dev.make_current = lambda: setattr(dev, "current", dev.current + 1)
    return dev


def make(monkeypatch, fmt="@QiqHf", smem=0, cluster=1, small_l1=False, pdl=False, **kw):
    drv = FakeDriver(fmt, **kw)
    api = BindingsDriver(drv)
    monkeypatch.setattr(launch_mod, "driver", lambda: api)
    monkeypatch.setattr(device_errors, "driver", lambda: api)
    monkeypatch.setattr(device_errors, "_devices", {})
    dev = fake_device()
    k = LoadedKernel(b"CUBIN", "tile_add", 128, smem, fmt, cluster, "add", dev,
                     small_l1=small_l1, pdl=pdl)
    return k, drv, dev


def test_load_and_launch(monkeypatch):
    k, drv, dev = make(monkeypatch)
    assert drv.calls == [("load", b"CUBIN"), ("function", 0x30D, b"tile_add")]
    half = scalar_bits(dt.float16, -0.5)
    k.launch(0x1234, (10, 2, 1), (0xDEAD_BEEF_0000, -7, 2 ** 40, half, 0.25))
    k.launch(0, (1, 1, 1), (0x10, 1, 2, 0, 1.0))
    drv.current = 0x77  # another context became current: switch back before launching
    k.launch(0, (1, 1, 1), (0x10, 1, 2, 0, 1.0))
    assert drv.calls[2:] == [
        ("set_current", CTX),
        ("launch", FN, (10, 2, 1), (128, 1, 1), 0, 0x1234,
         (0xDEAD_BEEF_0000, -7, 2 ** 40, 0xB800, 0.25), 0),
        ("launch", FN, (1, 1, 1), (128, 1, 1), 0, 0, (0x10, 1, 2, 0, 1.0), 0),
        ("set_current", CTX),
        ("launch", FN, (1, 1, 1), (128, 1, 1), 0, 0, (0x10, 1, 2, 0, 1.0), 0),
    ]
    assert dev.current == 1  # at load


def test_large_shared_memory_opts_in(monkeypatch):
    _, drv, _ = make(monkeypatch, smem=48 * 1024)
    assert [c[0] for c in drv.calls] == ["load", "function"]
    _, drv, _ = make(monkeypatch, smem=100 * 1024)
    assert drv.calls[-1] == ("attr", FN,
                             real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             100 * 1024)


def test_small_l1_asks_for_the_largest_carveout(monkeypatch):
    _, drv, _ = make(monkeypatch, small_l1=True)
    assert drv.calls[-1] == (
        "attr", FN, real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)


def test_too_much_shared_memory(monkeypatch):
    with pytest.raises(TileLaunchError) as e:
        make(monkeypatch, smem=300 * 1024)
    assert str(e.value) == ('Kernel "add" needs 307200 bytes of shared memory per block, more '
                            "than the 232448 bytes FakeGPU (sm_90) offers")


def test_cluster_launch(monkeypatch):
    k, drv, _ = make(monkeypatch, fmt="@Qi", smem=64, cluster=2)
    k.launch(0x99, (8, 1, 1), (0x1000, 5))
    assert drv.calls[-1] == ("launch_ex", FN, (8, 1, 1), (128, 1, 1), 64, 0x99,
                             (("cluster", (2, 1, 1)),), (0x1000, 5))
    k.launch(0x99, (7, 1, 1), (0x1000, 5))  # 2 does not divide 7: no cluster
    assert drv.calls[-1] == ("launch", FN, (7, 1, 1), (128, 1, 1), 64, 0x99, (0x1000, 5), 0)


def test_programmatic_dependent_launch(monkeypatch):
    k, drv, _ = make(monkeypatch, fmt="@Qi", pdl=True)
    k.launch(0x99, (5, 3, 1), (0x1000, 5))
    assert drv.calls[-1] == ("launch_ex", FN, (5, 3, 1), (128, 1, 1), 0, 0x99,
                             (("pdl", 1),), (0x1000, 5))


def test_programmatic_dependent_launch_with_clusters(monkeypatch):
    k, drv, _ = make(monkeypatch, fmt="@Qi", cluster=4, pdl=True)
    k.launch(0x99, (8, 1, 1), (0x1000, 5))
    assert drv.calls[-1] == ("launch_ex", FN, (8, 1, 1), (128, 1, 1), 0, 0x99,
                             (("cluster", (4, 1, 1)), ("pdl", 1)), (0x1000, 5))
    k.launch(0x99, (6, 1, 1), (0x1000, 6))  # 4 does not divide 6: no cluster, still PDL
    assert drv.calls[-1] == ("launch_ex", FN, (6, 1, 1), (128, 1, 1), 0, 0x99,
                             (("pdl", 1),), (0x1000, 6))


@pytest.mark.parametrize("code,pdl,grid,message", [
    ("CUDA_ERROR_INVALID_VALUE", False, (0, 1, 1),
     "a grid dimension is out of range (x must be 1..2147483647, y and z 1..65535), or the "
     "block has too many threads or too much shared memory (grid (0, 1, 1), block 128 threads, "
     "dynamic shared memory 0 bytes)"),
    ("CUDA_ERROR_NOT_SUPPORTED", True, (4, 1, 1),
     "the device or driver does not support a launch attribute this launch uses (programmatic "
     "dependent launch: set TILECORE_PDL=0; clusters: num_ctas=1) (grid (4, 1, 1), block 128 "
     "threads, dynamic shared memory 0 bytes, programmatic dependent launch)"),
])
def test_launch_error_names_the_kernel(monkeypatch, code, pdl, grid, message):
    k, _, _ = make(monkeypatch, fmt="@Q", pdl=pdl, launch_result=getattr(real.CUresult, code))
    with pytest.raises(TileLaunchError) as e:
        k.launch(0, grid, (0,))
    assert str(e.value) == f'Launch of kernel "add" failed with {code}: {message}'


def test_load_error(monkeypatch):
    with pytest.raises(TileLaunchError) as e:
        make(monkeypatch, load_result=real.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU)
    assert str(e.value) == (
        'Loading of kernel "add" failed with CUDA_ERROR_NO_BINARY_FOR_GPU: the cubin was '
        "compiled for another architecture than this device's (entry 'tile_add' on FakeGPU, "
        "sm_90)")


def test_launch_error_texts():
    err = launch_error("k", real.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, detail="grid (1, 1, 1)")
    assert isinstance(err, RuntimeError)
    assert str(err) == ('Launch of kernel "k" failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: '
                        "the block needs more registers than one SM provides; use fewer threads "
                        "per block (grid (1, 1, 1))")
    assert str(launch_error("k", real.CUresult.CUDA_ERROR_OUT_OF_MEMORY)) == (
        'Launch of kernel "k" failed with CUDA_ERROR_OUT_OF_MEMORY')
