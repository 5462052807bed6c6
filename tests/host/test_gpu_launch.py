"""Launching tile kernels on the GPU from the public API: CuPy and PyTorch
arrays, streams, strided views, clusters (num_ctas), TILECORE_INTERPRET with
device arrays, bad input."""
import numpy as np
import pytest

import tilecore as ct

pytestmark = pytest.mark.gpu


@ct.kernel
def axpy(x, y, out, alpha, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ty = ct.load(y, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(bid,), tile=(alpha * tx + ty).astype(out.dtype))


@ct.kernel(num_ctas=2)
def clustered_copy(x, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(out, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)))


def _ref(x, y, alpha):
    return alpha * x.astype(np.float64) + y


@ct.kernel
def zero_d_update(x, out):
    ct.store(out, (), ct.load(x, (), ()) * 2 + 1)


def test_zero_d_arrays():
    cp = pytest.importorskip("cupy")
    x, out = cp.asarray(np.float32(-3.5)).reshape(()), cp.zeros((), cp.float32)
    ct.launch(None, (1,), zero_d_update, (x, out))
    assert out.shape == () and float(out) == -6.0


def test_cupy_arrays_and_streams():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(5000).astype(np.float32), rng.standard_normal(5000).astype(np.float32)
    dx, dy, dout = cp.asarray(x), cp.asarray(y), cp.full(5000, cp.nan, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    for s in (None, stream, stream.ptr):
        dout.fill(cp.nan)
        ct.launch(s, (ct.cdiv(5000, 1024),), axpy, (dx, dy, dout, 2.5, 1024))
        cp.cuda.Device().synchronize()
        np.testing.assert_allclose(cp.asnumpy(dout), _ref(x, y, 2.5), rtol=1e-6, atol=1e-6)


def test_torch_tensors_bfloat16_and_strided_views():
    torch = pytest.importorskip("torch")
    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    ct.launch(torch.cuda.current_stream(), (4,), axpy, (x, y, out, 0.5, 1024))
    torch.cuda.synchronize()
    # alpha is a float32 kernel argument, so alpha * x + y is computed in float32
    want = (0.5 * x.float() + y.float()).to(torch.bfloat16)
    assert torch.equal(out, want)
    big = torch.randn(8192, device="cuda")
    xs, ys = big[::2], big[1::2]                 # stride-2 views
    o = torch.empty(4096, device="cuda")
    ct.launch(None, (4,), axpy, (xs, ys, o, 1.0, 1024))
    torch.cuda.synchronize()
    assert torch.allclose(o, xs + ys)


def test_cluster_launch_with_divisible_and_odd_grids():
    cp = pytest.importorskip("cupy")
    x = cp.arange(3 * 256, dtype=cp.float32)
    for blocks in (2, 3):                        # 3 blocks: not divisible, runs without clusters
        out = cp.zeros_like(x)
        ct.launch(None, (blocks,), clustered_copy, (x, out, 256))
        cp.cuda.Device().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(out[:blocks * 256]),
                                      cp.asnumpy(x[:blocks * 256]))


def test_interpret_env_runs_device_arrays_on_the_cpu(monkeypatch):
    cp = pytest.importorskip("cupy")
    monkeypatch.setenv("TILECORE_INTERPRET", "1")

    @ct.kernel
    def twice(x, out, TILE: ct.Constant[int]):
        ct.store(out, index=(0,), tile=ct.load(x, index=(0,), shape=(TILE,)) * 2)

    x = cp.arange(8, dtype=cp.float32)
    out = cp.zeros_like(x)
    ct.launch(None, (1,), twice, (x, out, 8))
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(8, dtype=np.float32) * 2)
    (fn,) = twice._ir.values()                   # lowered for the interpreter, never compiled
    assert not [k for k in twice.backend_cache if isinstance(k, tuple)
                and twice.backend_cache[k].loaded is not None]


def test_host_arrays_with_device_arrays_is_an_error():
    cp = pytest.importorskip("cupy")
    with pytest.raises(TypeError, match="both host arrays"):
        ct.launch(None, (1,), axpy, (np.zeros(8, np.float32), cp.zeros(8, cp.float32),
                                     cp.zeros(8, cp.float32), 1.0, 8))


