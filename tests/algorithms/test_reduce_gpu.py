"""DeviceReduce on the GPU: CuPy and PyTorch arrays, every entry point against
NumPy, bit-identical results run to run, CUDA-graph capture and replay with
new data, 2**31 + 5 items (64-bit offsets), the convenience layer."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceReduce as R
import tilecore.algorithms as A

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(99)
SIZES = [0, 1, 1000, 4095, 4097, 10**6 + 3, (1 << 24) + 7]


def host_data(dtype, n):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return RNG.integers(-100 if dt.kind == "i" else 0, 100, n).astype(dt)
    return RNG.uniform(-1, 1, n).astype(dt)


def run(method, *args, stream=None):
    nbytes = method(None, *args, stream)
    import cupy as cp
    temp = cp.empty(nbytes, cp.uint8)
    assert method(temp, *args, stream) == nbytes
    return temp


def close(got, ref, x64, dtype):
    if np.dtype(dtype).kind in "iu":
        return got == ref
    eps = float(ml_dtypes.finfo(np.float32 if np.dtype(dtype).itemsize <= 4 else np.float64).eps)
    mag = float(np.abs(x64).sum())
    return abs(float(got) - ref) <= (np.log2(max(x64.size, 2)) + 4) * eps * mag + \
        float(ml_dtypes.finfo(dtype).eps) * mag


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.float16])
@pytest.mark.parametrize("n", SIZES)
def test_cupy_every_entry_point(dtype, n):
    cp = pytest.importorskip("cupy")
    h = host_data(dtype, n)
    x = cp.asarray(h)
    out = cp.zeros(1, dtype)
    run(R.sum, x, out, n)
    acc = np.int32 if np.dtype(dtype).kind in "iu" and np.dtype(dtype).itemsize < 4 else dtype
    ref = h.sum(dtype=acc).astype(dtype) if np.dtype(dtype).kind in "iu" else \
        h.astype(np.float64).sum()
    assert close(out.get()[0], ref, h.astype(np.float64), dtype)
    run(R.min, x, out, n)
    assert out.get()[0] == (h.min() if n else np.array(ml_dtypes.finfo(dtype).max if
                                                       np.dtype(dtype).kind == "f" else
                                                       np.iinfo(dtype).max, dtype))
    run(R.max, x, out, n)
    if n:
        assert out.get()[0] == h.max()
    v, i = cp.zeros(1, dtype), cp.zeros(1, cp.int64)
    run(R.arg_min, x, v, i, n)
    if n:
        assert (v.get()[0], i.get()[0]) == (h.min(), h.argmin())
    else:
        assert i.get()[0] == 1
    run(R.arg_max, x, v, i, n)
    if n:
        assert (v.get()[0], i.get()[0]) == (h.max(), h.argmax())
    run(R.reduce, x, out, n, "max", h.dtype.type(-7) if np.dtype(dtype).kind != "u" else 0)
    if n:
        assert out.get()[0] == max(h.max(), -7)


def user_add(a, b):
    return a + b


@ct.function
def square(t):
    return t * t


def test_user_op_and_transform_on_gpu():
    cp = pytest.importorskip("cupy")
    h = host_data(np.float32, 10**6 + 3)
    x = cp.asarray(h)
    out = cp.zeros(1, cp.float64)
    run(R.reduce, x, out, h.size, user_add, np.float64(1.5))
    assert abs(out.get()[0] - 1.5 - h.astype(np.float64).sum()) < 1e-6
    run(R.transform_reduce, x, out, h.size, "add", square, np.float64(0))
    assert abs(out.get()[0] - (h * h).astype(np.float64).sum()) < 1e-6


def test_torch_tensors_and_any_temp_dtype():
    torch = pytest.importorskip("torch")
    h = host_data(np.float32, 10**6 + 3)
    x = torch.from_numpy(h).cuda()
    out = torch.zeros(1, dtype=torch.float32, device="cuda")
    stream = torch.cuda.current_stream()
    nbytes = R.sum(None, x, out, h.size, stream)
    temp = torch.empty(-(-nbytes // 8), dtype=torch.float64, device="cuda")   # any dtype
    R.sum(temp, x, out, h.size, stream)
    torch.cuda.synchronize()
    assert abs(out.item() - h.astype(np.float64).sum()) < 1e-2
    v = torch.zeros(1, dtype=torch.float32, device="cuda")
    i = torch.zeros(1, dtype=torch.int64, device="cuda")
    R.arg_max(torch.empty(R.arg_max(None, x, v, i, h.size), dtype=torch.uint8, device="cuda"),
              x, v, i, h.size, stream)
    assert (v.item(), i.item()) == (h.max(), h.argmax())
    s = A.sum(x)
    assert isinstance(s, torch.Tensor) and s.shape == () and s.dtype == torch.float32
    assert abs(s.item() - h.astype(np.float64).sum()) < 1e-2
    assert A.argmin(x).item() == h.argmin()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_bit_identical_run_to_run(dtype):
    cp = pytest.importorskip("cupy")
    x = cp.asarray(host_data(dtype, (1 << 24) + 7) * 1000)
    out = cp.zeros(1, dtype)
    temp = run(R.sum, x, out, x.size)
    first = out.get().tobytes()
    for _ in range(20):
        out.fill(0)
        R.sum(temp, x, out, x.size)
        assert out.get().tobytes() == first


def test_cuda_graph_capture_and_replay_with_new_data():
    cp = pytest.importorskip("cupy")
    n = (1 << 22) + 3
    x = cp.asarray(host_data(np.float32, n))
    out = cp.zeros(1, cp.float32)
    v, i = cp.zeros(1, cp.float32), cp.zeros(1, cp.int64)
    stream = cp.cuda.Stream(non_blocking=True)
    temp = cp.empty(max(R.sum(None, x, out, n), R.arg_max(None, x, v, i, n)), cp.uint8)
    R.sum(temp, x, out, n, stream)                        # compile and load outside the capture
    R.arg_max(temp, x, v, i, n, stream)
    stream.synchronize()
    stream.begin_capture()
    R.sum(temp, x, out, n, stream)
    R.arg_max(temp, x, v, i, n, stream)
    graph = stream.end_capture()
    for seed in range(3):
        h = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
        x.set(h, stream=stream)
        graph.launch(stream)
        stream.synchronize()
        assert abs(out.get()[0] - h.astype(np.float64).sum()) < 1e-2
        assert (v.get()[0], i.get()[0]) == (h.max(), h.argmax())


def test_torch_graph_capture():
    torch = pytest.importorskip("torch")
    n = 1 << 20
    x = torch.rand(n, device="cuda")
    out = torch.zeros(1, device="cuda")
    temp = torch.empty(R.sum(None, x, out, n), dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        R.sum(temp, x, out, n, s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        R.sum(temp, x, out, n, torch.cuda.current_stream())
    x.copy_(torch.arange(n, device="cuda", dtype=torch.float32) % 7)
    g.replay()
    torch.cuda.synchronize()
    assert out.item() == float(((np.arange(n) % 7)).sum())


def test_two_to_the_31_plus_5_items():
    cp = pytest.importorskip("cupy")
    n = (1 << 31) + 5
    try:
        x = cp.ones(n, cp.int8)
    except cp.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough GPU memory for 2 GB (an H100 has 80)")
    x[n - 2] = 3
    x[7] = -4
    out = cp.zeros(1, cp.int64)
    run(R.sum, x, out, n)
    assert int(out.get()[0]) == (n - 2) + 3 + (-4)     # two ones replaced
    v, i = cp.zeros(1, cp.int8), cp.zeros(1, cp.int64)
    run(R.arg_max, x, v, i, n)
    assert (int(v.get()[0]), int(i.get()[0])) == (3, n - 2)
    run(R.arg_min, x, v, i, n)
    assert (int(v.get()[0]), int(i.get()[0])) == (-4, 7)
    del x


def test_mixed_host_and_device_is_a_type_error():
    cp = pytest.importorskip("cupy")
    with pytest.raises(TypeError, match='"d_in" \\(a host NumPy array\\) and "d_out"'):
        R.sum(None, np.zeros(4, np.float32), cp.zeros(1, cp.float32), 4)
    with pytest.raises(TypeError, match='"temp_storage"'):
        R.sum(np.zeros(1024, np.uint8), cp.zeros(4, cp.float32), cp.zeros(1, cp.float32), 4)


def test_convenience_cupy_on_current_stream():
    cp = pytest.importorskip("cupy")
    h = host_data(np.int32, 10**6 + 3)
    x = cp.asarray(h).reshape(1000003, 1)
    with cp.cuda.Stream(non_blocking=True):
        s, lo, hi = A.sum(x), A.min(x), A.max(x)
        am = A.argmax(x)
    assert isinstance(s, cp.ndarray) and s.shape == () and s.dtype == cp.int64
    assert int(s) == int(h.astype(np.int64).sum()) and int(lo) == h.min() and int(hi) == h.max()
    assert int(am) == h.argmax()


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_cached_calls_on_the_gpu(lib):
    """Repeated calls take the cached host path (no plan is built) and stay
    right, on CuPy arrays and torch tensors, one-block and two-pass sizes; a
    one-block sum's launch is tilecore.launch's cached fast path (its init is a
    Constant, so no NumPy scalar argument sends it down the general path)."""
    from tilecore.algorithms import reduce as RM
    mod = pytest.importorskip(lib)
    for n in (1000, 1 << 16, 10**6 + 3):
        h = host_data(np.float32, n)
        if lib == "cupy":
            x, out, temp = mod.asarray(h), mod.zeros(1, mod.float32), mod.empty(1 << 20, mod.uint8)
            v, i = mod.zeros(1, mod.float32), mod.zeros(1, mod.int64)
            get = lambda a: a.get()  # noqa: E731
        else:
            x = mod.from_numpy(h).cuda()
            out, v = mod.zeros(1, device="cuda"), mod.zeros(1, device="cuda")
            i, temp = mod.zeros(1, dtype=mod.int64, device="cuda"), \
                mod.empty(1 << 20, dtype=mod.uint8, device="cuda")
            get = lambda a: a.cpu().numpy()  # noqa: E731
        R.sum(temp, x, out, n)
        R.arg_max(temp, x, v, i, n)
        A.sum(x), A.argmax(x)
        made = RM.plans_made[0]
        for _ in range(3):
            R.sum(temp, x, out, n)
            assert close(get(out)[0], h.astype(np.float64).sum(), h.astype(np.float64), np.float32)
            R.arg_max(temp, x, v, i, n)
            assert get(i)[0] == h.argmax()
            assert close(float(A.sum(x)), h.astype(np.float64).sum(), h.astype(np.float64),
                         np.float32)
            assert int(A.argmax(x)) == h.argmax()
        assert RM.plans_made[0] == made  # (A.argmax shares R.arg_max's plan)
    one_block = [p for p in RM._plans.values() if p.kind == "fixed" and p.target.device_id >= 0]
    assert any(p.main.backend_cache.get("fast_launch") is not None for p in one_block)
