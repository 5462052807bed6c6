"""DeviceSegmentedReduce's cached host path (CPU side, no timing): a repeated
call of a known signature ingests no argument, selects no policy and makes
the same launches as the general path, for every method, int32 and int64
offsets, the rows, long and split long kernels; every per-call check still
holds on it (count, sizes, d_in's length, temporary storage, init, policy
epoch) and nothing is written on an error; `segmented_sum` runs on it. On a
GPU, repeated calls launch through the kept fast launchers only."""
import numpy as np
import pytest

import tilecore as ct
import tilecore.algorithms as A
from tilecore.algorithms import DeviceSegmentedReduce as S
from tilecore.algorithms import hostpath as H
from tilecore.algorithms import segmented_convenience as SC
from tilecore.algorithms import segmented_reduce as SR
from tilecore.dispatch import override_policy
from tilecore.runtime import DeviceArray
from algo_helpers import count_calls

RNG = np.random.default_rng(77)
_BASE = dict(block_threads=32, rows_items_per_thread=2, min_row_items=4, long_block_threads=32,
             long_items_per_thread=1, rows_waves=1)
POLICIES = {      # small tiles: many blocks on small inputs (as test_segmented_reduce.py)
    "rows": dict(_BASE, long_min_avg_items=1 << 30, split_min_blocks_per_sm=0),
    "long": dict(_BASE, long_min_avg_items=1, split_min_blocks_per_sm=0),
    "split": dict(_BASE, long_min_avg_items=1, split_min_blocks_per_sm=64),
}
UNEVEN = [0, 1, 5, 0, 31, 32, 33, 64, 65, 200, 0, 3, 130, 1, 97]
N = len(UNEVEN)
TEMP = 1 << 16


def user_add(a, b):
    return a + b


def policy(name):
    return override_policy("segmented_reduce", **POLICIES[name])


def offsets(lengths, dtype):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(dtype)


@pytest.fixture
def counted(monkeypatch):
    """Counts argument ingestion (`describe`), policy selection and general-path
    calls; every signature starts uncached."""
    monkeypatch.setattr(SR, "_sigs", {})
    monkeypatch.setattr(SC, "_sums", {})
    return count_calls(monkeypatch, [(SR, "describe", "describe"),
                                      (SR, "select_segmented_policy", "policy"),
                                      (SR, "_reduce", "general"), (SR, "_arg", "general"),
                                      (SC, "describe", "describe")])


def _fold(x, b, e, fold, empty):
    """The reference: `fold` of each segment in float64 (bounds clamped to x, as
    the kernels read them), `empty` for an empty one."""
    segs = [x[max(p, 0):max(q, 0)].astype(np.float64) for p, q in zip(b, e)]
    return [fold(s) if s.size else empty for s in segs]


def _calls(x, xi, out, index, outi, b, e, n):
    """(name, call(temp), outputs, references) for every method: float32
    integers (every sum exact), ties for the arg reductions."""
    fmax = float(np.finfo(np.float32).max)
    imax = int(np.iinfo(np.int32).max)
    b, e = b[:n], e[:n]
    return [
        ("sum", lambda t: S.sum(t, x, out, n, b, e), (out,), (_fold(x, b, e, np.sum, 0.0),)),
        ("min", lambda t: S.min(t, x, out, n, b, e), (out,), (_fold(x, b, e, np.min, fmax),)),
        ("max", lambda t: S.max(t, x, out, n, b, e), (out,), (_fold(x, b, e, np.max, -fmax),)),
        ("arg_min", lambda t: S.arg_min(t, x, out, index, n, b, e), (out, index),
         (_fold(x, b, e, np.min, fmax), _fold(x, b, e, np.argmin, 1))),
        ("arg_max", lambda t: S.arg_max(t, x, out, index, n, b, e), (out, index),
         (_fold(x, b, e, np.max, -fmax), _fold(x, b, e, np.argmax, 1))),
        ("reduce add", lambda t: S.reduce(t, x, out, n, b, e, "add", np.float32(1.5)), (out,),
         ([1.5 + s for s in _fold(x, b, e, np.sum, 0.0)],)),
        ("reduce user", lambda t: S.reduce(t, x, out, n, b, e, user_add, np.float32(-2)),
         (out,), ([-2 + s for s in _fold(x, b, e, np.sum, 0.0)],)),
        ("reduce max int", lambda t: S.reduce(t, xi, outi, n, b, e, "max", -imax), (outi,),
         ([max(-imax, s) for s in _fold(xi, b, e, np.max, -imax)],)),
    ]


