"""DeviceSegmentedReduce on the GPU: CuPy and PyTorch arrays, every entry point
against NumPy on the shipped policy's three kernel shapes (rows, long, long
split over several blocks), bit-identical results run to run, CUDA-graph
capture and replay with new data, 2**31 + 5 items with int64 offsets, the
convenience form."""
import numpy as np
import pytest

from tilecore.algorithms import DeviceSegmentedReduce as S
import tilecore.algorithms as A

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(7)


def run(method, *args, stream=None):
    import cupy as cp
    nbytes = method(None, *args, stream)
    temp = cp.empty(nbytes, cp.uint8)
    assert method(temp, *args, stream) == nbytes
    return temp


def segments(kind):
    """Segment lengths that make the shipped policy choose each kernel shape."""
    if kind == "short":
        return RNG.integers(0, 256, 5000)            # rows, 8 x 128
    if kind == "uneven":
        return RNG.integers(1, 4097, 3000)           # rows, a segment a block (1024 x 1)
    if kind == "long":   # long, a block each (8192-item tiles; 4-byte values: average >= 16384)
        return np.full(1500, (1 << 14) + 8) + RNG.integers(-7, 8, 1500)
    return np.array([(1 << 22) + 3, 0, 1, 1 << 21])  # long, split over many blocks


def sums_close(got, x, off):
    x64 = x.astype(np.float64)
    ref = np.array([x64[b:e].sum() for b, e in zip(off[:-1], off[1:])])
    mag = np.array([np.abs(x64[b:e]).sum() for b, e in zip(off[:-1], off[1:])])
    assert (np.abs(got - ref) <= 40 * 2.0 ** -24 * mag + 1e-30).all()


@pytest.mark.parametrize("kind", ["short", "uneven", "long", "split"])
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_cupy_every_entry_point(kind, odt):
    cp = pytest.importorskip("cupy")
    off = np.concatenate([[0], np.cumsum(segments(kind))]).astype(odt)
    n = off.size - 1
    h = RNG.uniform(-1, 1, int(off[-1])).astype(np.float32)
    x, d_off = cp.asarray(h), cp.asarray(off)
    b, e = d_off[:-1], d_off[1:]
    out = cp.zeros(n, cp.float32)
    run(S.sum, x, out, n, b, e)
    sums_close(out.get(), h, off)
    pairs = list(zip(off[:-1], off[1:]))
    fmax = np.finfo(np.float32).max
    run(S.min, x, out, n, b, e)
    assert out.get().tolist() == [h[p:q].min() if q > p else fmax for p, q in pairs]
    run(S.max, x, out, n, b, e)
    assert out.get().tolist() == [h[p:q].max() if q > p else -fmax for p, q in pairs]
    v, i = cp.zeros(n, cp.float32), cp.zeros(n, cp.int64)
    run(S.arg_max, x, v, i, n, b, e)
    assert i.get().tolist() == [int(h[p:q].argmax()) if q > p else 1 for p, q in pairs]
    o64 = cp.zeros(n, cp.float64)
    run(S.reduce, x, o64, n, b, e, "add", np.float64(0.5))
    sums_close(o64.get() - 0.5, h, off)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float16, np.float64])
def test_cupy_dtypes_exact_ints(dtype):
    cp = pytest.importorskip("cupy")
    off = np.concatenate([[0], np.cumsum(RNG.integers(0, 600, 2000))]).astype(np.int32)
    h = (RNG.integers(-100, 100, int(off[-1])) if np.dtype(dtype).kind == "i" else
         RNG.uniform(-1, 1, int(off[-1]))).astype(dtype)
    out = cp.zeros(off.size - 1, np.int64 if np.dtype(dtype).kind == "i" else dtype)
    d_off = cp.asarray(off)
    run(S.sum, cp.asarray(h), out, off.size - 1, d_off[:-1], d_off[1:])
    if np.dtype(dtype).kind == "i":
        assert out.get().tolist() == [int(h[p:q].astype(np.int64).sum())
                                      for p, q in zip(off[:-1], off[1:])]
    else:
        ref = np.array([h[p:q].astype(np.float64).sum() for p, q in zip(off[:-1], off[1:])])
        np.testing.assert_allclose(out.get().astype(np.float64), ref,
                                   atol=0.05 if dtype == np.float16 else 1e-9)


