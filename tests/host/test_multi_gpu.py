"""Two GPUs: a tile kernel and the device-scope algorithms run on the GPU their
arrays are on, whichever device is current; what holds device state (loaded
modules, algorithm plans, the convenience layer's cached temporary storage)
is per device, so calls alternating between the devices are right; arrays of
two devices in one call are an error naming them, raised before anything
runs. The GPU tests skip (saying so) on a machine with fewer than two GPUs."""
import numpy as np
import pytest

import tilecore as ct
import tilecore.algorithms as A
from tilecore.algorithms import DeviceReduce, DeviceScan, DeviceSegmentedReduce


def _gpu_count() -> int:
    from tilecore.runtime import device_count
    from tilecore.runtime.driver import has_gpu
    return device_count() if has_gpu() else 0


needs_two_gpus = pytest.mark.skipif(_gpu_count() < 2, reason="needs two GPUs")


@ct.kernel
def scaled_sum(x, y, out, alpha, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ty = ct.load(y, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(bid,), tile=alpha * tx + ty)


N = 3000
TILE = 1024


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N), rng.standard_normal(N)


def test_the_kernel_in_the_interpreter():
    x, y = _inputs(0)
    out = np.zeros(N)
    ct.launch(None, (ct.cdiv(N, TILE),), scaled_sum, (x, y, out, -1.5, TILE))
    np.testing.assert_allclose(out, -1.5 * x + y, rtol=1e-15, atol=1e-15)


def _on(cp, device: int, a: np.ndarray):
    with cp.cuda.Device(device):
        return cp.asarray(a)