def _data(size):
    x = RNG.integers(-50, 50, size).astype(np.float32)
    return x, RNG.integers(-1000, 1000, size).astype(np.int32)


def _outputs(n):
    return (np.full(n + 2, 7, np.float32), np.full(n + 2, 7, np.int64),
            np.full(n + 2, 7, np.int32))


@pytest.mark.interpreter_only
@pytest.mark.parametrize("kernel", list(POLICIES))
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_cached_calls_are_exact_and_do_not_reingest_or_replan(counted, kernel, odt):
    """Every method (shifted views of one offsets array): the general path
    once, then cached calls with the same bits, equal to NumPy; nothing past
    num_segments is written."""
    off = offsets(UNEVEN, odt)
    x, xi = _data(int(off[-1]))
    out, index, outi = _outputs(N)
    temp = np.zeros(TEMP, np.uint8)
    with policy(kernel):
        for name, call, outs, refs in _calls(x, xi, out, index, outi, off[:-1], off[1:], N):
            needed = call(None)
            SR._sigs.clear()                                 # the run too on the general path
            assert call(temp) == needed > 0
            general = [o.copy() for o in outs]
            seen = dict(counted)
            for _ in range(2):
                for o in outs:
                    o[:] = 7
                assert call(None) == call(temp) > 0
                assert counted == seen, f"{name}: a cached call took the general path"
                for o, g, ref in zip(outs, general, refs):
                    assert o.tobytes() == g.tobytes(), name
                    assert o[:N].tolist() == ref and (o[N:] == 7).all(), name


@pytest.mark.interpreter_only
@pytest.mark.parametrize("kernel", list(POLICIES))
def test_cached_and_general_paths_launch_the_same(launches, monkeypatch, kernel):
    """Per count (0, 1, all) and d_in length (which changes the kernel's
    shape: the long kernel's tile and split follow the average length), with
    int32 and int64 offsets and views at an offset into the offsets array:
    the cached call makes the general path's launches."""
    off = offsets(RNG.integers(0, 300, 40), np.int64)
    x, xi = _data(int(off[-1]) + 5000)
    out, index, outi = _outputs(40)
    temp = np.zeros(TEMP, np.uint8)
    with policy(kernel):
        for odt in (np.int32, np.int64):
            o = off.astype(odt)
            for n, size, b, e in ((40, o[-1], o[:-1], o[1:]), (0, 0, o[:-1], o[1:]),
                                  (1, 5, o[3:], o[4:]), (39, o[-1] + 5000, o[1:-1], o[2:]),
                                  (20, 100, o[:-1], o[1:])):
                for name, call, _, _ in _calls(x[:size], xi[:size], out, index, outi, b, e, n):
                    monkeypatch.setattr(SR, "_sigs", {})
                    launches.calls.clear()
                    general = call(temp)
                    made = list(launches.calls)
                    assert bool(made) == (n > 0), (name, n)
                    launches.calls.clear()
                    assert call(temp) == general and launches.calls == made, (name, n, size)
                    assert len(SR._sigs) == 1


