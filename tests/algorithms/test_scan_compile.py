"""The scan kernels the GPU runs with the shipped sm_80/sm_90 policies
(full-size tiles of 1024 threads and the small inputs' tiles, every mode,
packed and wide status, 64-bit offsets from 2**31 items) compile under NVRTC
without spilling. Launches are captured instead of run, on contiguous arrays that
nothing touches (broadcast views only for 2**31 items: their stride 0 builds other
kernels)."""
import re

import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceScan as S
from tilecore.dispatch import override_policy


def captured(monkeypatch, method, *args):
    calls = []
    monkeypatch.setattr(ct, "launch", lambda stream, grid, kernel, a: calls.append((kernel, a)))
    nbytes = method(None, *args)
    method(np.zeros(nbytes, np.uint8), *args)
    return calls


def affine(p, q):
    return ((((p >> 16) * (q >> 16)) & 0xFFFF) << 16) | \
        (((q >> 16) * (p & 0xFFFF) + (q & 0xFFFF)) & 0xFFFF)


def add(a, b):
    total = a + b    # not one `return a + b`: a user operator, not recognized as "add"
    return total


def big(dtype, n=(1 << 24) + 1):
    """An array of n items (past the small-input tile) that nothing touches (the
    launches are captured, np.zeros maps its pages lazily): contiguous, so the
    kernels compiled are those a GPU call runs (a broadcast view's stride 0 gives
    others, without vector accesses)."""
    return np.zeros(n, dtype)


N = (1 << 24) + 1
CASES = {
    "incl-f32": lambda: (S.inclusive_sum, big(np.float32), big(np.float32), N),
    "excl-f32": lambda: (S.exclusive_sum, big(np.float32), big(np.float32), N),
    "incl-i32": lambda: (S.inclusive_sum, big(np.int32), big(np.int32), N),
    "excl-i32": lambda: (S.exclusive_sum, big(np.int32), big(np.int32), N),
    "excl-i32-small": lambda: (S.exclusive_sum, np.zeros(1 << 20, np.int32),
                               np.zeros(1 << 20, np.int32), 1 << 20),
    "max-f32": lambda: (S.inclusive_scan, big(np.float32), big(np.float32), "max", N),
    "incl-f64": lambda: (S.inclusive_sum, big(np.float64), big(np.float64), N),
    "excl-i64": lambda: (S.exclusive_sum, big(np.int64), big(np.int64), N),
    "user-u32": lambda: (S.inclusive_scan, big(np.uint32), big(np.uint32), affine, N),
    "user-f32": lambda: (S.inclusive_scan, big(np.float32), big(np.float32), add, N),
    "user-f64": lambda: (S.inclusive_scan, big(np.float64), big(np.float64), add, N),
    "excl-user-i64": lambda: (S.exclusive_scan, big(np.int64), big(np.int64), add,
                              np.int64(0), N),
    "bykey-f32": lambda: (S.exclusive_sum_by_key, big(np.int32), big(np.float32),
                          big(np.float32), N),
    "bykey-i32": lambda: (S.exclusive_sum_by_key, big(np.int32), big(np.int32), big(np.int32),
                          N),
}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(CASES))
def test_default_policy_kernels_compile(monkeypatch, arch, case):
    """(User operators: after the GPU's step-down from a spilling tile, `_fit`.)"""
    from tilecore.algorithms import scan_plan as SC
    monkeypatch.setenv("TILECORE_ARCH", arch)              # the interpreter takes arch's policy
    fits = SC._Plan.fits
    monkeypatch.setattr(SC._Plan, "fits", lambda self, host: fits(self, False))
    calls = captured(monkeypatch, *CASES[case]())
    assert len(calls) == 2                                  # status init, the single pass
    for kernel, args in calls:
        ck = ct.compile(kernel, args, arch=arch)
        assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


