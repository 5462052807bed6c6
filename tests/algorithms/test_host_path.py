"""The cached host path of DeviceReduce and the convenience layer (CPU side,
no timing): a repeated call of a known signature builds no plan, ingests no
argument through `describe` and makes the same launches as the general path;
anything unusual (bad arguments, a new policy or tuning directory) goes back
to the general path, with its errors."""
import numpy as np
import pytest

import tilecore as ct
import tilecore.algorithms as A
from tilecore.algorithms import DeviceReduce as R
from tilecore.algorithms import convenience as C
from tilecore.algorithms import reduce as RM
from tilecore.runtime import DeviceArray
from algo_helpers import count_calls, small

pytestmark = pytest.mark.interpreter_only


@pytest.fixture
def counted(monkeypatch):
    """Counts argument ingestion (`describe`) and policy selection."""
    return count_calls(monkeypatch, [(RM, "describe", "describe"),
                                      (RM, "select_reduce_policy", "policy"),
                                      (C, "describe", "describe")])


def _same_work(calls):
    return all(c == calls[0] for c in calls)


@pytest.mark.parametrize("n", [1000, 3001])  # the single-block path, two passes (SMALL policy)
def test_cached_two_phase_calls_do_not_replan_or_reingest(launches, counted, n):
    x = np.random.default_rng(0).random(n).astype(np.float32)
    out = np.zeros(1, np.float32)
    v, i = np.zeros(1, np.float32), np.zeros(1, np.int64)
    with small():
        temp = np.zeros(max(R.sum(None, x, out, n), R.arg_max(None, x, v, i, n)), np.uint8)
        calls = [lambda: R.sum(temp, x, out, n), lambda: R.min(temp, x, out, n),
                 lambda: R.arg_max(temp, x, v, i, n),
                 lambda: R.reduce(temp, x, out, n, "mul", np.float32(1)),
                 lambda: R.transform_reduce(temp, x, out, n, "add", np.negative, 0.0)]
        for call in calls:  # the general path, once per signature
            call()
        made, seen = RM.plans_made[0], dict(counted)
        for call in calls:
            launches.calls.clear()
            for _ in range(5):
                call()
            per_call = len(launches.calls) // 5
            assert per_call == (1 if n <= 200 else 2)
            assert _same_work([launches.calls[k::per_call] for k in range(per_call)][0])
        assert RM.plans_made[0] == made, "a cached call built a plan"
        assert counted == seen, "a cached call re-ingested arguments or re-selected a policy"


def test_cached_and_general_paths_launch_the_same(launches, monkeypatch):
    x = np.arange(3001, dtype=np.float64)
    out = np.zeros(1, np.float64)
    with small():
        temp = np.zeros(R.sum(None, x, out, 3001), np.uint8)
        R.sum(temp, x, out, 3001)
        general = list(launches.calls)
        launches.calls.clear()
        R.sum(temp, x, out, 3001)
        assert launches.calls == general
        # and with the cache forgotten, the general path makes the same launches again
        monkeypatch.setattr(RM, "_sigs", {})
        launches.calls.clear()
        R.sum(temp, x, out, 3001)
        assert launches.calls == general


def test_cached_results_are_exact_and_bit_identical():
    x = np.random.default_rng(1).standard_normal(3001).astype(np.float32)
    out = np.zeros(1, np.float32)
    with small():
        temp = np.zeros(R.sum(None, x, out, x.size), np.uint8)
        got = []
        for _ in range(3):
            out[0] = 7
            R.sum(temp, x, out, x.size)
            got.append(out.copy())
        assert got[0] == got[1] == got[2]
        assert abs(float(got[0][0]) - x.astype(np.float64).sum()) < 1e-3
        v, i = np.zeros(1, np.float32), np.zeros(1, np.int64)
        for _ in range(2):
            R.arg_min(np.zeros(4096, np.uint8), x, v, i, x.size)
            assert i[0] == x.argmin() and v[0] == x.min()