@pytest.mark.interpreter_only
def test_counts_lengths_and_empty_segments_on_the_cached_path(counted):
    """One signature called with other counts (0, 1, all), shorter d_in (other
    shapes), empty segments: the results of the general path, taken once."""
    lengths = [0, 3, 0, 0, 70, 1, 0, 9]
    off = offsets(lengths, np.int64)
    x, _ = _data(int(off[-1]))
    out = np.full(len(lengths), 7, np.float32)
    temp = np.zeros(TEMP, np.uint8)
    S.sum(temp, x, out, len(lengths), off[:-1], off[1:])
    seen = dict(counted)
    for n, size in ((0, x.size), (1, x.size), (len(lengths), x.size), (5, 80), (8, 2000)):
        d_in = x[:size] if size <= x.size else np.concatenate([x, np.zeros(size - x.size,
                                                                            np.float32)])
        out[:] = 7
        assert S.sum(temp, d_in, out, n, off[:-1], off[1:]) == 1
        assert out[:n].tolist() == _fold(x, off[:n], off[1:n + 1], np.sum, 0.0)
        assert (out[n:] == 7).all()
    assert counted == seen


_OFF = offsets([4, 6, 0], np.int64)


def _bad_calls():
    """(call(x, out, temp), exception, message): each fails a per-call check of
    a cached signature (made by a good call first)."""
    b, e = _OFF[:-1], _OFF[1:]
    return [
        (lambda x, o, t: S.sum(t, x, o, 4, b, e), ValueError,
         '"d_begin_offsets": expected at least 4 elements'),
        (lambda x, o, t: S.sum(t, x, o, 3, b, e[:2]), ValueError,
         '"d_end_offsets": expected at least 3 elements'),
        (lambda x, o, t: S.sum(t, x, o[:2], 3, b, e), ValueError,
         '"d_out": expected at least 3 elements'),
        (lambda x, o, t: S.sum(t, x, o, -1, b, e), ValueError, "count >= 0"),
        (lambda x, o, t: S.sum(t, x, o, 2 ** 31, b, e), ValueError, "at most 2\\*\\*31 - 1"),
        (lambda x, o, t: S.sum(t, x, o, 3.0, b, e), TypeError,
         '"num_segments": expected an int'),
        (lambda x, o, t: S.sum(t, x.reshape(2, 5), o, 2, b, e), ValueError,
         '"d_in": expected a 1-d array'),
        (lambda x, o, t: S.sum(t[:0], x, o, 3, b, e), ValueError,
         "expected at least 1 bytes, got 0 bytes"),
        (lambda x, o, t: S.sum(t[::2], x, o, 3, b, e), ValueError, "writable C-contiguous"),
        (lambda x, o, t: S.sum(DeviceArray(1 << 20, (64,), (1,), ct.uint8, 0), x, o, 3, b, e),
         TypeError, '"temp_storage": it is a GPU array but the data are host'),
        (lambda x, o, t: S.reduce(t, x, o, 3, b, e, "add", "zero"), TypeError,
         '"init": expected a number, got str'),
        (lambda x, o, t: S.reduce(t, x.astype(np.int32), o.astype(np.int32), 3, b, e, "add",
                                  1 << 40), ValueError, '"init": 1099511627776 is out of'),
    ]


@pytest.mark.interpreter_only
@pytest.mark.parametrize("index", range(len(_bad_calls())))
@pytest.mark.parametrize("query", [True, False])
def test_errors_after_a_signature_is_cached(launches, index, query):
    call, exc, message = _bad_calls()[index]
    x = np.arange(10, dtype=np.float32)
    out = np.full(3, 42, np.float32)
    temp = np.zeros(64, np.uint8)
    b, e = _OFF[:-1], _OFF[1:]
    S.sum(temp, x, out, 3, b, e)                              # the signatures
    S.reduce(temp, x, out, 3, b, e, "add", 0)
    xi, outi = x.astype(np.int32), out.astype(np.int32)
    S.reduce(temp, xi, outi, 3, b, e, "add", 1)
    launches.calls.clear()
    out[:], outi[:] = 42, 42
    if query and "temp" not in message and "bytes" not in message and \
            "C-contiguous" not in message:
        with pytest.raises(exc, match=message):
            call(x, out, None)
    with pytest.raises(exc, match=message):
        call(x, out, temp)
    assert launches.calls == [] and (out == 42).all()