@pytest.mark.gpu
@needs_two_gpus
def test_a_kernel_runs_on_its_arrays_device_whichever_is_current():
    import cupy as cp
    for step, device in enumerate((1, 0, 1, 0)):
        x, y = _inputs(step)
        dx, dy = _on(cp, device, x), _on(cp, device, y)
        d1, d2 = _on(cp, device, np.full(N, np.nan)), _on(cp, device, np.full(N, np.nan))
        other = 1 - device
        with cp.cuda.Device(other):                    # the other GPU is current
            ct.launch(None, (ct.cdiv(N, TILE),), scaled_sum, (dx, dy, d1, 2.0, TILE))
            with cp.cuda.Device(device):
                stream = cp.cuda.Stream(non_blocking=True)   # a stream of the arrays' GPU
            cp.cuda.Device(device).synchronize()
            ct.launch(stream, (ct.cdiv(N, TILE),), scaled_sum, (d1, dy, d2, 0.5, TILE))
            stream.synchronize()
        assert d2.device.id == device
        np.testing.assert_allclose(cp.asnumpy(d1), 2.0 * x + y, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(cp.asnumpy(d2), 0.5 * (2.0 * x + y) + y,
                                   rtol=1e-14, atol=1e-14)


@pytest.mark.gpu
@needs_two_gpus
def test_arrays_of_two_devices_are_an_error_before_anything_runs():
    import cupy as cp
    x, y = _inputs(1)
    dx, dy, dout = _on(cp, 0, x), _on(cp, 1, y), _on(cp, 0, np.zeros(N))
    with pytest.raises(ValueError, match=r"different (GPUs|devices)"):
        ct.launch(None, (ct.cdiv(N, TILE),), scaled_sum, (dx, dy, dout, 2.0, TILE))
    out1 = _on(cp, 1, np.zeros(N))
    with pytest.raises(ValueError, match=r"different GPUs"):
        DeviceReduce.sum(None, dx, out1, N)
    with cp.cuda.Device(1):
        d1 = cp.asarray(x)
        o1 = cp.zeros(1, cp.float64)
    with cp.cuda.Device(0):
        temp0 = cp.zeros(1 << 20, cp.uint8)
    with pytest.raises(ValueError, match='"temp_storage": it is on GPU 0 but the data are on '
                                         'GPU 1'):
        DeviceReduce.sum(temp0, d1, o1, N)                 # temporary storage of GPU 0
    cp.cuda.Device(0).synchronize()
    cp.cuda.Device(1).synchronize()
    assert float(o1[0]) == 0.0 and not cp.asnumpy(dout).any()


@pytest.mark.gpu
@needs_two_gpus
def test_a_stream_of_another_gpu_is_an_error_and_nothing_runs():
    import cupy as cp
    x, y = _inputs(4)
    dx, dy, dout = (_on(cp, 1, a) for a in (x, y, np.zeros(N)))
    total = _on(cp, 1, np.zeros(1))
    with cp.cuda.Device(1):
        temp = cp.zeros(1 << 20, cp.uint8)
    with cp.cuda.Device(0):
        s0 = cp.cuda.Stream(non_blocking=True)
    with pytest.raises(ct.TileLaunchError, match="belongs to another device"):
        ct.launch(s0, (ct.cdiv(N, TILE),), scaled_sum, (dx, dy, dout, 2.0, TILE))
    with pytest.raises(ct.TileLaunchError, match="belongs to another device"):
        DeviceReduce.sum(temp, dx, total, N, s0)
    cp.cuda.Device(1).synchronize()
    assert not cp.asnumpy(dout).any() and float(total[0]) == 0.0
    ct.launch(None, (ct.cdiv(N, TILE),), scaled_sum, (dx, dy, dout, 2.0, TILE))  # still usable
    cp.cuda.Device(1).synchronize()
    np.testing.assert_allclose(cp.asnumpy(dout), 2.0 * x + y, rtol=1e-14, atol=1e-14)


@pytest.mark.gpu
@needs_two_gpus
def test_the_two_phase_algorithms_alternating_between_devices():
    """The same calls (same sizes and dtypes: the same cached plans and
    signatures) alternately on GPU 1 and GPU 0, with GPU 0 current."""
    import cupy as cp
    n, segments = 100_003, 37
    offsets = np.sort(np.random.default_rng(5).integers(0, n, segments + 1))
    offsets[0], offsets[-1] = 0, n
    for step, device in enumerate((1, 0, 1, 0, 1)):
        rng = np.random.default_rng(10 + step)
        x = rng.integers(-1000, 1000, n).astype(np.int32)
        with cp.cuda.Device(device):
            dx = cp.asarray(x)
            total, scan = cp.zeros(1, cp.int32), cp.zeros(n, cp.int32)
            seg = cp.zeros(segments, cp.int32)
            begins, ends = cp.asarray(offsets[:-1]), cp.asarray(offsets[1:])
            temp = cp.zeros(1 << 22, cp.uint8)
        with cp.cuda.Device(0):
            for call in (lambda t: DeviceReduce.sum(t, dx, total, n),
                         lambda t: DeviceScan.inclusive_sum(t, dx, scan, n),
                         lambda t: DeviceSegmentedReduce.sum(t, dx, seg, segments, begins,
                                                             ends)):
                assert call(None) <= temp.nbytes
                call(temp)
        with cp.cuda.Device(device):
            cp.cuda.Device().synchronize()
        want = np.cumsum(x, dtype=np.int64)
        assert int(total[0]) == int(want[-1])
        np.testing.assert_array_equal(cp.asnumpy(scan), want.astype(np.int32))
        sums = np.add.reduceat(x.astype(np.int64), offsets[:-1])
        sums[offsets[:-1] == offsets[1:]] = 0
        np.testing.assert_array_equal(cp.asnumpy(seg), sums.astype(np.int32))


@pytest.mark.gpu
@needs_two_gpus
def test_the_convenience_layer_returns_arrays_on_the_inputs_device():
    import cupy as cp
    for step, device in enumerate((1, 0, 1)):
        x = np.random.default_rng(20 + step).standard_normal(50_001).astype(np.float32)
        dx = _on(cp, device, x)
        with cp.cuda.Device(1 - device):
            s, c, i = A.sum(dx), A.cumsum(dx), A.argmax(dx)
        offsets = _on(cp, device, np.array([0, 7, 7, 30_000, 50_001]))
        with cp.cuda.Device(1 - device):
            seg = A.segmented_sum(dx, offsets)
        for r in (s, c, i, seg):
            assert r.device.id == device
        np.testing.assert_allclose(
            cp.asnumpy(seg), [x[:7].sum(dtype=np.float64), 0.0, x[7:30_000].sum(dtype=np.float64),
                              x[30_000:].sum(dtype=np.float64)], rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(float(s), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
        np.testing.assert_allclose(cp.asnumpy(c), np.cumsum(x.astype(np.float64)),
                                   rtol=1e-4, atol=1e-3)
        assert int(i) == int(np.argmax(x))


@pytest.mark.gpu
@needs_two_gpus
def test_torch_tensors_on_the_second_gpu():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal(70_000)
    t = torch.as_tensor(x, device="cuda:1")
    out = torch.empty_like(t)
    with torch.cuda.device(0):
        ct.launch(torch.cuda.current_stream(1), (ct.cdiv(x.size, TILE),), scaled_sum,
                  (t, t, out, 3.0, TILE))
        s, c = A.sum(t), A.cumsum(t)
    assert out.device == t.device == s.device == c.device
    np.testing.assert_allclose(out.cpu().numpy(), 4.0 * x, rtol=1e-15)
    np.testing.assert_allclose(float(s), x.sum(), rtol=1e-12)
    np.testing.assert_allclose(c.cpu().numpy(), np.cumsum(x), rtol=1e-12, atol=1e-10)