def test_cached_reduce_takes_each_calls_init():
    """The cached path keeps the last init's conversion by identity: the same
    scalar object again, a new object of the same dtype, a Python number and a
    1-element array changed in place between calls each give their own init."""
    x = np.arange(1, 11, dtype=np.float32)
    out = np.zeros(1, np.float32)
    temp = np.zeros(R.reduce(None, x, out, 10, "add", np.float32(0)), np.uint8)
    one = np.float32(1)
    for init, want in ((one, 56), (one, 56), (np.float32(2), 57), (np.float32(-5), 50)):
        R.reduce(temp, x, out, 10, "add", init)
        assert out[0] == want
    for init, want in ((3, 58), (3, 58), (4, 59)):
        R.reduce(temp, x, out, 10, "max", init)
        assert out[0] == 10
        R.reduce(temp, x, out, 10, "add", init)
        assert out[0] == want
    box = np.full(1, 6, np.float32)
    for value in (6, 7):
        box[0] = value
        R.reduce(temp, x, out, 10, "add", box)
        assert out[0] == 55 + value


@pytest.mark.parametrize("call, exc, message", [
    (lambda x, o, t: R.sum(t, x, o, 11), ValueError, '"num_items": 11 items is more than'),
    (lambda x, o, t: R.sum(t, x, o, -1), ValueError, '"num_items": expected a count >= 0'),
    (lambda x, o, t: R.sum(t, x, o, 2.0), TypeError, '"num_items": expected an int'),
    (lambda x, o, t: R.sum(t, x.reshape(2, 5), o, 4), ValueError, '"d_in": expected a 1-d'),
    (lambda x, o, t: R.sum(t, x, o[:0], 4), ValueError, '"d_out": expected an array of at least'),
    (lambda x, o, t: R.sum(np.zeros(4, np.uint8)[::2], x, o, 4), ValueError,
     '"temp_storage": expected a writable C-contiguous array'),
    (lambda x, o, t: R.sum(np.zeros(0, np.uint8), x, o, 4), ValueError,
     '"temp_storage": the temporary storage is too small: expected at least 1 bytes, got 0'),
    (lambda x, o, t: R.sum([0] * 64, x, o, 4), TypeError, '"temp_storage": expected an array'),
    (lambda x, o, t: R.reduce(t, x, o, 4, "add", "zero"), TypeError,
     '"init": expected a number, got str'),
])
def test_errors_after_a_signature_is_cached(launches, call, exc, message):
    x = np.arange(10, dtype=np.float64)
    out = np.full(1, 42, np.float64)
    temp = np.zeros(4096, np.uint8)
    R.sum(temp, x, out, 10)
    R.reduce(temp, x, out, 10, "add", 0.0)
    launches.calls.clear()
    with pytest.raises(exc, match=message):
        call(x, out, temp)
    assert launches.calls == [] and out[0] == 42


def test_unusual_arguments_take_the_general_path(launches):
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(1, np.float32)
    temp = np.zeros(64, np.uint8)
    R.sum(temp, x, out, 10)
    assert R.sum(temp, x, out, np.int64(10)) == 1          # a NumPy count
    assert R.sum(temp, x, np.zeros((), np.float32), 3) == 1  # a 0-d output
    assert R.sum(temp.view(np.float64), x, out, 10) == 1  # another temp dtype
    assert R.reduce(temp, x, out, 10, "add", np.float64(1)) == 1  # another init dtype
    assert len(launches.calls) == 5