ONE = 1 << 16          # sm_90's one_launch_max_items (8192 for user operators by key)
ONE_LAUNCH = {
    "incl-f32": lambda: (S.inclusive_sum, big(np.float32, ONE), big(np.float32, ONE), ONE),
    "user-u32": lambda: (S.inclusive_scan, big(np.uint32, ONE), big(np.uint32, ONE), affine,
                         ONE),
    "bykey-excl-f32": lambda: (S.exclusive_sum_by_key, big(np.int32, ONE), big(np.float32, ONE),
                               big(np.float32, ONE), ONE),
    "bykey-incl-i32": lambda: (S.inclusive_sum_by_key, big(np.int32, ONE), big(np.int32, ONE),
                               big(np.int32, ONE), ONE),
    "bykey-max-f32": lambda: (S.inclusive_scan_by_key, big(np.int32, ONE), big(np.float32, ONE),
                              big(np.float32, ONE), "max", ONE),
    "bykey-excl-f64": lambda: (S.exclusive_sum_by_key, big(np.int32, ONE), big(np.float64, ONE),
                               big(np.float64, ONE), ONE),
    "bykey-user-u32": lambda: (S.exclusive_scan_by_key, big(np.int32, 8192),
                               big(np.uint32, 8192), big(np.uint32, 8192), affine,
                               np.uint32(1), 8192),
}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("case", list(ONE_LAUNCH))
def test_one_launch_kernels_compile(monkeypatch, case):
    """The largest inputs sm_90's table sends to scan_recompute (by key too) run
    in one launch whose kernel does not spill."""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    calls = captured(monkeypatch, *ONE_LAUNCH[case]())
    assert len(calls) == 1
    kernel, args = calls[0]
    ck = ct.compile(kernel, args, arch="sm_90")
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


@pytest.mark.interpreter_only
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("n", [N, (1 << 27) + 1])
def test_exclusive_user_scan_keeps_the_inclusive_tile(monkeypatch, dtype, n):
    """An exclusive user scan runs from unshifted tiles (ct.scan(exclusive=True):
    no (ok, value) pairs) on the user row's tile, the inclusive scan's (sm_90:
    int32 128 x 64, float32 128 x 32), and does not spill; reduce-then-scan, whose tiles are shifted,
    still takes at most 32 items a thread (int32: 256 x 32; float32's row has 32). Contiguous arrays (never
    touched: nothing runs), the kernels a GPU runs: broadcast views, stride 0,
    build other kernels (float32's at 2**24 spills 8 bytes there, NVRTC 13.5)."""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    x, y = np.zeros(n, dtype), np.zeros(n, dtype)
    tile = 128 * (64 if dtype == np.int32 else 32)
    tiles = {}
    for name, method, extra in (("incl", S.inclusive_scan, ()),
                                ("excl", S.exclusive_scan, (dtype(0),))):
        calls = captured(monkeypatch, method, x, y, add, *extra, n)
        kernel, args = calls[-1]
        ck = ct.compile(kernel, args, arch="sm_90")
        tiles[name] = (args[9], ck.block_threads)
        assert ck.stack_bytes == 0, name
        assert name == "incl" or f"tc::tile_scan<128, {tile}, 4, {tile}, false, true, true>(" \
            in ck.source
    assert tiles == {"incl": (tile, 128), "excl": (tile, 128)}
    with override_policy("scan", mode=1, exact_mode=1):
        calls = captured(monkeypatch, S.exclusive_scan, x, y, add, dtype(0), n)
    (partials, a_p), (downsweep, a_d) = calls
    shifted = 256 * 32 if dtype == np.int32 else 128 * 32
    assert (partials.pyfunc.__name__, a_p[6], downsweep.pyfunc.__name__, a_d[7]) == \
        ("scan_partials", shifted, "scan_downsweep", shifted)


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("op", [add, lambda a, b: ct.maximum(a, b)], ids=["add", "max"])
def test_user_fold_butterfly_keeps_its_rounds_in_registers(monkeypatch, arch, op):
    """A float32 user operator in mode 3 loading ahead on 128 x 64 tiles folds
    16 rounds a thread through the butterfly of tile_fold_chunks: choosing the
    round a lane sends as `up ? c[k] : c[k + half]` put the rounds in 64 bytes
    of local memory (a load from a selected address); select_words keeps them
    in registers, so the kernel has no stack (the GPU's _fit would otherwise
    step it down to 32 items a thread)."""
    monkeypatch.setenv("TILECORE_ARCH", arch)
    with override_policy("scan", block_threads=128, items_per_thread=64, load_ahead=1,
                         blocks_per_sm=2, small_items=0):
        calls = captured(monkeypatch, S.inclusive_scan, big(np.float32), big(np.float32), op,
                         N)
    kernel, args = calls[-1]
    compiled = ct.compile(kernel, args, arch=arch)
    assert compiled.name == "scan_groups" and args[9] == 128 * 64
    assert compiled.stack_bytes == 0