def test_torch_and_convenience():
    torch = pytest.importorskip("torch")
    x = torch.rand(1 << 20, device="cuda")
    off = torch.arange(0, (1 << 20) + 1, 128, device="cuda", dtype=torch.int32)
    got = A.segmented_sum(x, off)
    assert isinstance(got, torch.Tensor) and got.shape == (8192,)
    torch.testing.assert_close(got, x.view(8192, 128).sum(dim=1), rtol=1e-5, atol=1e-4)
    out = torch.empty(8192, device="cuda")
    stream = torch.cuda.current_stream()
    nbytes = S.max(None, x, out, 8192, off[:-1], off[1:], stream)
    S.max(torch.empty(nbytes, dtype=torch.uint8, device="cuda"), x, out, 8192, off[:-1],
          off[1:], stream)
    torch.testing.assert_close(out, x.view(8192, 128).amax(dim=1))


@pytest.mark.parametrize("kind", ["short", "uneven", "long", "split"])
def test_bit_identical_run_to_run(kind):
    cp = pytest.importorskip("cupy")
    off = cp.asarray(np.concatenate([[0], np.cumsum(segments(kind))]).astype(np.int64))
    n = off.size - 1
    x = cp.asarray(RNG.uniform(-1000, 1000, int(off[-1].get())).astype(np.float32))
    out = cp.zeros(n, cp.float32)
    temp = run(S.sum, x, out, n, off[:-1], off[1:])
    first = out.get().tobytes()
    for _ in range(10):
        out.fill(0)
        S.sum(temp, x, out, n, off[:-1], off[1:])
        assert out.get().tobytes() == first


