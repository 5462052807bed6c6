"""Which arrays a launch accepts: an array the kernel writes (store, scatter)
must be writable, its elements distinct, and share no memory with another
argument; arrays the kernel only reads may be read-only, broadcast (stride 0)
or the same array twice. NumPy masked arrays are refused."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.runtime.overlap import self_overlaps

as_strided = np.lib.stride_tricks.as_strided


@ct.kernel
def add_rows(x, y, out):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(1, 8)) + ct.load(y, index=(bid, 0), shape=(1, 8))
    ct.store(out, index=(bid, 0), tile=t)


@ct.kernel
def maybe_store(x, out, WRITE: ct.Constant[bool]):
    t = ct.load(x, index=(0,), shape=(8,))
    if WRITE:
        ct.store(out, index=(0,), tile=t)


@ct.kernel
def scatter_to(out, idx):
    i = ct.load(idx, index=(0,), shape=(4,))
    ct.scatter(out, i, ct.full((4,), 1.0, ct.float32))


def _data(shape=(4, 8), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_read_only_and_broadcast_inputs_are_fine():
    x = _data()
    x.setflags(write=False)
    row = np.arange(8, dtype=np.float32)
    y = np.broadcast_to(row, (4, 8))                  # read-only, stride 0
    out = np.zeros((4, 8), np.float32)
    ct.launch(None, (4,), add_rows, (x, y, out))
    np.testing.assert_array_equal(out, x + row)


def test_same_array_twice_for_reading():
    x = _data()
    out = np.zeros((4, 8), np.float32)
    ct.launch(None, (4,), add_rows, (x, x, out))
    np.testing.assert_array_equal(out, 2 * x)


def test_read_only_output_is_refused():
    out = np.zeros((4, 8), np.float32)
    out.setflags(write=False)
    with pytest.raises(ValueError, match='Invalid kernel argument "out": the array is read-only, '
                                         'but the kernel writes it; pass a writable array'):
        ct.launch(None, (4,), add_rows, (_data(), _data(), out))


@pytest.mark.parametrize("make", [
    lambda: np.zeros((4, 8), np.float32),
    lambda: as_strided(np.zeros(8, np.float32), shape=(4, 8), strides=(0, 4)),
    lambda: as_strided(np.zeros(16, np.float32), shape=(4, 8), strides=(8, 4)),
], ids=["copy", "stride0", "folded"])
def test_self_overlapping_output(make):
    out = make()
    x, y = _data(), _data(seed=1)
    if not self_overlaps(out.shape, out.strides, out.itemsize):
        ct.launch(None, (4,), add_rows, (x, y, out))
        np.testing.assert_array_equal(out, x + y)
        return
    with pytest.raises(ValueError, match=r'Invalid kernel argument "out": its elements overlap one '
                                         r"another \(shape \(4, 8\), strides \(\d, 1\) in "
                                         r"elements\), but the kernel writes it"):
        ct.launch(None, (4,), add_rows, (x, y, out))


def test_interleaved_output_with_distinct_elements_is_accepted():
    """Strides (2, 3) elements over shape (3, 2): the quick rule cannot tell,
    the enumeration shows every element distinct."""
    buf = np.zeros(16, np.float32)
    out = as_strided(buf, shape=(3, 2), strides=(8, 12))
    assert not self_overlaps(out.shape, out.strides, 4)

    @ct.kernel
    def fill(o):
        ct.store(o, index=(0, 0), tile=ct.reshape(ct.arange(8, dtype=ct.float32), (4, 2)))

    ct.launch(None, (1,), fill, (out,))
    np.testing.assert_array_equal(out, [[0, 1], [2, 3], [4, 5]])


def test_output_overlapping_an_input():
    x = _data()
    with pytest.raises(ValueError, match='Kernel arguments "x" and "out" overlap in memory, and '
                                         'the kernel writes "out"'):
        ct.launch(None, (4,), add_rows, (x, _data(), x))


def test_written_only_on_some_path_counts_as_written():
    x = _data((8,))
    out = np.zeros(8, np.float32)
    out.setflags(write=False)
    ct.launch(None, (1,), maybe_store, (x, out, False))  # never written: a read-only out is fine
    with pytest.raises(ValueError, match='"out": the array is read-only'):
        ct.launch(None, (1,), maybe_store, (x, out, True))
    ct.launch(None, (1,), maybe_store, (x, x, False))     # the same array, only read


def test_scatter_target_is_written():
    out = as_strided(np.zeros(1, np.float32), shape=(8,), strides=(0,))
    with pytest.raises(ValueError, match='"out": its elements overlap one another'):
        ct.launch(None, (1,), scatter_to, (out, np.arange(4, dtype=np.int32)))


def test_masked_array_is_refused():
    x = np.ma.masked_array(_data((8,)), mask=[0, 1] * 4)
    with pytest.raises(TypeError, match='Invalid kernel argument "x": NumPy masked arrays are not '
                                        r"supported .*pass x.filled\(value\) or x.data"):
        ct.launch(None, (1,), maybe_store, (x, np.zeros(8, np.float32), True))


@pytest.mark.parametrize("shape, strides, want", [
    ((4, 8), (32, 4), False), ((4, 8), (4, 16), False), ((8,), (-4,), False),
    ((4, 8), (0, 4), True), ((3, 3), (4, 4), True), ((2,), (2,), True),
    ((3, 2), (8, 12), False), ((1, 5), (0, 4), False), ((0, 3), (0, 0), False),
    ((5,), (0,), True), ((2, 2, 2), (16, 4, 8), False),
])
def test_self_overlaps_rule(shape, strides, want):
    assert self_overlaps(shape, strides, 4) is want
    if np.prod(shape) and all(s >= 0 for s in strides):       # against an enumeration
        offs = sorted(sum(i * s for i, s in zip(ix, strides)) for ix in np.ndindex(*shape))
        assert (any(b - a < 4 for a, b in zip(offs, offs[1:]))) is want


# ---- the GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_expanded_views():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8, device="cuda")
    row = torch.arange(8, device="cuda", dtype=torch.float32)
    y = row.expand(4, 8)                                   # stride 0: read only, accepted
    out = torch.zeros(4, 8, device="cuda")
    ct.launch(None, (4,), add_rows, (x, x, out))           # the same array twice: read
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x)
    ct.launch(None, (4,), add_rows, (x, y, out))
    torch.cuda.synchronize()
    assert torch.equal(out, x + row)
    bad = torch.zeros(8, device="cuda").expand(4, 8)
    with pytest.raises(ValueError, match='"out": its elements overlap one another'):
        ct.launch(None, (4,), add_rows, (x, y, bad))
    with pytest.raises(ValueError,
                       match=r'overlap in memory \(bytes .*\), and the kernel writes "out"'):
        ct.launch(None, (4,), add_rows, (x, y, x))
    # the fast path, after a good launch, must not let an overlapping output through
    for _ in range(3):
        ct.launch(None, (4,), add_rows, (x, y, out))
    with pytest.raises(ValueError, match='the kernel writes "out"'):
        ct.launch(None, (4,), add_rows, (x, y, x))


@pytest.mark.gpu
def test_gpu_read_only_interface_flag():
    cp = pytest.importorskip("cupy")

    class ReadOnly:
        def __init__(self, a):
            self.a = a
            cai = dict(a.__cuda_array_interface__)
            cai["data"] = (cai["data"][0], True)
            self.__cuda_array_interface__ = cai

    x = cp.asarray(_data())
    out = cp.zeros((4, 8), cp.float32)
    ct.launch(None, (4,), add_rows, (ReadOnly(x), ReadOnly(x), out))
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), 2 * cp.asnumpy(x))
    with pytest.raises(ValueError, match='"out": the array is read-only'):
        ct.launch(None, (4,), add_rows, (x, x, ReadOnly(out)))