@pytest.mark.interpreter_only
def test_too_small_temp_storage_for_split_partials(launches):
    off = offsets([3000, 2000], np.int32)
    x, _ = _data(5000)
    out = np.full(2, 7, np.float32)
    with policy("split"):
        needed = S.sum(None, x, out, 2, off[:-1], off[1:])
        assert needed > 1
        S.sum(np.zeros(needed, np.uint8), x, out, 2, off[:-1], off[1:])
        launches.calls.clear()
        out[:] = 7
        with pytest.raises(ValueError, match=f"expected at least {needed} bytes, got "
                                             f"{needed - 1} bytes"):
            S.sum(np.zeros(needed - 1, np.uint8), x, out, 2, off[:-1], off[1:])
        assert S.sum(np.zeros(needed + 100, np.float64), x, out, 2, off[:-1], off[1:]) == needed
    assert len(launches.calls) == 2 and (out == 7).all()     # (launches recorded, not run)


@pytest.mark.interpreter_only
def test_policy_override_changes_the_epoch(launches, counted):
    """A cached signature made under one policy is not used under another:
    the general path rebuilds the plan, and the default's launches come back
    after the override."""
    off = offsets(UNEVEN, np.int32)
    x, _ = _data(int(off[-1]))
    out = np.zeros(N, np.float32)
    temp = np.zeros(TEMP, np.uint8)
    S.sum(temp, x, out, N, off[:-1], off[1:])
    S.sum(temp, x, out, N, off[:-1], off[1:])
    default, general = launches.calls[-1], counted["general"]
    for name in ("long", "rows"):
        with policy(name):
            S.sum(temp, x, out, N, off[:-1], off[1:])
            assert counted["general"] == general + 1
            S.sum(temp, x, out, N, off[:-1], off[1:])          # cached under the override
            assert counted["general"] == general + 1
            assert launches.calls[-1] != default
            general = counted["general"]
    S.sum(temp, x, out, N, off[:-1], off[1:])
    assert launches.calls[-1] == default and counted["general"] == general + 1


@pytest.mark.interpreter_only
def test_offsets_converted_first_stay_on_the_general_path(counted):
    """convert_offsets 1 (int64 offsets clamped into int32 arrays first, rows
    kernels): every call takes the general path, with its results."""
    off = offsets(UNEVEN, np.int64)
    x, _ = _data(int(off[-1]))
    out = np.zeros(N, np.float32)
    with policy("rows"), override_policy("segmented_reduce", convert_offsets=1):
        needed = S.sum(None, x, out, N, off[:-1], off[1:])
        assert needed == 256                                   # N + 1 int32 offsets
        for k in range(3):
            out[:] = 7
            assert S.sum(np.zeros(needed, np.uint8), x, out, N, off[:-1], off[1:]) == needed
            assert out.tolist() == _fold(x, off[:-1], off[1:], np.sum, 0.0)
        assert counted["general"] == 4


# -- segmented_sum -------------------------------------------------------------------------------

@pytest.mark.interpreter_only
@pytest.mark.parametrize("kernel", list(POLICIES))
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_segmented_sum_cached_path(counted, monkeypatch, kernel, odt):
    x = RNG.integers(-50, 50, (30, 40)).astype(np.int16)
    f = RNG.integers(-50, 50, 1200).astype(np.float32)
    off = offsets(RNG.integers(0, 80, 20), odt)
    off[-1] = min(off[-1], 1200)
    with policy(kernel):
        for _ in range(2):                                      # general, then cached
            got = A.segmented_sum(x, off)
            assert got.dtype == np.int64 and got.shape == (20,)
            assert got.tolist() == _fold(x.reshape(-1), off[:-1], off[1:], np.sum, 0)
            A.segmented_sum(f, off)
        seen = dict(counted)
        general = []
        monkeypatch.setattr(SC, "_general", lambda *a: general.append(a))
        results = [A.segmented_sum(f, off) for _ in range(3)]
        assert A.segmented_sum(f, off[:1]).shape == (0,)
        assert A.segmented_sum(f[:100], off[:3]).tolist() == \
            _fold(f[:100], off[:2], off[1:3], np.sum, 0.0)
    assert general == [] and counted == seen
    assert len({id(r) for r in results}) == 3                  # a new result each call
    for r in results:
        assert r.dtype == np.float32 and r.tolist() == _fold(f, off[:-1], off[1:], np.sum, 0.0)