def test_cuda_graph_capture_and_replay_with_new_data():
    cp = pytest.importorskip("cupy")
    lens = segments("uneven")
    off = cp.asarray(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    n, total = lens.size, int(lens.sum())
    x = cp.zeros(total, cp.float32)
    out = cp.zeros(n, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    temp = cp.empty(S.sum(None, x, out, n, off[:-1], off[1:]), cp.uint8)
    S.sum(temp, x, out, n, off[:-1], off[1:], stream)          # compile and load first
    stream.synchronize()
    stream.begin_capture()
    S.sum(temp, x, out, n, off[:-1], off[1:], stream)
    graph = stream.end_capture()
    h_off = off.get()
    for seed in range(3):
        h = np.random.default_rng(seed).uniform(-1, 1, total).astype(np.float32)
        x.set(h, stream=stream)
        graph.launch(stream)
        stream.synchronize()
        sums_close(out.get(), h, h_off)


@pytest.mark.parametrize("kind", ["short", "uneven"])
@pytest.mark.parametrize("wide", [False, True])
def test_cupy_rows_kernel_waves_and_64_bit_bounds(kind, wide, monkeypatch):
    """The rows kernel with 4 row groups per block (enough segments that 132 SMs
    keep 8 blocks each; on uneven lengths too, where the shipped policy runs a
    segment a block), on its int32 path and on its int64 path (taken for 2**30 items
    or more; forced here)."""
    cp = pytest.importorskip("cupy")
    from tilecore.algorithms import segmented_reduce as SR
    from tilecore.dispatch import override_policy
    if wide:    # fresh plans: a plan keeps its launches' NARROW flag per shape
        monkeypatch.setattr(SR, "_NARROW_LIMIT", 0)
        monkeypatch.setattr(SR, "_plans", {})
        monkeypatch.setattr(SR, "_sigs", {})
    lens = RNG.integers(0, 256, 40000) if kind == "short" else RNG.integers(1, 4097, 5000)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    n = off.size - 1
    h = RNG.uniform(-1, 1, int(off[-1])).astype(np.float32)
    x, d_off = cp.asarray(h), cp.asarray(off)
    out = cp.zeros(n, cp.float32)
    with override_policy("segmented_reduce", rows_waves=4, long_min_avg_items=1 << 30):
        run(S.sum, x, out, n, d_off[:-1], d_off[1:])
        sums_close(out.get(), h, off)
        run(S.max, x, out, n, d_off[:-1], d_off[1:])
    fmax = np.finfo(np.float32).max
    assert out.get().tolist() == [h[p:q].max() if q > p else -fmax
                                  for p, q in zip(off[:-1], off[1:])]


def test_more_than_2_31_items_with_int64_offsets():
    cp = pytest.importorskip("cupy")
    n = (1 << 31) + 5
    x = cp.ones(n, cp.int8)
    x[-3:] = 2
    off_b = cp.asarray(np.array([0, (1 << 31) - 3, n - 1, 5], np.int64))
    off_e = cp.asarray(np.array([n, n, n, 5], np.int64))
    out = cp.zeros(4, cp.int64)
    run(S.sum, x, out, 4, off_b, off_e)
    assert out.get().tolist() == [n + 3, 8 + 3, 2, 0]
    v, i = cp.zeros(4, cp.int8), cp.zeros(4, cp.int64)
    run(S.arg_max, x, v, i, 4, off_b, off_e)
    assert i.get().tolist() == [n - 3, 5, 0, 1]


@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_rows_kernel_one_segment_a_block_past_2_30_items(odt):
    """More than 2**30 float32 items in segments of U(1..4096) (the shipped rows
    kernel, a segment a block, on its int32 path up to d_in's end): sums, max
    and arg_max exact, marks (2.0 among ones) near 2**30, 2**31 - 2**21 and the end."""
    cp = pytest.importorskip("cupy")
    from tilecore.algorithms import segmented_reduce as SR
    from tilecore.dispatch.segmented_policy import Shape
    size = (1 << 30) + (1 << 21) + 333
    assert SR._narrow(Shape("rows", 1, 1024, 1), 600000, size)
    lens = RNG.integers(1, 4097, size // 2048 + 4096)
    off = np.concatenate([[0], np.cumsum(lens)])
    off = off[:np.searchsorted(off, size) + 1]
    off[-1] = size
    n = off.size - 1
    marks = np.unique(np.concatenate([RNG.integers(0, size, 2000),
                                      (1 << 30) + np.arange(-3, 4), [size - 1, size - 2]]))
    x = cp.ones(size, cp.float32)
    x[cp.asarray(marks)] = 2.0
    d_off = cp.asarray(off.astype(odt))
    seg_of = np.searchsorted(off, marks, side="right") - 1
    extra = np.bincount(seg_of, minlength=n)
    out = cp.zeros(n, cp.float32)
    run(S.sum, x, out, n, d_off[:-1], d_off[1:])
    assert (out.get() == (np.diff(off) + extra).astype(np.float32)).all()
    run(S.max, x, out, n, d_off[:-1], d_off[1:])
    assert (out.get() == np.where(extra > 0, 2.0, 1.0)).all()
    v, i = cp.zeros(n, cp.float32), cp.zeros(n, cp.int64)
    run(S.arg_max, x, v, i, n, d_off[:-1], d_off[1:])
    first = np.zeros(n, np.int64)
    firsts = np.unique(seg_of, return_index=True)
    first[firsts[0]] = marks[firsts[1]] - off[firsts[0]]
    assert (i.get() == first).all() and (v.get() == np.where(extra > 0, 2.0, 1.0)).all()


@pytest.mark.parametrize("wide", [False, True])
def test_cupy_long_kernel_int64_offsets_beyond_32_bits(wide, monkeypatch):
    """The shipped long kernel (U(1..4096) lengths, 2048-item tiles) with int64
    offsets, some past 2**31, 2**32 or negative, on its int32 path and its
    int64 one (forced): the same bits as int32 offsets clamped on the host."""
    cp = pytest.importorskip("cupy")
    from tilecore.algorithms import segmented_reduce as SR
    lens = RNG.integers(1, 4097, 3000)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    size = int(off[-1])
    begins, ends = off[:-1].copy(), off[1:].copy()
    begins[::97], ends[5::89], begins[7::101] = -2**32 + 5, 2**40, 2**31 + 3
    h = RNG.uniform(-1, 1, size).astype(np.float32)
    x = cp.asarray(h)
    n = lens.size
    clamp32 = [cp.asarray(np.clip(a, 0, size).astype(np.int32)) for a in (begins, ends)]
    ref, got = cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
    if wide:    # fresh plans: a plan keeps its launches' NARROW flag per shape
        monkeypatch.setattr(SR, "_NARROW_LIMIT", 0)
        monkeypatch.setattr(SR, "_plans", {})
        monkeypatch.setattr(SR, "_sigs", {})
    for method in (S.sum, S.min, S.max):
        run(method, x, ref, n, *clamp32)
        run(method, x, got, n, cp.asarray(begins), cp.asarray(ends))
        assert got.get().tobytes() == ref.get().tobytes()
    b, e = np.clip(begins, 0, size), np.clip(ends, 0, size)
    fmax = np.finfo(np.float32).max
    assert got.get().tolist() == [h[p:q].max() if q > p else -fmax for p, q in zip(b, e)]
