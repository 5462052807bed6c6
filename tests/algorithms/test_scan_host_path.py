"""DeviceScan's cached host path (CPU side, no timing): a repeated call of a
known signature ingests no argument, selects no policy and makes the same
launches as the general path; every per-call check still holds on it (count,
sizes, in place, overlap, temporary storage, sides) and nothing is written on
an error; `tilecore.algorithms.cumsum` runs on it. On a stand-in GPU (the
real GPU launch path with the compile and the driver call replaced), every
launch of a repeated scan takes a fast launcher."""
import numpy as np
import pytest

import tilecore as ct
import tilecore.algorithms as A
from tilecore.algorithms import DeviceScan as S
from tilecore.algorithms import scan as SM
from tilecore.algorithms import scan_plan as SP
from tilecore.algorithms import scan_convenience as SC
from tilecore.dispatch import override_policy
from tilecore.runtime import DeviceArray
from algo_helpers import count_calls, run_keys

pytestmark = pytest.mark.interpreter_only

# 64-item tiles: a few thousand items are many tiles (status init + single pass)
SMALL = dict(block_threads=32, items_per_thread=2, blocks_per_sm=2, small_items=0, mode=3,
             exact_mode=3, group_tiles=4, one_launch_max_items=0)
N = 1000
RNG = np.random.default_rng(15)


def user_add(a, b):
    total = a + b    # not one `return a + b`: a user operator, not recognized as "add"
    return total


@pytest.fixture
def counted(monkeypatch):
    """Counts argument ingestion (`describe`) and policy selection."""
    return count_calls(monkeypatch, [(SM, "describe", "describe"),
                                      (SP, "select_scan_policy", "policy"),
                                      (SC, "describe", "describe")])


def _excl(c, init=0):
    return np.concatenate([[init], c[:-1]]).astype(c.dtype)


def _calls(x, y, keys, temp, n):
    """(name, call, reference) for every method, by-key ones included."""
    x64 = x.astype(np.float64)
    seg = np.cumsum(np.r_[True, keys[1:n] != keys[:n - 1]]) - 1     # run index of each item
    by_key = np.array([x64[:i + 1][seg[:i + 1] == seg[i]].sum() for i in range(n)])
    return [
        ("inclusive_sum", lambda: S.inclusive_sum(temp, x, y, n), np.cumsum(x64[:n])),
        ("exclusive_sum", lambda: S.exclusive_sum(temp, x, y, n), _excl(np.cumsum(x64[:n]))),
        ("inclusive_scan add", lambda: S.inclusive_scan(temp, x, y, "add", n),
         np.cumsum(x64[:n])),
        ("inclusive_scan user", lambda: S.inclusive_scan(temp, x, y, user_add, n),
         np.cumsum(x64[:n])),
        ("inclusive_scan_init max", lambda: S.inclusive_scan_init(temp, x, y, "max",
                                                                  np.float32(3), n),
         np.maximum.accumulate(np.maximum(x64[:n], 3))),
        ("exclusive_scan add", lambda: S.exclusive_scan(temp, x, y, "add", 2.0, n),
         _excl(2 + np.cumsum(x64[:n]), 2)),
        ("exclusive_scan user", lambda: S.exclusive_scan(temp, x, y, user_add, np.float32(-1), n),
         _excl(-1 + np.cumsum(x64[:n]), -1)),
        ("inclusive_sum_by_key", lambda: S.inclusive_sum_by_key(temp, keys, x, y, n), by_key),
        ("exclusive_sum_by_key", lambda: S.exclusive_sum_by_key(temp, keys, x, y, n),
         by_key - x64[:n]),
        ("inclusive_scan_by_key user",
         lambda: S.inclusive_scan_by_key(temp, keys, x, y, user_add, n), by_key),
        ("exclusive_scan_by_key add",
         lambda: S.exclusive_scan_by_key(temp, keys, x, y, "add", np.float32(0), n),
         by_key - x64[:n]),
    ]


def _data(n=N):
    x = RNG.integers(-20, 20, n).astype(np.float32)
    keys = run_keys(RNG, n, 40)
    return x, keys


