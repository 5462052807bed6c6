"""CUDA code for scan and fold: what the generated C++ does (a last-axis scan
stays in registers, other axes go through shared memory, a scan in a loop
waits before its partials are rewritten), every dtype and shape compiling for
sm_80 and sm_90, tc::tile_scan itself checked on the CPU (the header compiled
by the host compiler, threads emulated), and on the GPU against NumPy."""
import math
import shutil
import subprocess
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct

ARCHS = ("sm_80", "sm_90")
INCLUDE = Path(ct.__file__).parent / "backend" / "cuda" / "include"
RNG = np.random.default_rng(2014)


def affine(a1, b1, a2, b2):
    """Composition of x -> a1 x + b1 and x -> a2 x + b2: associative, not commutative."""
    return a1 * a2, a2 * b1 + b2


@ct.kernel
def cumsum_1d(x, y, T: ct.Constant[int], REV: ct.Constant[bool]):
    t = ct.load(x, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (ct.bid(0),), ct.cumsum(t, reverse=REV))


@ct.kernel
def affine_2d(a, b, oa, ob, M: ct.Constant[int], N: ct.Constant[int], AX: ct.Constant[int],
              REV: ct.Constant[bool]):
    ta = ct.load(a, (ct.bid(0), 0), (M, N))
    tb = ct.load(b, (ct.bid(0), 0), (M, N))
    ra, rb = ct.scan((ta, tb), AX, affine, (1, 0), reverse=REV)
    ct.store(oa, (ct.bid(0), 0), ra)
    ct.store(ob, (ct.bid(0), 0), rb)


@ct.kernel
def fold_2d(a, b, oa, ob, M: ct.Constant[int], N: ct.Constant[int], AX: ct.Constant[int]):
    ta = ct.load(a, (ct.bid(0), 0), (M, N))
    tb = ct.load(b, (ct.bid(0), 0), (M, N))
    ra, rb = ct.reduce((ta, tb), AX, affine, (1, 0), keepdims=True)
    ct.store(oa, (ct.bid(0), 0), ra)
    ct.store(ob, (ct.bid(0), 0), rb)


@ct.kernel
def scan_in_loop(x, y, n):
    acc = ct.zeros((256,), ct.float32)
    for i in range(n):
        acc = acc + ct.cumsum(ct.load(x, (i,), (256,)))
    ct.store(y, (0,), acc)


@ct.kernel
def fold_in_loop(a, b, oa, ob, n, T: ct.Constant[int]):
    """The composition of n tiles of T affine maps, each tile folded whole."""
    ra = ct.full((1,), 1, ct.int32)
    rb = ct.zeros((1,), ct.int32)
    for i in range(n):
        fa, fb = ct.reduce((ct.load(a, (i,), (T,)), ct.load(b, (i,), (T,))), 0, affine, (1, 0),
                           keepdims=True)
        ra, rb = affine(ra, rb, fa, fb)
    ct.store(oa, (0,), ra)
    ct.store(ob, (0,), rb)


@ct.kernel
def fold_once(a, b, oa, ob, T: ct.Constant[int]):
    """One tile of T affine maps folded whole, outside any loop."""
    fa, fb = ct.reduce((ct.load(a, (0,), (T,)), ct.load(b, (0,), (T,))), 0, affine, (1, 0),
                       keepdims=True)
    ct.store(oa, (0,), fa)
    ct.store(ob, (0,), fb)


@ct.kernel
def copy_only(x, y):
    ct.store(y, (0,), ct.load(x, (0,), (256,)))


def _source(kernel, args, arch="sm_90"):
    return ct.compile(kernel, args, arch=arch).source


def test_last_axis_scan_stays_in_registers():
    x = np.zeros(4096, np.float32)
    src = _source(cumsum_1d, (x, x.copy(), 4096, False))
    assert '#include "tilecore/scan.cuh"' in src
    assert "tc::tile_scan<512, 4096, 4, 4096, false, false>" in src
    assert "tc_smem" not in src   # the layout is scanned in place: no staging