def test_policy_override_and_tuning_dir_rebuild_the_plan(launches, monkeypatch, tmp_path):
    x = np.arange(3001, dtype=np.float32)
    out = np.zeros(1, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    R.sum(temp, x, out, 3001)
    made = RM.plans_made[0]
    R.sum(temp, x, out, 3001)
    assert RM.plans_made[0] == made and launches.calls[-1][1] == (1,)  # one block by default
    with small():
        R.sum(temp, x, out, 3001)
        assert RM.plans_made[0] == made + 1
        assert launches.calls[-2][1] != (1,)  # two passes under the small policy
    monkeypatch.setenv("TILECORE_TUNING_DIR", str(tmp_path))
    R.sum(temp, x, out, 3001)
    assert RM.plans_made[0] == made + 2


def test_convenience_cached_path_allocates_only_the_result(launches, counted, monkeypatch):
    x = np.random.default_rng(2).random((30, 100)).astype(np.float32)
    with small():
        for f in (A.sum, A.argmax):
            f(x)
        made, seen, buffers = RM.plans_made[0], dict(counted), dict(C._temp)
        queries = []
        monkeypatch.setattr(C, "_call", lambda *a: queries.append(a))
        launches.calls.clear()
        results = [f(x) for f in (A.sum, A.argmax) for _ in range(3)]
    assert queries == [], "a cached convenience call took the general path"
    assert RM.plans_made[0] == made and counted == seen
    assert C._temp.keys() == buffers.keys() and all(C._temp[k] is buffers[k] for k in buffers)
    assert all(r.shape == () for r in results)
    assert results[0].dtype == np.float32 and results[3].dtype == np.int64
    assert len({id(r) for r in results}) == len(results)  # a new result each call
    assert len(launches.calls) == 6 * 2  # two passes each (3000 items, SMALL policy)


def test_convenience_cached_results():
    x = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    with small():
        for _ in range(3):
            assert abs(float(A.sum(x)) - x.astype(np.float64).sum()) < 1e-3
            assert int(A.argmin(x)) == x.argmin() and int(A.argmax(x)) == x.argmax()
            assert A.min(x) == x.min() and A.max(x) == x.max()
        xi = np.arange(-50, 50, dtype=np.int8)
        for _ in range(2):
            s = A.sum(xi)
            assert s.dtype == np.int64 and int(s) == -50


def test_device_arrays_have_cached_accessors():
    from tilecore.algorithms.hostpath import lib_of
    lib = lib_of(DeviceArray(4096, (10,), (1,), ct.float32, 0))
    assert lib is not None and not lib.host
    assert lib.vec(DeviceArray(4096, (10,), (1,), ct.float32, 0)) == 10
    assert lib.vec(DeviceArray(4096, (2, 5), (5, 1), ct.float32, 0)) == -1
    assert lib.temp(DeviceArray(4096, (10,), (2,), ct.float32, 0)) == -1
    assert lib.temp(DeviceArray(4096, (10,), (1,), ct.float32, 0, True)) == -1
    assert lib.temp(DeviceArray(4096, (10,), (1,), ct.float32, 0)) == 40
    assert lib_of([1, 2]) is None and lib_of(np.zeros(2)).host


def test_device_array_views_are_device_arguments():
    """tilecore's own DeviceArray (a NamedTuple: the temporary-storage views one
    algorithm passes to another, as reduce_by_key to DeviceScan) is a GPU array,
    not a tuple; a plain tuple is still refused."""
    from tilecore.algorithms.arrays import describe
    a = describe(DeviceArray(4096, (10,), (1,), ct.float32, 0), "d_in")
    assert (a.host, a.size, a.ndim, a.device_id, a.dtype) == (False, 10, 1, 0, ct.float32)
    with pytest.raises(TypeError, match='"d_in": expected an array.*got tuple'):
        describe((4096, (10,)), "d_in")


# -- the convenience layer's GPU cached path, on stand-ins of CuPy and PyTorch -----------------

class _FakeMemory:
    def __init__(self, ptr):
        self.ptr = ptr


def _fake_libraries(monkeypatch):
    """Minimal `cupy` and `torch` modules: what the cached GPU path touches
    (0-d allocation, the pointer, the raw current stream), with each
    allocation counted and given a new pointer."""
    import sys
    import types
    made = {"cupy": [], "torch": [], "reshape": 0}

    cupy = types.ModuleType("cupy")

    class ndarray:  # noqa: N801  (CuPy's name)
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.ndim, self.size = len(self.shape), int(np.prod(self.shape))
            self.data = _FakeMemory(4096 * (len(made["cupy"]) + 1))
            self.device = types.SimpleNamespace(id=0)
            made["cupy"].append(self)

        def reshape(self, *shape):
            made["reshape"] += 1
            return self
    ndarray.__module__ = "cupy"
    cupy.ndarray = ndarray
    cupy.empty = lambda shape, dtype: ndarray(shape, dtype)
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=77))

    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), dtype
            self.ndim = len(self.shape)
            self._ptr = 8192 * (len(made["torch"]) + 1)
            made["torch"].append(self)

        def data_ptr(self):
            return self._ptr

        def numel(self):
            return int(np.prod(self.shape))

        is_cuda = True

        def get_device(self):
            return 0

        def reshape(self, *shape):
            made["reshape"] += 1
            return self
    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    for name in ("int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
                 "float64"):
        setattr(torch, name, "torch." + name)
    torch.empty = lambda shape, dtype=None, device=None: Tensor(shape, dtype)
    torch.device = lambda kind, index: (kind, index)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 99)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return cupy, torch, made


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_convenience_gpu_cached_path_makes_one_0d_result(launches, monkeypatch, library):
    """On the GPU the cached path allocates the 0-d result directly (no 1-d
    array, no reshape), passes the kernel a DeviceArray of its pointer, and
    reads the library's raw current stream."""
    from tilecore.algorithms import hostpath as H
    from tilecore.language import dtypes as D
    cupy, torch, made = _fake_libraries(monkeypatch)
    host = np.random.default_rng(5).random(1000).astype(np.float32)
    A.sum(host)  # a real plan (the interpreter's target; launches are recorded, not run)
    plan = RM.signature_plan("sum", host, np.zeros(1, np.float32))
    assert plan is not None
    if library == "cupy":
        x = cupy.ndarray((1000,), np.float32)
        conv = C._Conv(plan, H._CUPY, C._cupy(), x, D.float32, None)
    else:
        x = torch.Tensor((1000,), "torch.float32")
        conv = C._Conv(plan, H._TORCH, C._torch(), x, D.float32, None)
    made[library].clear()
    made["reshape"] = 0
    launches.calls.clear()
    results = [conv(x) for _ in range(3)]
    assert made[library] == results and made["reshape"] == 0  # one 0-d allocation per call
    assert all(r.shape == () for r in results)
    assert len(launches.calls) == 3  # 1000 items: the single-block kernel
    for r, (stream, grid, _, args) in zip(results, launches.calls):
        assert stream == (77 if library == "cupy" else 99) and grid == (1,)
        out = args[1]
        assert type(out) is DeviceArray and out.shape == (1,) and out.strides == (1,)
        ptr = r.data.ptr if library == "cupy" else r.data_ptr()
        assert out.ptr == ptr and out.dtype is ct.float32 and not out.readonly
    # a policy change makes the cached path decline (the general path rebuilds)
    with small():
        assert conv(x) is None