@pytest.mark.interpreter_only
@pytest.mark.parametrize("case", ["incl-f32", "excl-f32", "excl-i32", "bykey-f32"])
def test_fenwick_compiles(monkeypatch, case):
    """Mode 0 (the sweep's alternative) with the shipped tiles."""
    with override_policy("scan", mode=0, exact_mode=0):
        calls = captured(monkeypatch, *CASES[case]())
    kernel, args = calls[-1]
    assert ct.compile(kernel, args, arch="sm_90").stack_bytes == 0


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch, case", [
    (arch, case) for arch in ("sm_80", "sm_90")
    for case in ("excl-f32", "excl-i32", "excl-i64", "excl-i32-small")
    if (arch, case) != ("sm_80", "excl-i32")])
def test_exclusive_pairs_compile(monkeypatch, arch, case):
    """exclusive_pairs=1 (the sweep's alternative, off in the shipped tables) with
    the shipped tiles. (Known: sm_80's 512 x 32 int32 tile spills 8 bytes with
    it under NVRTC 13.5.)"""
    monkeypatch.setenv("TILECORE_ARCH", arch)
    with override_policy("scan", exclusive_pairs=1):
        calls = captured(monkeypatch, *CASES[case]())
    kernel, args = calls[-1]
    ck = ct.compile(kernel, args, arch=arch)
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


AHEAD_TILES = {"256x32": dict(block_threads=256, items_per_thread=32),
               "128x64": dict(block_threads=128, items_per_thread=64), "shipped": {}}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("case, tiles", [
    (case, tiles) for case in ("incl-i32", "excl-i32") for tiles in ("256x32", "128x64")] +
    [("excl-i64", "shipped"), ("bykey-i32", "shipped")])
def test_load_ahead_compiles(monkeypatch, case, tiles):
    """Mode 2 loading ahead (load_ahead=1, off in the shipped tables), which holds
    its next tile beside the one it scans, for sm_90: int32 sums on the tiles
    it was measured with, int64 and by key their shipped tiles: no spills. (With
    it the shipped int32 sum tile, 512 x 64, spills, as do min/max at 512 x 32
    and 64 items a thread of int64 or by key.)"""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    with override_policy("scan", load_ahead=1, small_items=0, exact_mode=2, **AHEAD_TILES[tiles]):
        calls = captured(monkeypatch, *CASES[case]())
    kernel, args = calls[-1]
    assert kernel.pyfunc.__name__ == "scan_lookback" and args[-1] is True      # PIPE
    ck = ct.compile(kernel, args, arch="sm_90")
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


@pytest.mark.interpreter_only
@pytest.mark.parametrize("case", ["incl-f64", "excl-i64", "user-f64", "excl-user-i64"])
def test_vector_width_compiles(monkeypatch, case):
    """vector_width=2 (the alternative for 8-byte values: 16-byte chunks beside the
    int32 status words, where the compiler's default makes them 32-byte) on sm_90's
    8-byte rows: the kernel takes the option, its tiles are laid out in 2-item
    chunks, and nothing spills."""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    with override_policy("scan", vector_width=2):
        calls = captured(monkeypatch, *CASES[case]())
    kernel, args = calls[-1]
    assert kernel.options.vector_width == 2
    ck = ct.compile(kernel, args, arch="sm_90")
    assert "tc::elem<2048, 64, 2>" in ck.source and "tc::elem<2048, 64, 4>" not in ck.source
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"
    calls = captured(monkeypatch, *CASES[case]())          # the shipped rows: 2 (int64's
    assert calls[-1][0].options.vector_width == 2           # inclusive user scans: 0)
    i64 = captured(monkeypatch, S.inclusive_scan, big(np.int64), big(np.int64), add, N)
    assert i64[-1][0].options.vector_width is None


@pytest.mark.interpreter_only
def test_reduce_then_scan_compiles(monkeypatch):
    with override_policy("scan", mode=1, block_threads=256, items_per_thread=32):   # the sweep's candidate
        calls = captured(monkeypatch, *CASES["excl-f32"]())
    assert len(calls) == 2                                  # partials, downsweep
    for kernel, args in calls:
        assert ct.compile(kernel, args, arch="sm_90").stack_bytes == 0


@pytest.mark.interpreter_only
def test_64bit_offsets_compile(monkeypatch):
    """2**31 + 5 items (broadcast views stand for the 2 GB arrays)."""
    n = (1 << 31) + 5
    x = np.broadcast_to(np.int8(1), (n,))
    y = np.broadcast_to(np.int8(0), (n,))
    calls = captured(monkeypatch, S.exclusive_sum, x, y, n)
    kernel, args = calls[-1]
    assert "long long" in ct.compile(kernel, args, arch="sm_90").source