def test_overlapping_device_arrays_only_when_read():
    cp = pytest.importorskip("cupy")
    buf = cp.arange(16, dtype=cp.float32)
    out = cp.zeros(8, cp.float32)
    ct.launch(None, (1,), axpy, (buf[:8], buf[4:12], out, 1.0, 8))    # both only read
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(8) + np.arange(4, 12))
    with pytest.raises(ValueError,
                       match=r'overlap in memory \(bytes .*\), and the kernel writes "out"'):
        ct.launch(None, (1,), axpy, (buf[:8], buf[8:], buf[4:12], 1.0, 8))


@pytest.mark.parametrize("native", ["1", "0"], ids=["C", "Python"])
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_fast_path_follows_new_arrays_and_rechecks_overlap(lib, native, monkeypatch):
    """Repeated launches take the fast launcher (C or Python); new arrays, other
    shapes and overlapping arguments still get the general path's checks."""
    from tilecore.runtime.driver import driver
    driver()  # loaded as configured for the session, before the variable changes
    monkeypatch.setenv("TILECORE_NATIVE", native)  # picks the fast launcher's implementation
    mod = pytest.importorskip(lib)
    rng = np.random.default_rng(4)
    host = [rng.standard_normal(3000).astype(np.float32) for _ in range(4)]
    if lib == "torch":
        dev = [mod.tensor(h, device="cuda") for h in host]
        to_np = lambda t: t.cpu().numpy()  # noqa: E731
    else:
        dev = [mod.asarray(h) for h in host]
        to_np = mod.asnumpy
    outs = [mod.empty_like(dev[0]) for _ in range(2)]
    axpy.backend_cache.clear()
    for i in range(6):  # ping-pong between two argument sets
        x, y, out = dev[i % 2], dev[2 + i % 2], outs[i % 2]
        ct.launch(None, (3,), axpy, (x, y, out, float(i), 1024))
        np.testing.assert_allclose(to_np(out), _ref(host[i % 2], host[2 + i % 2], i),
                                   rtol=1e-6, atol=1e-6)
    fast = axpy.backend_cache.get("fast_launch")
    assert (type(fast).__name__ == "FastLaunch") is (native == "1")
    # only the first set took the general path: the second one's arrays are disjoint
    assert len(axpy.backend_cache["devices"]) == 1
    half = dev[0][:1502]  # 6008 bytes: partial vectors at the end, another specialization
    out_half = mod.empty_like(half)
    ct.launch(None, (2,), axpy, (half, dev[2][:1502], out_half, 1.0, 1024))
    np.testing.assert_allclose(to_np(out_half), host[0][:1502] + host[2][:1502], rtol=1e-6)
    with pytest.raises(ValueError, match="overlap"):
        ct.launch(None, (3,), axpy, (dev[0], dev[2], dev[0], 1.0, 1024))
    # an output whose elements overlap (stride 0) is refused by the fast path too
    if lib == "torch":
        folded = mod.zeros(1, device="cuda").expand(3000)
    else:
        folded = mod.lib.stride_tricks.as_strided(mod.zeros(1, mod.float32), (3000,), (0,))
    with pytest.raises(ValueError, match="elements overlap one another"):
        ct.launch(None, (3,), axpy, (dev[0], dev[2], folded, 1.0, 1024))