def test_first_pass_grid_leaves_no_lone_last_round():
    """The first pass takes the fewest blocks that need no more tiles each than
    the policy's grid_max blocks would (brute-forced here), so that every block
    runs the same number of rounds but one, at most."""
    host = np.zeros(1 << 20, np.float32)
    R.sum(np.zeros(R.sum(None, host, np.zeros(1, np.float32), host.size), np.uint8), host,
          np.zeros(1, np.float32), host.size)
    plan = RM.signature_plan("sum", host, np.zeros(1, np.float32))
    gmax, tile = plan.grid_max, plan.tile
    for tiles in (2, 3, gmax - 1, gmax, gmax + 1, 2 * gmax + 1, 31 * gmax + 16, 65536, 99991):
        n = tiles * tile + tile // 3
        if n <= plan.single_max:
            continue
        grid = plan.grid(n)
        most = -(-tiles // min(gmax, tiles))          # tiles per block with grid_max blocks
        fewest = min(g for g in range(1, gmax + 1) if -(-tiles // g) <= most)
        assert grid == fewest and grid <= gmax
        assert tiles - (grid - 1) * most > 0              # the last block has a tile too


def test_first_pass_blocks_hold_fewer_than_2_to_the_31_items():
    """arg_reduce numbers a block's items in int32 (the largest number marks no
    item): past grid_max blocks' worth of 2^31 items the grid grows instead (no
    GPU holds such arrays yet; the grid's arithmetic alone)."""
    host = np.zeros(1 << 20, np.int8)
    v, i = np.zeros(1, np.int8), np.zeros(1, np.int64)
    R.arg_max(np.zeros(R.arg_max(None, host, v, i, host.size), np.uint8), host, v, i, host.size)
    plan = RM.signature_plan("arg_max", host, v, i)
    gmax, tile = plan.grid_max, plan.tile
    for n in (gmax << 30, (gmax << 31) - 1, gmax << 31, (gmax << 34) + 5):
        grid = plan.grid(n)
        tiles = n // tile
        per = -(-tiles // grid)
        assert (per + 1) * tile < (1 << 31) - 1           # the tiles and the partial one
        most = min(-(-tiles // gmax), (1 << 31) // tile - 2)
        assert per <= most < -(-tiles // (grid - 1))     # and no fewer blocks would do
    assert plan.grid(gmax << 30) == gmax and plan.grid(gmax << 31) > gmax


def test_allocators_use_the_cheapest_constructor(monkeypatch):
    """convenience.allocator (cumsum's result): CuPy's ndarray constructor (what
    cupy.empty calls) and torch.empty on x's device, of the library's dtype."""
    from tilecore.algorithms import hostpath as H
    from tilecore.language import dtypes as D
    cupy, torch, made = _fake_libraries(monkeypatch)
    monkeypatch.setattr(cupy, "empty", None)           # never called
    x = cupy.ndarray((10,), np.float32)
    out = C.allocator(H._CUPY, C._cupy(), x, D.int64)((7,))
    assert type(out) is cupy.ndarray and out.shape == (7,) and out.dtype == np.int64
    t = torch.Tensor((10,), "torch.float32")
    seen = []
    monkeypatch.setattr(torch, "empty", lambda shape, dtype=None, device=None:
                        seen.append((shape, dtype, device)) or torch.Tensor(shape, dtype))
    out = C.allocator(H._TORCH, C._torch(), t, D.int64)((7,))
    assert seen == [((7,), "torch.int64", ("cuda", 0))] and out.shape == (7,)
    host = C.allocator(H._NUMPY, C._numpy(), np.zeros(3), D.uint64)((5,))
    assert host.dtype == np.uint64 and host.shape == (5,)


def test_apart_across_libraries():
    """A DeviceArray beside another library's array (reduce_by_key's temporaries
    passed to DeviceScan with the caller's arrays): apart when their byte
    extents do not meet, for arrays of at least n elements."""
    from tilecore.algorithms.hostpath import _DESCRIBED, Lib, apart_across
    from tilecore.language import dtypes as D
    from tilecore.runtime import DeviceArray

    class Other(Lib):      # another device library: (address, elements, step) tuples
        vec = temp = ptr = buffer = device = lambda self, *a: -1
        apart = lambda self, a, b, n: False          # noqa: E731

        def extent(self, a, n):
            return (a[0], a[1], a[2], 4) if a[1] >= n else None

    other = Other()
    assert apart_across(_DESCRIBED, _DESCRIBED) == _DESCRIBED.apart
    view = DeviceArray(4096, (100,), (1,), D.float32, 0)        # bytes 4096 .. 4496
    apart = apart_across(_DESCRIBED, other)
    assert apart(view, (4496, 10, 4), 10) and apart(view, (0, 1024, 4), 10)
    assert not apart(view, (4492, 10, 4), 10)                    # shares the last item
    assert not apart(view, (8192, 10, -500), 10)                 # reaches back into it
    assert apart(view, (8192, 10, -400), 10)                     # ... or stops short
    assert not apart(view, (8192, 5, 4), 10)                     # too short for n
    assert not apart(DeviceArray(4096, (10, 10), (10, 1), D.float32, 0), (0, 10, 4), 1)

