"""End-to-end runtime checks on a real GPU (skipped without one): device info,
loading a cubin, launching with packed scalars, clusters, streams, arrays;
launches go through both driver implementations (the C extension and
cuda.bindings)."""
import time

import numpy as np
import pytest

from tilecore.language import dtypes as dt
from tilecore.runtime import get_device, has_gpu
from tilecore.runtime.arrays import as_device_array
from tilecore.runtime import driver as rt_driver
from tilecore.runtime.bindings_driver import BindingsDriver
from tilecore.runtime.driver import check
from tilecore.runtime.launch import LoadedKernel
from tilecore.runtime.params import scalar_bits
from tilecore.runtime.streams import stream_handle

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs a GPU")]

SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void axpb(float* out, const float* x, int n, long long off, __half a, bool neg)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = __half2float(a) * x[i] + (float)off; out[i] = neg ? -v : v; }
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_rank(int* out)
{
    unsigned r; asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    if (threadIdx.x == 0) out[blockIdx.x] = (int)r;
}
extern "C" __global__ void big_smem(int* out)
{
    extern __shared__ int buf[];
    buf[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
"""


@pytest.fixture(scope="module")
def device():
    return get_device(0)


@pytest.fixture(params=["native", "bindings"], autouse=True)
def api(request, monkeypatch):
    """Run each test with the driver calls made through one implementation."""
    if request.param == "native":
        native = rt_driver.native_module()
        assert native is not None, "the _cudriver extension was not built"
        native.open(rt_driver.LIBCUDA)
        impl = native
    else:
        impl = BindingsDriver()
    assert check(impl.init(0)) is None
    monkeypatch.setattr(rt_driver, "_driver", impl)
    return impl


@pytest.fixture(scope="module")
def cubin(device):
    from cuda.core import Program, ProgramOptions
    import cuda.pathfinder
    inc = cuda.pathfinder.find_nvidia_header_directory("cudart")
    opts = ProgramOptions(arch=device.arch, include_path=[inc] if inc else None, std="c++17")
    return Program(SOURCE, "c++", opts).compile("cubin").code


class Mem:
    """A raw device allocation with host copies, and a CAI view."""

    def __init__(self, nbytes):
        from cuda.bindings import driver as drv
        self.drv = drv
        self.ptr = int(check(self.drv.cuMemAlloc(nbytes)))
        self.nbytes = nbytes

    def upload(self, arr):
        check(self.drv.cuMemcpyHtoD(self.ptr, arr.ctypes.data, arr.nbytes))

    def download(self, dtype, n):
        out = np.empty(n, dtype)
        check(self.drv.cuCtxSynchronize())
        check(self.drv.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes))
        return out

    def cai(self, shape, typestr):
        return type("CAI", (), {"__cuda_array_interface__": {
            "shape": shape, "typestr": typestr, "data": (self.ptr, False), "version": 3,
            "strides": None}})()


def test_device_info(device):
    assert device.arch.startswith("sm_") and device.sm_count > 0
    assert device.max_shared_optin >= 48 * 1024
    assert get_device(0) is device
    device.make_current()


def test_launch_scalars(device, cubin):
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    mx, mo = Mem(4 * n), Mem(4 * n)
    mx.upload(x)
    k = LoadedKernel(cubin, "axpb", 128, 0, "@QQiqH?", 1, "axpb", device)
    arr = as_device_array(mo.cai((n,), "<f4"), "out")
    assert arr.device_id == 0 and arr.dtype is dt.float32
    k.launch(0, ((n + 127) // 128, 1, 1), (arr.ptr, mx.ptr, n, 3, scalar_bits(dt.float16, 1.5), True))
    np.testing.assert_allclose(mo.download(np.float32, n), -(1.5 * x + 3), rtol=1e-6, atol=1e-6)


def _below_sm90() -> bool:
    return has_gpu() and get_device(0).compute_capability < (9, 0)


@pytest.mark.skipif(_below_sm90(), reason="thread-block clusters need sm_90 or newer")
def test_cluster_launch(device, cubin):
    m = Mem(4 * 8)
    k = LoadedKernel(cubin, "cluster_rank", 32, 0, "@Q", 2, "cluster_rank", device)
    k.launch(0, (8, 1, 1), (m.ptr,))
    assert m.download(np.int32, 8).tolist() == [0, 1] * 4


def test_big_shared_memory(device, cubin):
    smem = 64 * 1024
    m = Mem(4 * 256)
    k = LoadedKernel(cubin, "big_smem", 256, smem, "@Q", 1, "big_smem", device)
    k.launch(0, (1, 1, 1), (m.ptr,))
    assert m.download(np.int32, 256).tolist() == [(i + 1) % 256 for i in range(256)]


def test_bad_launch_is_tile_launch_error(device, cubin):
    from tilecore.errors import TileLaunchError
    k = LoadedKernel(cubin, "big_smem", 2048, 0, "@Q", 1, "big_smem", device)
    with pytest.raises(TileLaunchError, match='Launch of kernel "big_smem" failed with CUDA_ERROR_INVALID_VALUE'):
        k.launch(0, (1, 1, 1), (0,))


def test_streams_and_launch_overhead(device, cubin):
    from cuda.core import Device as CoreDevice
    core = CoreDevice(0)
    core.set_current()
    s = core.create_stream()
    h = stream_handle(s)
    assert h == int(s.handle) and h != 0
    n = 1024
    mx, mo = Mem(4 * n), Mem(4 * n)
    mx.upload(np.arange(n, dtype=np.float32))
    k = LoadedKernel(cubin, "axpb", 128, 0, "@QQiqH?", 1, "axpb", device)
    values = (mo.ptr, mx.ptr, n, 0, scalar_bits(dt.float16, 1.0), False)
    for _ in range(100):
        k.launch(h, (8, 1, 1), values)
    s.sync()
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        k.launch(stream_handle(s), (8, 1, 1), values)
    t1 = time.perf_counter()
    s.sync()
    print(f"\nLoadedKernel.launch host overhead ({type(k.launcher).__name__}): "
          f"{(t1 - t0) / reps * 1e6:.2f} us/launch")
    np.testing.assert_array_equal(mo.download(np.float32, n), mx.download(np.float32, n))


def test_torch_and_cupy_arrays(device):
    for mod in ("torch", "cupy"):
        try:
            lib = __import__(mod)
        except ImportError:
            continue
        if mod == "torch":
            t = lib.arange(12, device="cuda", dtype=lib.bfloat16).reshape(3, 4)[:, ::2]
            a = as_device_array(t, "t")
            assert (a.ptr, a.shape, a.strides, a.dtype, a.device_id) == (
                t.data_ptr(), (3, 2), (4, 2), dt.bfloat16, 0)
            s = lib.cuda.Stream()
            assert stream_handle(s) == s.cuda_stream
        else:
            c = lib.arange(12, dtype=lib.float32).reshape(3, 4)[:, ::2]
            a = as_device_array(c, "c")
            assert (a.ptr, a.shape, a.strides, a.dtype) == (c.data.ptr, (3, 2), (4, 2), dt.float32)
            s = lib.cuda.Stream()
            assert stream_handle(s) == s.ptr