@pytest.mark.parametrize("native", ["1", "0"], ids=["C", "Python"])
def test_two_specializations_in_turn_both_launch_fast(native, monkeypatch):
    """A kernel launched with two kinds of arguments in turn (here two tile
    constants, as the two passes of a reduction are) keeps a fast launcher for
    each: after one general launch of each kind, none takes the general path."""
    from tilecore.host import launch as host_launch
    from tilecore.runtime.driver import driver
    cp = pytest.importorskip("cupy")
    driver()
    monkeypatch.setenv("TILECORE_NATIVE", native)
    x, y = cp.arange(2048, dtype=cp.float32), cp.ones(2048, cp.float32)
    outs = {256: cp.empty_like(x), 1024: cp.empty_like(x)}
    axpy.backend_cache.clear()
    for tile in (256, 1024):
        ct.launch(None, (2048 // tile,), axpy, (x, y, outs[tile], 2.0, tile))
    general = []
    real = host_launch.launch_gpu
    monkeypatch.setattr(host_launch, "launch_gpu", lambda *a: (general.append(a), real(*a)))
    for i in range(10):
        tile = (256, 1024)[i % 2]
        ct.launch(None, (2048 // tile,), axpy, (x, y, outs[tile], float(i), tile))
    cp.cuda.Device().synchronize()
    assert not general
    for tile, i in ((256, 8), (1024, 9)):
        np.testing.assert_allclose(cp.asnumpy(outs[tile]), _ref(cp.asnumpy(x), cp.asnumpy(y), i),
                                   rtol=1e-6)


@ct.kernel
def put(out, v):
    ct.store(out, index=(0,), tile=ct.full((1,), v, out.dtype))


# per parameter dtype, the values a launch passes (the first makes the specialization)
SCALAR_RUNS = [
    (np.float32, [1.5, np.float32(np.nan), float("-inf"), np.float32(-0.0),
                  np.float32(np.finfo(np.float32).max), float("nan")]),
    (np.float64, [np.float64(1), np.float64(np.nan), np.float64(-1e300)]),
    (np.int32, [7, np.int32(-2 ** 31), 2 ** 31 - 1, np.int32(2 ** 31 - 1)]),
    (np.int64, [np.int64(1), 2 ** 31, np.int64(-2 ** 63), 2 ** 63 - 1, -2 ** 31 - 1]),
    (np.uint64, [np.uint64(1), 2 ** 63, np.uint64(2 ** 64 - 1), 2 ** 64 - 1]),
    (np.int8, [np.int8(1), np.int8(-128), np.int8(127)]),
    (np.uint32, [np.uint32(1), np.uint32(2 ** 32 - 1)]),
    (np.bool_, [True, np.bool_(False), np.bool_(True), False]),
]


@pytest.mark.parametrize("native", ["1", "0"], ids=["C", "Python"])
def test_scalars_launch_fast_and_the_kernel_gets_their_exact_value(native, monkeypatch):
    """Run-time scalars, Python numbers and NumPy scalars alike, take the fast
    launcher after the first launch of their kind, and the kernel receives
    each value exactly (NaN, -0.0, the extremes): the bytes it stores are
    those the interpreter's run stores."""
    from tilecore.host import launch as host_launch
    from tilecore.runtime.driver import driver
    cp = pytest.importorskip("cupy")
    driver()
    monkeypatch.setenv("TILECORE_NATIVE", native)
    put.backend_cache.clear()
    general = []
    real = host_launch.launch_gpu
    monkeypatch.setattr(host_launch, "launch_gpu", lambda *a: (general.append(a), real(*a)))
    for dtype, values in SCALAR_RUNS:
        out = cp.zeros(1, dtype)
        for i, v in enumerate(values):
            ct.launch(None, (1,), put, (out, v))
            want = np.zeros(1, dtype)
            ct.launch(None, (1,), put, (want, v))           # the interpreter
            assert cp.asnumpy(out).tobytes() == want.tobytes(), (dtype, v)
            assert len(general) == 1, (dtype, v)           # only the first launch of the kind
        general.clear()


@ct.kernel
def scale_by_first(x, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(out, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) *
             ct.load(x, index=(0,), shape=(TILE,)))


def test_streaming_kernels_ask_the_driver_for_the_smallest_l1():
    """axpy's blocks read disjoint tiles: its function carries the largest
    shared-memory carveout; scale_by_first re-reads tile 0 in every block and
    keeps the driver's default (test_cubin_info: a streaming kernel that spills
    keeps it too)."""
    cp = pytest.importorskip("cupy")
    from cuda.bindings import driver as drv
    x = cp.arange(2048, dtype=cp.float32)
    out = cp.zeros_like(x)
    ct.launch(None, (2,), axpy, (x, cp.ones_like(x), out, 2.0, 1024))
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(2048.0) * 2 + 1)
    ct.launch(None, (2,), scale_by_first, (x, out, 1024))
    np.testing.assert_array_equal(cp.asnumpy(out),
                                  np.arange(2048.0) * np.tile(np.arange(1024.0), 2))
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    for kernel, expected in ((axpy, 100), (scale_by_first, -1)):
        plans = [p for p in kernel.backend_cache.values() if getattr(p, "loaded", None)]
        assert plans
        for plan in plans:
            err, value = drv.cuFuncGetAttribute(attr, plan.loaded.function)
            assert err == drv.CUresult.CUDA_SUCCESS and value == expected, \
                (kernel.__name__, err, value)