def test_other_axis_is_staged_and_reverse_reaches_the_header():
    a = np.zeros((64, 8), np.int32)
    src = _source(affine_2d, (a, a, a.copy(), a.copy(), 64, 8, 0, True))
    assert "tc_smem" in src and ", true, false>(" in src


def test_scan_in_a_loop_waits_before_reuse():
    x = np.zeros(1024, np.float32)
    assert ", false, true>(" in _source(scan_in_loop, (x, x[:256].copy(), 4))


# fewer items than threads (2: tile_fold_small's layout), one warp of one
# item each (32), one warp's 2 rounds (256), 4 warps' 2 rounds (1024: 8 totals, every
# thread folds them), 16 warps' 4 rounds (8192: 64 totals, 2 a lane)
FOLD_TILES = [2, 32, 256, 1024, 8192]


@pytest.mark.parametrize("tile", FOLD_TILES)
def test_whole_tile_fold_reaches_every_thread_without_a_broadcast(tile):
    """A fold of a whole tile of whole chunks a thread to one value leaves it in
    every thread (tc::tile_allfold, the barriers of a built-in reduction); in a
    loop its call site waits before its shared totals are rewritten. Outside a
    loop a tile of fewer items than threads keeps tile_fold and its broadcast
    (rules_scan._folds_to_every_thread)."""
    a = np.zeros(4 * tile, np.int32)
    src = _source(fold_in_loop, (a, a, a[:1].copy(), a[:1].copy(), 4, tile))
    assert "tc::tile_allfold<" in src and ", true>(" in src and "tc::tile_fold<" not in src
    once = _source(fold_once, (a, a, a[:1].copy(), a[:1].copy(), tile))
    if tile == 2:
        assert "tc::tile_fold<32, 2, 1, 2>" in once and "tc::tile_allfold<" not in once
    else:
        assert "tc::tile_allfold<" in once and ", false>(" in once


def test_folds_of_several_segments_keep_their_broadcast():
    a = np.zeros((4, 1024), np.int32)
    src = _source(fold_2d, (a, a, a[:, :1].copy(), a[:, :1].copy(), 4, 1024, 1))
    assert "tc::tile_fold<" in src and "tc::tile_allfold<" not in src


def _fold_in_loop(xp, to_host, tile):
    n = 5
    a = RNG.integers(-3, 4, n * tile).astype(np.int32)
    b = RNG.integers(-1000, 1000, n * tile).astype(np.int32)
    oa, ob = xp.zeros(1, np.int32), xp.zeros(1, np.int32)
    ct.launch(None, (1,), fold_in_loop, (xp.asarray(a), xp.asarray(b), oa, ob, n, tile))
    ea, eb = _affine_ref(a[None], b[None], 1, False)
    np.testing.assert_array_equal(to_host(oa), ea[0, -1:])
    np.testing.assert_array_equal(to_host(ob), eb[0, -1:])


@pytest.mark.parametrize("tile", FOLD_TILES)
def test_whole_tile_folds_in_a_loop(tile):
    _fold_in_loop(np, np.asarray, tile)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", FOLD_TILES)
def test_gpu_whole_tile_folds_in_a_loop(tile):
    cp = pytest.importorskip("cupy")
    _fold_in_loop(cp, cp.asnumpy, tile)


def test_no_scan_header_without_scans():
    x = np.zeros(256, np.float32)
    assert "scan.cuh" not in _source(copy_only, (x, x.copy()))


@ct.kernel
def every_dtype(x, y, z, T: ct.Constant[int]):
    t = ct.load(x, (0,), (T,))
    ct.store(y, (0,), ct.cumsum(t, reverse=True) + ct.cumprod(t))
    ct.store(z, (0,), ct.scan(t, 0, ct.maximum, 0))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                   np.int8, np.uint16, np.int32, np.uint64, np.int64])
@pytest.mark.parametrize("tile", [16, 1024])
def test_every_dtype_compiles(dtype, tile):
    x = np.zeros(tile, dtype)
    for arch in ARCHS:
        ct.compile(every_dtype, (x, x.copy(), x.copy(), tile), arch=arch)