def test_cached_calls_are_exact_and_do_not_reingest_or_replan(counted):
    x, keys = _data()
    y = np.full(N + 5, 7, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    with override_policy("scan", **SMALL):
        calls = _calls(x, y, keys, temp, N)
        for _, call, _ in calls:                 # the general path, once per signature
            call()
        seen, plans = dict(counted), len(SP._plans)
        for name, call, want in calls:
            for _ in range(2):
                y[:N] = 7
                assert call() > 0
                np.testing.assert_array_equal(y[:N], want.astype(np.float32), err_msg=name)
        assert np.all(y[N:] == 7)                # nothing past num_items
        assert counted == seen, "a cached call re-ingested arguments or re-selected a policy"
        assert len(SP._plans) == plans


def test_cached_and_general_paths_launch_the_same(launches, monkeypatch):
    x, keys = _data()
    y = np.zeros(N, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    with override_policy("scan", **SMALL):
        for name, call, _ in _calls(x, y, keys, temp, N):
            launches.calls.clear()
            call()                                                   # general
            general = list(launches.calls)
            assert len(general) == 2, name                           # status init, single pass
            launches.calls.clear()
            call()                                                   # cached
            assert launches.calls == general, name
            monkeypatch.setattr(SM, "_sigs", {})                     # forgotten: general again
            launches.calls.clear()
            call()
            assert launches.calls == general, name


def test_a_scan_without_keys_passes_an_empty_keys_array(launches):
    """The kernels' `keys` argument of a scan without keys is unread: an empty
    array in the temporary storage, so it overlaps no argument (the GPU's fast
    launcher checks that every array's bytes are disjoint)."""
    x, _ = _data()
    y = np.zeros(N, np.float32)
    with override_policy("scan", **SMALL):
        S.inclusive_sum(np.zeros(1 << 16, np.uint8), x, y, N)
    args = launches.calls[-1][3]
    assert args[1][0] == "array" and args[1][2] == (0,)


def test_counts_and_buffers_are_checked_on_every_call():
    """A cached signature with another count, a buffer too small or too large,
    or a count beyond an array: validated each call (nothing written on an error)."""
    x, _ = _data(3000)
    y = np.full(3000, 7, np.float32)
    with override_policy("scan", **SMALL):
        big = np.zeros(S.inclusive_sum(None, x, y, 3000), np.uint8)
        S.inclusive_sum(big, x, y, 3000)
        for n in (3000, 1, 0, 777, 2000):
            needed = S.inclusive_sum(None, x, y, n)
            y[:] = 7
            assert S.inclusive_sum(np.zeros(needed, np.uint8), x, y, n) == needed
            np.testing.assert_array_equal(y[:n], np.cumsum(x[:n].astype(np.float64)))
            assert np.all(y[n:] == 7)
            if needed > 1:
                with pytest.raises(ValueError, match=f"expected at least {needed} bytes, "
                                                     f"got {needed - 1} bytes"):
                    S.inclusive_sum(np.zeros(needed - 1, np.uint8), x, y, n)
        y[:] = 7
        with pytest.raises(ValueError, match='"num_items": 3001 items is more than "d_in"'):
            S.inclusive_sum(big, x, y, 3001)
        with pytest.raises(ValueError, match='"num_items": 3000 items is more than "d_out"'):
            S.inclusive_sum(big, x, y[:2000], 3000)
        with pytest.raises(ValueError, match="count >= 0"):
            S.inclusive_sum(big, x, y, -1)
        with pytest.raises(TypeError, match='"num_items": expected an int'):
            S.inclusive_sum(big, x, y, 10.0)
        assert S.inclusive_sum(big, x, y, np.int64(5)) > 0   # a NumPy count: the general path
        np.testing.assert_array_equal(y[:5], np.cumsum(x[:5]))
        assert np.all(y[5:] == 7)


def test_in_place_and_overlap_on_the_cached_path():
    x, _ = _data()
    temp = np.zeros(1 << 16, np.uint8)
    with override_policy("scan", **SMALL):
        for _ in range(3):                                      # general, then cached
            z = x.copy()
            S.exclusive_sum(temp, z, z, N)
            np.testing.assert_array_equal(z, _excl(np.cumsum(x)))
        view = x.copy()
        S.inclusive_sum(temp, view, view[:], N)                 # in place through a view
        np.testing.assert_array_equal(view, np.cumsum(x))
        buf = np.full(N + 1, 7, np.float32)
        S.exclusive_sum(temp, x, buf[:N], N)                    # a signature of these types
        for d_in, d_out in ((buf[1:], buf[:-1]), (buf[:-1], buf[1:])):
            with pytest.raises(ValueError, match='"d_out": it overlaps "d_in"'):
                S.exclusive_sum(temp, d_in, d_out, N)
        assert np.all(buf[N:] == 7) and np.all(buf[:N] == _excl(np.cumsum(x)))
        keys = np.zeros(N, np.int32)
        S.inclusive_sum_by_key(temp, keys, x, np.zeros(N, np.float32), N)
        with pytest.raises(ValueError, match='"d_values_out": it overlaps "d_keys_in"'):
            S.inclusive_sum_by_key(temp, keys, x, keys.view(np.float32), N)
        assert not keys.any()


def test_init_values_change_between_cached_calls():
    x, _ = _data()
    y = np.zeros(N, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    with override_policy("scan", **SMALL):
        for init in (np.float32(0), np.float32(5), np.float32(-2.5)):
            S.exclusive_scan(temp, x, y, "add", init, N)
            np.testing.assert_array_equal(y, _excl(init + np.cumsum(x), init))
        y[:] = 7
        with pytest.raises(TypeError, match='"init": expected a number, got str'):
            S.exclusive_scan(temp, x, y, "add", "zero", N)
        xi = x.astype(np.int32)
        yi = np.full(N, 7, np.int32)
        S.exclusive_scan(temp, xi, yi, "add", 1, N)
        with pytest.raises(ValueError, match='"init": 4294967296 is out of the range'):
            S.exclusive_scan(temp, xi, yi, "add", 1 << 32, N)
        np.testing.assert_array_equal(yi, _excl(1 + np.cumsum(xi), 1))
        init = np.array([3], np.int32)                  # a 1-element array, changed in place
        for value in (3, 4):
            init[0] = value
            S.exclusive_scan(temp, xi, yi, "max", init, N)
            np.testing.assert_array_equal(yi, _excl(np.maximum.accumulate(
                np.maximum(xi, value)), value))
    assert np.all(y == 7)


def test_sides_are_checked_on_the_cached_path(launches):
    x, _ = _data()
    y = np.full(N, 7, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    S.inclusive_sum(temp, x, y, N)
    launches.calls.clear()
    dev = DeviceArray(1 << 20, (1 << 16,), (1,), ct.uint8, 0)
    with pytest.raises(TypeError, match='"temp_storage": it is a GPU array but the data are host'):
        S.inclusive_sum(dev, x, y, N)
    with pytest.raises(TypeError, match="different sides"):
        S.inclusive_sum(temp, x, DeviceArray(1 << 20, (N,), (1,), ct.float32, 0), N)
    with pytest.raises(ValueError, match="writable C-contiguous"):
        S.inclusive_sum(temp[::2], x, y, N)
    assert launches.calls == [] and np.all(y == 7)


def test_policy_override_rebuilds_the_plan(launches):
    x, _ = _data()
    y = np.zeros(N, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    S.inclusive_sum(temp, x, y, N)
    S.inclusive_sum(temp, x, y, N)
    default = launches.calls[-1]
    with override_policy("scan", **SMALL):
        S.inclusive_sum(temp, x, y, N)
        small = launches.calls[-1]
    assert small[1] != default[1]                      # the small tiles: a larger grid
    S.inclusive_sum(temp, x, y, N)
    assert launches.calls[-1] == default


def test_cumsum_cached_path(counted, monkeypatch):
    x = RNG.integers(-50, 50, (40, 50)).astype(np.int16)
    f = RNG.integers(-50, 50, 3000).astype(np.float32)
    with override_policy("scan", **SMALL):
        for _ in range(3):
            got, excl = A.cumsum(x), A.cumsum(f, exclusive=True)
            assert got.dtype == np.int64 and got.shape == (2000,)
            np.testing.assert_array_equal(got, np.cumsum(x))
            np.testing.assert_array_equal(excl, _excl(np.cumsum(f)))
            np.testing.assert_array_equal(A.cumsum(f), np.cumsum(f))
        seen = dict(counted)
        general = []
        monkeypatch.setattr(SC, "_general", lambda *a: general.append(a))
        results = [A.cumsum(f) for _ in range(3)]
    assert general == [] and counted == seen
    assert len({id(r) for r in results}) == 3         # a new result each call
    for r in results:
        np.testing.assert_array_equal(r, np.cumsum(f))


# -- the launches on a stand-in GPU ---------------------------------------------------------------

class _Driver:
    """The compiled kernel's launcher: counts launches, runs nothing."""

    def __init__(self):
        self.launches = 0

    def launch(self, *args):
        self.launches += 1
        return 0

    def fail(self, err, grid):
        raise RuntimeError(err)


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """tilecore.launch's GPU path for DeviceArray arguments, with the compile
    and the driver replaced (one GPU, sm_90): what the launches' fast path
    does, counted. Fresh kernel objects and plans: nothing made here stays."""
    from tilecore.runtime.driver import has_gpu
    if has_gpu():
        pytest.skip("a real GPU: tests/algorithms/test_scan_gpu.py counts its launches")
    from tilecore.algorithms import hostpath as H, shared
    from tilecore.dispatch import target as T
    from tilecore.host import gpu as G, launch as HL
    from tilecore.ir.effects import written_params
    driver = _Driver()
    general = []

    class Loaded:
        launcher, fail = driver, driver.fail

        def launch(self, handle, grid, flat):
            driver.launch()

    def make_plan(kernel, key, args, ordinal):
        kinds, _ = G._kinds(kernel, key, args)
        written_at = written_params(kernel.ir_for(kinds))
        return G._Plan(Loaded(), (), frozenset(kernel.param_names[i] for i in written_at),
                       written_at)

    real = HL.launch_gpu
    monkeypatch.setattr(HL, "launch_gpu", lambda *a: (general.append(a[2]), real(*a)))
    monkeypatch.setattr(G, "_make_plan", make_plan)
    monkeypatch.setattr(G, "device_count", lambda: 1)
    monkeypatch.setattr(H, "_one_device", [True])
    monkeypatch.setitem(T._targets, 0, T.Target(90, 132, 0))
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")    # what a user operator's tile is fitted for
    for module, name in ((shared, "_kernels"), (SP, "_plans"), (SM, "_sigs")):
        monkeypatch.setattr(module, name, {})
    return driver, general


_next = [1 << 20]


def _device(n, dtype=ct.float32):
    """A DeviceArray at a new 256-byte aligned address (never dereferenced)."""
    ptr = _next[0]
    _next[0] += (n * dtype.itemsize // 256 + 2) * 256
    return DeviceArray(ptr, (n,), (1,), dtype, 0)


@pytest.mark.parametrize("n", [1 << 10, 1 << 16])
def test_repeated_scans_launch_fast(stand_in_gpu, n):
    """After the first call of each signature, no launch takes the general path:
    not when the signatures take turns on the shared kernel objects (more
    argument kinds than a kernel's own two fast-launch slots), not for a new
    d_out each call, not with a NumPy-scalar init (the fast launchers take it)."""
    driver, general = stand_in_gpu
    x, y, keys, temp = _device(n), _device(n), _device(n, ct.int32), _device(1 << 20, ct.uint8)
    calls = [lambda: S.inclusive_sum(temp, x, y, n), lambda: S.exclusive_sum(temp, x, y, n),
             lambda: S.inclusive_scan(temp, x, y, user_add, n),
             lambda: S.inclusive_scan_init(temp, x, y, "max", np.float32(1), n),
             lambda: S.exclusive_scan(temp, x, y, "add", np.float32(1), n),
             lambda: S.inclusive_sum(temp, y, y, n),
             lambda: S.inclusive_sum_by_key(temp, keys, x, y, n),
             lambda: S.exclusive_scan_by_key(temp, keys, x, y, "max", np.float32(0), n)]
    for call in calls:
        call()
    # one tile: one launch each; 2^16: one launch (scan_recompute) but in place (status
    # words cleared, then the single pass)
    assert driver.launches == (len(calls) if n <= 1 << 10 else len(calls) + 1)
    general.clear()
    driver.launches = 0
    for _ in range(3):
        for call in calls:
            call()
        S.inclusive_sum(temp, x, _device(n), n)                # a new d_out
    assert general == [], f"{len(general)} launches took the general path"
    assert driver.launches == 3 * (len(calls) + 1 + (0 if n <= 1 << 10 else 1))


def _bytes_of(a: DeviceArray, n: int) -> set:
    """Every byte address of a 1-d DeviceArray's first n elements (the reference)."""
    item = a.dtype.itemsize
    return {a.ptr + i * a.strides[0] * item + b for i in range(n) for b in range(item)}


def test_apart_agrees_with_the_byte_sets():
    """Lib.apart (the cached scan's overlap check of d_out) against the bytes the
    two arrays cover, enumerated: adjacent, interleaved, reversed (negative
    strides), partial-item and empty arrays; False when an array is shorter
    than the count or not 1-d."""
    from tilecore.algorithms.hostpath import lib_of
    lib = lib_of(DeviceArray(0, (1,), (1,), ct.float32, 0))
    base = 1 << 20
    shapes = [(0, 8, 1, ct.float32), (32, 8, 1, ct.float32), (28, 8, 1, ct.float32),
              (4, 8, 2, ct.float32), (60, 8, -1, ct.float32), (62, 4, 1, ct.int16),
              (30, 1, 1, ct.int16), (100, 0, 1, ct.float32), (0, 16, 2, ct.int8)]
    for off, n, stride, dt in shapes:
        a = DeviceArray(base + off, (n,), (stride,), dt, 0)
        for off2, n2, stride2, dt2 in shapes:
            b = DeviceArray(base + off2, (n2,), (stride2,), dt2, 0)
            want = not (_bytes_of(a, n) & _bytes_of(b, n2))
            assert lib.apart(a, b, min(n, n2)) is want, (a, b)
    a, b = _device(8), _device(8)
    assert lib.apart(a, b, 8) and not lib.apart(a, b, 9)
    assert not lib.apart(DeviceArray(1 << 30, (2, 4), (4, 1), ct.float32, 0), b, 1)
    np_lib = lib_of(np.zeros(1))
    buf = np.zeros(10, np.float32)
    assert np_lib.apart(buf[:5], buf[5:], 5) and not np_lib.apart(buf[:6], buf[5:], 5)
    assert not np_lib.apart(buf[:5], buf[5:], 6)