@pytest.mark.interpreter_only
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_in_place_kernel_has_the_out_of_place_layout(monkeypatch, dtype):
    """In place the kernel reads d_out, with a stand-in of d_in's dtype in d_in's
    place: the same vector width, so the same tile layout and vector loads (and
    for floats the same association) as out of place."""
    n = (1 << 20) + 3
    x = np.zeros(n, dtype)
    sources = []
    for out in (np.zeros(n, dtype), x):
        kernel, args = captured(monkeypatch, S.inclusive_sum, x, out, n)[-1]
        sources.append(ct.compile(kernel, args, arch="sm_90").source)
    scans = [re.findall(r"tc::tile_scan<[^>]*>", s) for s in sources]
    vectors = [re.findall(r"tc::Vec<[^>]*>", s) for s in sources]
    assert scans[0] and scans[0] == scans[1]
    assert vectors[0] and set(vectors[0]) == set(vectors[1])   # (out of place, x's loads
                                                               # go through __ldg words)


@pytest.mark.interpreter_only
@pytest.mark.parametrize("method, extra, want_items", [
    (S.inclusive_scan, (), 32),                       # 64 spills 640 bytes
    (S.exclusive_scan, (np.uint32(1 << 16),), 32),    # capped at 32, which fits
])
def test_a_spilling_user_operator_steps_down_its_tile(monkeypatch, method, extra, want_items):
    """On a GPU a user operator's single-pass kernel is compiled once before its
    first launch and, while it spills, runs fewer items per thread (the size
    query covers the smallest step). Shown with NVRTC for sm_90 deciding and
    the interpreter running the chosen tile (fitting enabled for it here), the
    16-bit affine composition at a 512 x 64 policy."""
    from tilecore.algorithms import scan_plan as SC
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    fits = SC._Plan.fits
    monkeypatch.setattr(SC._Plan, "fits", lambda self, host: fits(self, False))
    launched, launch = [], ct.launch
    monkeypatch.setattr(ct, "launch", lambda *a: (launched.append(a[3]), launch(*a)))
    n = 3 * 512 * want_items + 5
    x = np.random.default_rng(3).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    y = np.zeros_like(x)
    with override_policy("scan", block_threads=512, items_per_thread=64, small_items=0,
                         one_launch_max_items=0, mode=3):
        nbytes = method(None, x, y, affine, *extra, n)
        plan = list(SC._plans.values())[-1]                # the plan this call made
        assert plan.kind == "user" and nbytes == plan.layout(n, SC.FIT_MIN_ITEMS)[0].size()
        method(np.zeros(nbytes, np.uint8), x, y, affine, *extra, n)
    assert launched[-1][9] == 512 * want_items            # TILE of the single-pass kernel
    acc, want = (int(extra[0]) if extra else None), []
    for v in x.tolist():
        if extra:
            want.append(acc)
        acc = v if acc is None else int(affine(np.uint32(acc), np.uint32(v)))
        if not extra:
            want.append(acc)
    np.testing.assert_array_equal(y, np.array(want, np.uint32))


@pytest.mark.interpreter_only
@pytest.mark.parametrize("case, policy", [
    ("incl-i32", {}), ("incl-f32", {}), ("excl-f32", {}), ("incl-f64", {}),
    ("incl-i32", {"load_ahead": 0}), ("incl-f32", {"mode": 0, "exact_mode": 0})])
def test_single_pass_scan_waits_for_scan_init(monkeypatch, case, policy):
    """scan_init lets the single-pass scan start at once (launch_dependents) and
    the scan is launched for early start: before it waits for scan_init, it only
    prefetches its first tile (load-ahead) or does nothing (the other kernels
    wait at their first statement); a status word read before the wait could
    see the last call's flags."""
    monkeypatch.setenv("TILECORE_ARCH", "sm_90")
    with override_policy("scan", **policy):
        calls = captured(monkeypatch, *CASES[case]())
    (init, init_args), (scan, scan_args) = calls[-2:]
    assert init.pyfunc.__name__.startswith("scan_init")
    assert "tc::launch_dependent_grids();" in ct.compile(init, init_args, arch="sm_90").source
    assert scan.options.early_start
    body = ct.compile(scan, scan_args, arch="sm_90").source.split('extern "C"')[1]
    before = body[:body.index("tc::wait_for_prior_grid();")]
    assert not re.search(r"tc::(atom|ld_|st_)|reinterpret_cast|\barg\d+\[", before)
    pipe = scan_args[-1] is True
    assert ("tc::prefetch_l2_bulk" in before) == pipe
    assert pipe or before.rstrip().endswith(") {")     # the first statement