@pytest.mark.parametrize("shape, axis", [((4, 256), 1), ((256, 4), 0), ((2, 4096), 1),
                                         ((32, 32), 0), ((1, 8192), 1), ((8, 2), 1)])
def test_shapes_compile(shape, axis):
    a = np.zeros(shape, np.int32)
    for arch in ARCHS:
        ct.compile(affine_2d, (a, a, a.copy(), a.copy(), *shape, axis, False), arch=arch)
        out = np.zeros(tuple(1 if i == axis else s for i, s in enumerate(shape)), np.int32)
        ct.compile(fold_2d, (a, a, out, out.copy(), *shape, axis), arch=arch)


# --- tc::tile_scan on the CPU --------------------------------------------------------------------
_EMULATION = r"""
// tc::tile_scan compiled by the host compiler: NT std::threads, a barrier for
// __syncthreads and around every shuffle (tile_scan calls them uniformly).
#include <barrier>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
struct Dim { int x; };
thread_local Dim threadIdx;
static std::barrier<>* g_bar;
static std::vector<unsigned>* g_buf;
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
inline void __syncthreads() { g_bar->arrive_and_wait(); }
template <class Pick> unsigned exch(unsigned v, Pick pick) {
  (*g_buf)[threadIdx.x] = v;
  g_bar->arrive_and_wait();
  const int lane = threadIdx.x & 31;
  const unsigned r = (*g_buf)[threadIdx.x - lane + pick(lane)];
  g_bar->arrive_and_wait();
  return r;
}
unsigned __shfl_up_sync(unsigned, unsigned v, unsigned d) {
  return exch(v, [&](int l) { return l >= (int)d ? l - (int)d : l; });
}
unsigned __shfl_down_sync(unsigned, unsigned v, unsigned d) {
  return exch(v, [&](int l) { return l + (int)d < 32 ? l + (int)d : l; });
}
unsigned __shfl_sync(unsigned, unsigned v, int s) { return exch(v, [&](int) { return s & 31; }); }
#include "tilecore/scan.cuh"

// Digit strings (value, 10**length) under concatenation: associative, not commutative.
struct A { unsigned long long v, p; };
static A cat(const A& l, const A& r) { return A{l.v * r.p + r.v, l.p * r.p}; }

// N digits, and NT threads running body(t) as one block (barrier, shuffles).
std::vector<A> digits(int n) {
  std::vector<A> x(n);
  for (int i = 0; i < n; ++i) x[i] = A{(unsigned long long)(i * 7 + 3) % 10, 10};
  return x;
}

template <class Body>
void block(int nt, Body body) {
  std::barrier<> bar(nt);
  std::vector<unsigned> buf(nt);
  g_bar = &bar;
  g_buf = &buf;
  std::vector<std::thread> threads;
  for (int t = 0; t < nt; ++t) threads.emplace_back([&, t] {
    threadIdx.x = t;
    body(t);
  });
  for (auto& th : threads) th.join();
}

// EXCL: the exclusive scan, seeded with a value that is no identity of cat (never combined).
template <int NT, int N, int V, int L, bool REV, bool EXCL>
int run() {
  const A seed{5, 100};
  constexpr int P = N / NT > 1 ? N / NT : 1;
  const std::vector<A> x = digits(N);
  std::vector<A> out(N);
  block(NT, [&](int t) {
    A y[P];
    for (int k = 0; k < P; ++k) {  // core.cuh's elem(): chunks of V dealt round robin
      const int e = ((k / V) * NT + t) * V + k % V;
      y[k] = e < N ? x[e] : A{999, 7};  // threads past a small tile hold garbage
    }
    if constexpr (EXCL) {
      tc::tile_scan<NT, N, V, L, REV, true, true>(y, cat, seed);
    } else {
      tc::tile_scan<NT, N, V, L, REV, true>(y, cat);
    }
    for (int k = 0; k < P; ++k) {
      const int e = ((k / V) * NT + t) * V + k % V;
      if (e < N) out[e] = y[k];
    }
  });
  int bad = 0;
  for (int s = 0; s < N / L; ++s) {
    A acc{};
    for (int i = 0; i < L; ++i) {
      const int e = s * L + (REV ? L - 1 - i : i);
      const A before = i == 0 ? seed : acc;
      acc = i == 0 ? x[e] : cat(acc, x[e]);
      const A& want = EXCL ? before : acc;
      bad += out[e].v != want.v || out[e].p != want.p;
    }
  }
  if (bad) printf("NT=%d N=%d V=%d L=%d REV=%d EXCL=%d: %d wrong\n", NT, N, V, L, (int)REV,
                  (int)EXCL, bad);
  return bad != 0;
}

// tc::tile_fold: each segment's total, against the sequential fold.
template <int NT, int N, int V, int L>
int run_fold() {
  constexpr int P = N / NT > 1 ? N / NT : 1;
  const std::vector<A> x = digits(N);
  std::vector<A> out(N / L, A{0, 0});
  std::vector<int> puts(N / L, 0);
  block(NT, [&](int t) {
    A y[P];
    for (int k = 0; k < P; ++k) {
      const int e = ((k / V) * NT + t) * V + k % V;
      y[k] = e < N ? x[e] : A{999, 7};  // threads past a small tile hold garbage
    }
    for (int again = 0; again < 2; ++again) {  // twice: the shared totals are reused
      tc::tile_fold<NT, N, V, L>(y, cat, [&](int s, const A& v) {
        out[s] = v;
        __atomic_add_fetch(&puts[s], 1, __ATOMIC_RELAXED);
      });
      __syncthreads();
    }
  });
  int bad = 0;
  for (int s = 0; s < N / L; ++s) {
    A acc = x[s * L];
    for (int i = 1; i < L; ++i) acc = cat(acc, x[s * L + i]);
    bad += out[s].v != acc.v || out[s].p != acc.p || puts[s] != 2;
  }
  if (bad) printf("fold NT=%d N=%d V=%d L=%d: %d wrong\n", NT, N, V, L, bad);
  return bad != 0;
}

// tc::tile_allfold: the whole tile's fold in every thread, twice from one call site (its
// shared totals reused), against the sequential fold.
template <int NT, int N, int V>
int run_allfold() {
  constexpr int P = N / NT > 1 ? N / NT : 1;
  const std::vector<A> x = digits(N);
  std::vector<A> out(2 * NT, A{0, 0});
  block(NT, [&](int t) {
    A y[P];
    for (int k = 0; k < P; ++k) {
      const int e = ((k / V) * NT + t) * V + k % V;
      y[k] = e < N ? x[e] : A{999, 7};  // threads past a small tile hold garbage
    }
    for (int again = 0; again < 2; ++again) {
      out[again * NT + t] = tc::tile_allfold<NT, N, V, 0, true>(y, cat);
      y[0] = again == 0 && t == 0 ? A{5, 10} : y[0];  // the second fold sees a new first item
    }
  });
  int bad = 0;
  for (int again = 0; again < 2; ++again) {
    A acc = again == 0 ? x[0] : A{5, 10};
    for (int i = 1; i < N; ++i) acc = cat(acc, x[i]);
    for (int t = 0; t < NT; ++t) bad += out[again * NT + t].v != acc.v || out[again * NT + t].p != acc.p;
  }
  if (bad) printf("allfold NT=%d N=%d V=%d: %d wrong\n", NT, N, V, bad);
  return bad != 0;
}

// tc::tile_fold_sequential: a whole small tile, left to right; lane i's element
// is x[i] - i so the fold of (a - b) tells any other association apart.
template <int NT, int N>
int run_fold_sequential() {
  struct I { long v; };
  const auto sub = [](const I& a, const I& b) { return I{a.v * 3 - b.v}; };
  I out{0};
  int puts = 0;
  block(NT, [&](int t) {
    I y[1] = {t < N ? I{(long)(t * 7 % 11) - t} : I{999}};
    tc::tile_fold_sequential<N>(y, sub, [&](int, const I& v) {
      out = v;
      __atomic_add_fetch(&puts, 1, __ATOMIC_RELAXED);
    });
    __syncthreads();
  });
  I acc{(long)0};
  for (int i = 1; i < N; ++i) acc = sub(acc, I{(long)(i * 7 % 11) - i});
  const int bad = out.v != acc.v || puts != 1;
  if (bad) printf("sequential fold NT=%d N=%d: %ld, want %ld\n", NT, N, out.v, acc.v);
  return bad;
}

#define BOTH(NT, N, V, L) fails += run<NT, N, V, L, false, false>() + \
    run<NT, N, V, L, true, false>() + run<NT, N, V, L, false, true>() + run<NT, N, V, L, true, true>();
int main() {
  int fails = 0;
  BOTH(32, 8, 1, 8)          // fewer elements than threads
  BOTH(64, 16, 1, 4)         // ... in groups of 4 threads
  BOTH(128, 64, 1, 64)       // ... a segment over 2 warps, 2 warps idle
  BOTH(512, 128, 1, 128)
  BOTH(32, 256, 4, 256)      // one warp, segments over 2 rounds
  BOTH(32, 256, 4, 64)       // 16-thread groups
  BOTH(32, 256, 4, 2)        // segments inside chunks
  BOTH(32, 256, 4, 4)        // a segment per chunk
  BOTH(128, 1024, 4, 1024)   // 4 warps, 2 rounds
  BOTH(128, 1024, 4, 256)    // groups of 2 warps
  BOTH(128, 1024, 4, 16)
  BOTH(512, 4096, 4, 4096)   // the benchmark's shape
  BOTH(256, 8192, 8, 4096)   // 4 rounds, 2 per segment
  BOTH(256, 8192, 8, 8)
  BOTH(1024, 1024, 1, 1024)  // 32 warps
  BOTH(1024, 8192, 8, 2048)
  fails += run_fold<32, 32, 1, 32>();       // one warp, one element each
  fails += run_fold<32, 256, 4, 64>();      // 16-lane groups, 2 rounds
  fails += run_fold<32, 256, 4, 256>();     // a segment over 2 rounds of one warp
  fails += run_fold<128, 1024, 4, 1024>();  // 4 warps, 2 rounds
  fails += run_fold<128, 1024, 4, 256>();   // segments of 2 warps
  fails += run_fold<128, 1024, 4, 16>();    // 4-lane groups
  fails += run_fold<256, 2048, 4, 2048>();  // arg_reduce's end of block
  fails += run_fold<256, 4096, 4, 4096>();  // DeviceReduce's end of block (4 rounds)
  fails += run_fold<256, 8192, 8, 4096>();  // 4 rounds, 2 per segment
  fails += run_fold<64, 8192, 4, 8192>();    // a warp folds the totals, 2 a lane
  fails += run_fold<32, 4096, 4, 4096>();    // ... one a lane (a single warp's 32 rounds)
  fails += run_fold<128, 8192, 4, 4096>();   // 2 segments, a warp each
  fails += run_fold<1024, 8192, 8, 2048>();
  fails += run_fold<64, 64, 1, 2>();        // pairs of lanes
  fails += run_fold<32, 8, 1, 8>();         // fewer elements than threads: part of a warp
  fails += run_fold<512, 32, 1, 32>();      // a window of status words: one warp busy
  fails += run_fold<1024, 16, 1, 16>();
  fails += run_fold<512, 256, 1, 256>();    // a group's words: 8 warps busy
  fails += run_fold<128, 64, 1, 64>();      // 2 warps, 2 idle
  fails += run_allfold<32, 32, 1>();        // one warp, one round
  fails += run_allfold<32, 256, 4>();       // one warp, 2 rounds (the butterfly)
  fails += run_allfold<128, 1024, 4>();     // 4 warps, 2 rounds: 8 totals, every thread
  fails += run_allfold<128, 8192, 4>();     // DeviceScan's 128 x 64: 64 totals, 2 a lane
  fails += run_allfold<256, 8192, 4>();     // 256 x 32: 64 totals
  fails += run_allfold<64, 8192, 4>();      // 32 rounds of 2 warps: 64 totals
  fails += run_allfold<96, 384, 4>();       // 3 warps, one round: 3 totals
  fails += run_allfold<128, 512, 1>();      // one item a round: 4 rounds, 16 totals
  fails += run_allfold<32, 8, 1>();         // fewer elements than threads: part of a warp
  fails += run_allfold<512, 32, 1>();       // a window of status words: one warp busy
  fails += run_allfold<512, 256, 1>();      // a group's words: 8 warps busy
  fails += run_allfold<128, 64, 1>();       // 2 warps, 2 idle
  fails += run_fold_sequential<32, 32>();   // the ordered look-back's window: a whole warp
  fails += run_fold_sequential<512, 16>();  // half a warp of 16 warps
  fails += run_fold_sequential<64, 2>();
  printf("%d failures\n", fails);
  return fails != 0;
}
"""