@pytest.mark.interpreter_only
def test_segmented_sum_errors_after_caching():
    f = np.ones(100, np.float32)
    off = np.array([0, 50, 100], np.int32)
    for _ in range(2):
        assert A.segmented_sum(f, off).tolist() == [50, 50]
    with pytest.raises(ValueError, match='"offsets": expected a 1-d array of at least 1'):
        A.segmented_sum(f, off[:0])
    with pytest.raises(ValueError, match='"offsets": expected a 1-d array of at least 1'):
        A.segmented_sum(f, np.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match='"offsets": expected an array'):
        A.segmented_sum(f, [0, 50])


@pytest.mark.interpreter_only
def test_segmented_sum_gpu_offsets_are_two_device_views():
    """On the GPU the cached path passes offsets[:-1] and offsets[1:] as two
    DeviceArrays at the offsets' pointer and stride (no CuPy or PyTorch slice)."""
    import types
    cupy_offsets = types.SimpleNamespace(data=types.SimpleNamespace(ptr=4096), strides=(16,))
    torch_offsets = types.SimpleNamespace(data_ptr=lambda: 8192, stride=lambda dim: 3)
    for lib, o, ptr, step in ((H._CUPY, cupy_offsets, 4096, 2), (H._TORCH, torch_offsets, 8192,
                                                                  3)):
        begins, ends = SC._halves(lib, ct.int64, 0)(o, 5)
        assert begins == DeviceArray(ptr, (5,), (step,), ct.int64, 0)
        assert ends == DeviceArray(ptr + 8 * step, (5,), (step,), ct.int64, 0)
    o = np.arange(6)
    begins, ends = SC._halves(H._NUMPY, ct.int64, -1)(o, 5)
    assert begins.tolist() == [0, 1, 2, 3, 4] and ends.tolist() == [1, 2, 3, 4, 5]


# -- on a GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_repeated_calls_launch_fast(monkeypatch, odt):
    """After the first calls of each signature and shape (rows and split long
    kernels of the shipped policy on 132 SMs; segmented_sum's first call is
    the general path, its second the first on its own launches), no launch
    takes tilecore.launch: every one goes through its kept fast launcher,
    with the first call's results. (In a one-GPU process: with more GPUs the
    convenience layer keeps to its general path, which checks devices.)"""
    cp = pytest.importorskip("cupy")
    monkeypatch.setattr(H, "_one_device", [True])
    general = []
    real = ct.launch
    monkeypatch.setattr(ct, "launch", lambda *a: (general.append(a[2]), real(*a)))
    x = cp.asarray(RNG.uniform(-1, 1, 1 << 20).astype(np.float32))
    out, index = cp.zeros(1 << 13, cp.float32), cp.zeros(1 << 13, cp.int64)
    temp = cp.empty(1 << 22, cp.uint8)
    calls = []
    for step in (128, 16384, 1 << 19):                 # rows, split in 2, in many
        off = cp.arange(0, (1 << 20) + 1, step, dtype=odt)
        b, e, n = off[:-1], off[1:], off.size - 1
        calls += [lambda b=b, e=e, n=n: (S.sum(temp, x, out, n, b, e), out.get())[1],
                  lambda b=b, e=e, n=n: (S.max(temp, x, out, n, b, e), out.get())[1],
                  lambda b=b, e=e, n=n: (S.arg_min(temp, x, out, index, n, b, e),
                                         index.get())[1],
                  lambda b=b, e=e, n=n: (S.reduce(temp, x, out, n, b, e, user_add,
                                                  np.float32(0)), out.get())[1],
                  lambda off=off: A.segmented_sum(x, off).get()]
    firsts = [call() for call in calls]
    for call in calls:
        call()
    general.clear()
    for _ in range(3):
        for call, first in zip(calls, firsts):
            assert call().tobytes() == first.tobytes()
    assert general == [], f"{len(general)} launches took tilecore.launch"