@pytest.mark.interpreter_only
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20)")
def test_tile_scan_on_the_cpu(tmp_path):
    """The scan and fold algorithms of scan.cuh over every kind of segment (within
    a chunk, a group of lanes, of warps, whole rounds), scans forward and reverse,
    inclusive and exclusive,
    against a sequential scan and fold of a non-commutative operation."""
    src = tmp_path / "emulate.cpp"
    src.write_text(textwrap.dedent(_EMULATION))
    exe = tmp_path / "emulate"
    build = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-w", f"-I{INCLUDE}",
                            "-o", str(exe), str(src)], capture_output=True, text=True)
    if build.returncode and "barrier" in build.stderr:
        # the emulation needs a C++20 host compiler; the GPU tests check the real thing
        pytest.skip("the host compiler has no <barrier> (C++20)")
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "0 failures", run.stdout[-3000:]


# --- on the GPU -----------------------------------------------------------------------------------
def _affine_ref(a, b, axis, reverse):
    """Sequential composition along `axis`, int32 wrapping (through int64)."""
    a, b = np.moveaxis(a, axis, -1).astype(np.int64), np.moveaxis(b, axis, -1).astype(np.int64)
    ra, rb = np.empty_like(a), np.empty_like(b)
    idx = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    acc = None
    for i in idx:
        cur = (a[..., i], b[..., i])
        acc = cur if acc is None else tuple(v.astype(np.int32).astype(np.int64)
                                            for v in affine(*acc, *cur))
        ra[..., i], rb[..., i] = acc
    return (np.moveaxis(ra, -1, axis).astype(np.int32), np.moveaxis(rb, -1, axis).astype(np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [1024, 4096, 8192])
@pytest.mark.parametrize("reverse", [False, True])
def test_gpu_cumsum_many_blocks(tile, reverse):
    cp = pytest.importorskip("cupy")
    n = 200 * tile - 17
    x = RNG.uniform(-1, 1, n).astype(np.float32)
    y = cp.zeros(n, cp.float32)
    ct.launch(None, (ct.cdiv(n, tile),), cumsum_1d, (cp.asarray(x), y, tile, reverse))
    got = cp.asnumpy(y)
    rows = np.zeros(ct.cdiv(n, tile) * tile)
    rows[:n] = x
    rows = rows.reshape(-1, tile)
    if reverse:
        ref, mag = (np.cumsum(r[:, ::-1], 1)[:, ::-1] for r in (rows, np.abs(rows)))
    else:
        ref, mag = np.cumsum(rows, 1), np.cumsum(np.abs(rows), 1)
    depth = 2 * math.log2(tile) + 8   # any association the layout allows: far below this
    bound = depth * 2.0 ** -24 * mag
    assert np.all(np.abs(got - ref.ravel()[:n]) <= bound.ravel()[:n])


@pytest.mark.gpu
@pytest.mark.parametrize("shape, axis", [((1, 8192), 1), ((4, 1024), 1), ((256, 4), 0),
                                         ((32, 32), 0), ((8, 2), 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_gpu_noncommutative_scan_and_fold(shape, axis, reverse):
    cp = pytest.importorskip("cupy")
    blocks = 3
    a = RNG.integers(-3, 4, (blocks * shape[0], shape[1])).astype(np.int32)
    b = RNG.integers(-1000, 1000, a.shape).astype(np.int32)
    oa, ob = cp.zeros(a.shape, cp.int32), cp.zeros(a.shape, cp.int32)
    ct.launch(None, (blocks,), affine_2d, (cp.asarray(a), cp.asarray(b), oa, ob, *shape, axis,
                                          reverse))
    red = (blocks * shape[0] if axis == 1 else blocks, 1 if axis == 1 else shape[1])
    fa, fb = cp.zeros(red, cp.int32), cp.zeros(red, cp.int32)
    ct.launch(None, (blocks,), fold_2d, (cp.asarray(a), cp.asarray(b), fa, fb, *shape, axis))
    for k in range(blocks):
        rows = slice(k * shape[0], (k + 1) * shape[0])
        ea, eb = _affine_ref(a[rows], b[rows], axis, reverse)
        np.testing.assert_array_equal(cp.asnumpy(oa)[rows], ea)
        np.testing.assert_array_equal(cp.asnumpy(ob)[rows], eb)
        ea, eb = _affine_ref(a[rows], b[rows], axis, False)
        last = [np.take(v, [shape[axis] - 1], axis) for v in (ea, eb)]
        got = [cp.asnumpy(v)[rows] if axis == 1 else cp.asnumpy(v)[k:k + 1] for v in (fa, fb)]
        np.testing.assert_array_equal(got[0], last[0])
        np.testing.assert_array_equal(got[1], last[1])


@pytest.mark.gpu
def test_gpu_scan_in_a_loop():
    cp = pytest.importorskip("cupy")
    x = RNG.integers(-5, 5, 8 * 256).astype(np.float32)
    y = cp.zeros(256, cp.float32)
    ct.launch(None, (1,), scan_in_loop, (cp.asarray(x), y, 8))
    np.testing.assert_array_equal(cp.asnumpy(y), np.cumsum(x.reshape(8, 256), 1).sum(0))


@ct.kernel
def fold_scan_any_identity(a, b, oa, ob, sa, sb, N: ct.Constant[int]):
    """(5, 3) is not affine's identity (1, 0): tilecore's fold and scan combine
    items only, so a user operator without an identity (DeviceScan's) can pass
    any value for a tile whose every lane is an item."""
    ta = ct.load(a, (0,), (N,))
    tb = ct.load(b, (0,), (N,))
    ra, rb = ct.reduce((ta, tb), 0, affine, (5, 3), keepdims=True)
    ct.store(oa, (0,), ra)
    ct.store(ob, (0,), rb)
    qa, qb = ct.scan((ta, tb), 0, affine, (5, 3))
    ct.store(sa, (0,), qa)
    ct.store(sb, (0,), qb)


def _any_identity(xp, to_host, n):
    a = RNG.integers(-3, 4, n).astype(np.int32)
    b = RNG.integers(-1000, 1000, n).astype(np.int32)
    outs = [xp.zeros(m, np.int32) for m in (1, 1, n, n)]
    ct.launch(None, (1,), fold_scan_any_identity, (xp.asarray(a), xp.asarray(b), *outs, n))
    ea, eb = _affine_ref(a[None], b[None], 1, False)
    for got, want in zip(outs, (ea[0, -1:], eb[0, -1:], ea[0], eb[0])):
        np.testing.assert_array_equal(to_host(got), want)


@pytest.mark.parametrize("n", [1, 2, 64, 1024])
def test_fold_and_scan_never_use_the_identity(n):
    _any_identity(np, np.asarray, n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 32, 1024, 8192])
def test_gpu_fold_and_scan_never_use_the_identity(n):
    cp = pytest.importorskip("cupy")
    _any_identity(cp, cp.asnumpy, n)
