// Scans inside a tile (included only by kernels that scan or fold with a
// combining function): tile_scan and the warp shuffles it is built from.
#pragma once

namespace tc {

// Shuffles of any trivially copyable value, 32 bits at a time. KIND: 0 up
// (from lane - d), 1 down (from lane + d), 2 index (from lane d).
template <int KIND, class A>
__device__ __forceinline__ A shfl_any(const A& x, int d) {
  constexpr int W = (int)((sizeof(A) + 3) / 4);
  unsigned int w[W] = {};
  memcpy(w, &x, sizeof(A));
#pragma unroll
  for (int i = 0; i < W; ++i) {
    if constexpr (KIND == 0) w[i] = __shfl_up_sync(0xffffffffu, w[i], (unsigned)d);
    else if constexpr (KIND == 1) w[i] = __shfl_down_sync(0xffffffffu, w[i], (unsigned)d);
    else w[i] = __shfl_sync(0xffffffffu, w[i], d);
  }
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}

// p ? a : b for any trivially copyable value, selected a 32-bit word at a time in
// registers: a plain `p ? c[i] : c[j]` between two elements of a register array may
// become a load from a selected address, which sends the whole array to local memory.
template <class A>
__device__ __forceinline__ A select_words(bool p, const A& a, const A& b) {
  constexpr int W = (int)((sizeof(A) + 3) / 4);
  unsigned int wa[W] = {}, wb[W] = {};
  memcpy(wa, &a, sizeof(A));
  memcpy(wb, &b, sizeof(A));
#pragma unroll
  for (int i = 0; i < W; ++i) {
#if defined(__CUDA_ARCH__)
    asm("{ .reg .pred q; setp.ne.b32 q, %3, 0; selp.b32 %0, %1, %2, q; }"
        : "=r"(wa[i]) : "r"(wa[i]), "r"(wb[i]), "r"((int)p));
#else  // the host build of these templates (tests/backend/test_scan_codegen.py)
    wa[i] = p ? wa[i] : wb[i];
#endif
  }
  A r;
  memcpy(&r, wa, sizeof(A));
  return r;
}

// An in-order shuffle-down tree over lanes: for d = D0, 2 D0, ... < W, lane i takes
// lane i + d's value as its right operand where i's bits from D0 up to 2d are clear,
// so lane i (i's bits from D0 up to W clear) ends with the fold of lanes i, i + D0, ...
// (D0 = 1: every lane of its group of W). Every lane runs the shuffles. Values of
// more than one word are combined by every lane: a lane whose bits are not clear only
// feeds lanes that are not read again, and a combine under the branch cost a divergent
// branch around every level (ptxas predicates only the smallest combines; a decoupled
// look-back's (flags, value) fold ran 4.6% faster without). One-word values keep the
// branch, which ptxas predicates: combining them everywhere made the 512-thread float
// user scan spill (RESULTS.md, nineteenth session).
template <int D0, int W, class A, class F>
__device__ __forceinline__ A fold_down(A x, F f, int lane) {
#pragma unroll
  for (int d = D0; d < W; d <<= 1) {
    const A o = shfl_any<1>(x, d);
    if constexpr (sizeof(A) <= 4) {
      if ((lane & (2 * d - 1)) < D0) x = f(x, o);
    } else {
      x = f(x, o);
    }
  }
  return x;
}

// x's combine with the earlier value o where `take`, else x. Values of up to two
// words are combined by every lane and selected, not branched around (as in
// fold_down); wider ones (by-key triples) keep the branch: computed everywhere, the
// 256-thread by-key float scan spilled on sm_80 (ptxas settled on 128 registers).
template <class A, class F>
__device__ __forceinline__ A combine_if(bool take, const A& o, const A& x, F f) {
  if constexpr (sizeof(A) <= 8) {
    const A c = f(o, x);
    return take ? c : x;
  } else {
    return take ? f(o, x) : x;
  }
}

// The value d lanes earlier in scan order (REV: the lane d above).
template <bool REV, class A>
__device__ __forceinline__ A shfl_earlier(const A& x, int d) {
  return shfl_any<REV ? 1 : 0>(x, d);
}

// In place in y, the inclusive scan of a tile along segments of L consecutive
// (row-major) elements: y holds this thread's P elements of the register
// layout of an N-element tile over NT threads in chunks of V (core.cuh,
// elem()). Round r of the layout is every thread's chunk r, elements
// [r*NT*V, (r+1)*NT*V): so a segment is part of a chunk (L <= V), G = L/V
// consecutive threads of one round, or L/(NT*V) whole rounds. REV scans each
// segment from its end. f(a, b) combines a (the earlier elements in scan
// order) with b: it must be associative, not commutative, and no identity is
// used: elements without a predecessor are left as they are. EXCL: each element
// gets the fold of its predecessors instead, and those without any get id
// (never combined): the scan of CUB's exclusive scans, with no identity needed.
//   1. each thread scans its chunks in order (registers);
//   2. the threads of a segment scan their chunk totals with warp shuffles
//      (Kogge-Stone), and across warps through the warps' totals in shared
//      memory (one barrier; REUSED: a second one, in a loop, before they
//      are rewritten);
//   3. segments spanning rounds carry each round's total to the next;
//   4. each element combines the prefix of its chunk.
// Threads holding no element (N < NT) take part with whatever they hold.
template <int NT, int N, int V, int L, bool REV, bool REUSED, bool EXCL = false, class A,
          class F>
__device__ __forceinline__ void tile_scan(A* y, F f, const A& id = A{}) {
  constexpr int P = N / NT > 1 ? N / NT : 1;
  constexpr int R = P / V;
  static_assert(P % V == 0 && N % L == 0 && NT % 32 == 0, "tile layout");
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int s = 1; s < V; ++s) {
      const int j = REV ? V - 1 - s : s;
      const bool starts = REV ? j % L == L - 1 : j % L == 0;
      if (L >= V || !starts) y[r * V + j] = f(y[r * V + (REV ? j + 1 : j - 1)], y[r * V + j]);
    }
  }
  if constexpr (EXCL && L <= V) {  // no thread shares a segment: shift within the chunks
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int s = V - 1; s >= 0; --s) {
        const int j = REV ? V - 1 - s : s;
        const bool starts = REV ? j % L == L - 1 : j % L == 0;
        const int before = REV ? (j + 1 < V ? j + 1 : j) : (j > 0 ? j - 1 : j);
        y[r * V + j] = starts ? id : y[r * V + before];
      }
    }
  }
  if constexpr (L > V) {
    constexpr int G = L / V < NT ? L / V : NT;  // threads of a segment in one round
    constexpr int W = G < 32 ? G : 32;
    constexpr bool ROUNDS = L > NT * V;         // segments span rounds
    const int lane = (int)threadIdx.x & 31;
    const int lp = REV ? W - 1 - (lane & (W - 1)) : lane & (W - 1);  // position in scan order
    A in[R], ex[R], wpre[R], agg[R];
    bool has_wpre = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      A w = y[r * V + (REV ? 0 : V - 1)];
#pragma unroll
      for (int d = 1; d < W; d <<= 1) {
        w = combine_if(lp >= d, shfl_earlier<REV>(w, d), w, f);
      }
      in[r] = w;
      ex[r] = shfl_earlier<REV>(w, 1);  // the lanes before this one (lp > 0)
    }
    if constexpr (G > 32) {
      constexpr int NW = NT / 32, GW = G / 32;
      __shared__ __align__(16) unsigned char raw[R * NW * sizeof(A)];
      A* part = reinterpret_cast<A*>(raw);
      const int wi = (int)threadIdx.x >> 5;
      if (lane == (REV ? 0 : 31)) {
#pragma unroll
        for (int r = 0; r < R; ++r) part[r * NW + wi] = in[r];
      }
      __syncthreads();
      const int wq = REV ? GW - 1 - (wi & (GW - 1)) : wi & (GW - 1);
      const int lq = REV ? GW - 1 - (lane & (GW - 1)) : lane & (GW - 1);
      has_wpre = wq > 0;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        A p = part[r * NW + (lane & (NW - 1))];  // lane i: warp i's total
#pragma unroll
        for (int d = 1; d < GW; d <<= 1) {
          p = combine_if(lq >= d, shfl_earlier<REV>(p, d), p, f);
        }
        wpre[r] = shfl_any<2>(p, (REV ? wi + 1 : wi - 1) & 31);
        if constexpr (ROUNDS) agg[r] = shfl_any<2>(p, REV ? 0 : NW - 1);
      }
      if constexpr (REUSED) __syncthreads();
    } else if constexpr (ROUNDS) {  // one warp
#pragma unroll
      for (int r = 0; r < R; ++r) agg[r] = shfl_any<2>(in[r], REV ? 0 : 31);
    }
    A carry[R];
    bool has_carry[R];
    if constexpr (ROUNDS) {
      constexpr int RS = L / (NT * V);  // rounds per segment
#pragma unroll
      for (int s = 0; s < R; ++s) {
        const int r = REV ? R - 1 - s : s;
        const int q = REV ? r + 1 : r - 1;
        has_carry[r] = REV ? r % RS != RS - 1 : r % RS != 0;
        if (has_carry[r]) carry[r] = has_carry[q] ? f(carry[q], agg[q]) : agg[q];
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      A pre = in[r];
      bool has = false;
      if constexpr (ROUNDS) {
        if (has_carry[r]) { pre = carry[r]; has = true; }
      }
      if constexpr (G > 32) {
        if (has_wpre) { pre = has ? f(pre, wpre[r]) : wpre[r]; has = true; }
      }
      if (lp > 0) { pre = has ? f(pre, ex[r]) : ex[r]; has = true; }
      if constexpr (EXCL) {  // element j takes the chunk's fold before it: j - 1 (REV: j + 1)
#pragma unroll
        for (int s = V - 1; s >= 1; --s) {
          const int j = REV ? V - 1 - s : s;
          const A& before = y[r * V + (REV ? j + 1 : j - 1)];
          y[r * V + j] = has ? f(pre, before) : before;
        }
        y[r * V + (REV ? V - 1 : 0)] = has ? pre : id;
      } else if (has) {
#pragma unroll
        for (int j = 0; j < V; ++j) y[r * V + j] = f(pre, y[r * V + j]);
      }
    }
  }
}

// Whether tile_fold_chunks' rounds trade halves first (a butterfly, below): segments
// span whole warps and a thread holds 2..32 rounds, a power of two of them.
template <int NT, int N, int V, int L>
constexpr bool fold_butterfly = L > 32 * V && N / NT / V >= 2 && N / NT / V <= 32 &&
                                ((N / NT / V) & (N / NT / V - 1)) == 0;

// Steps 1 and 2 of tile_fold_chunks: each thread's chunks folded (c[r], round r), then
// the lanes of a segment folded in order. Where fold_butterfly, lane r < R of a warp
// ends with the warp's total of the round r's bits pick (store_round_totals); else
// lane 0 (of each group of W lanes) with its total of every round r in c[r].
template <int NT, int N, int V, int L, class A, class F>
__device__ __forceinline__ void fold_chunk_rounds(const A* y, F f, A* c, int lane) {
  constexpr int R = N / NT / V;
  constexpr int G = L / V < NT ? L / V : NT;  // threads of a segment in one round
  constexpr int W = G < 32 ? G : 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    c[r] = y[r * V];
#pragma unroll
    for (int j = 1; j < V; ++j) c[r] = f(c[r], y[r * V + j]);
  }
  // the warp's total of every round: a butterfly where segments span whole warps and
  // a thread holds 2..32 rounds (R - 1 + log2(32 / R) shuffles instead of 5 R): lanes
  // i and i + d (i's bit d clear) trade halves of their rounds, i keeping the lower
  // half, each combining the lower lane's value first (in order); after log2(R) levels
  // lane i holds one round (its bits pick the halves), folded into lanes 0 .. R-1
  if constexpr (fold_butterfly<NT, N, V, L>) {
#pragma unroll
    for (int d = 1; d < R; d <<= 1) {
      const int half = R / (2 * d);
      const bool up = (lane & d) != 0;
#pragma unroll
      for (int k = 0; k < R / 2; ++k) {
        if (k < half) {
          const A send = select_words(up, c[k], c[k + half]);
          const A recv = shfl_any<2>(send, lane ^ d);
          c[k] = up ? f(recv, c[k + half]) : f(c[k], recv);
        }
      }
    }
    c[0] = fold_down<R, 32>(c[0], f, lane);
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) c[r] = fold_down<1, W>(c[r], f, lane);
  }
}

// Step 3's start: warp wi's total of round r into part[r * NW + wi] (segments wider than
// a warp's round).
template <int NT, int N, int V, int L, class A>
__device__ __forceinline__ void store_round_totals(const A* c, A* part, int lane, int wi) {
  constexpr int R = N / NT / V, NW = NT / 32;
  if constexpr (fold_butterfly<NT, N, V, L>) {
    if (lane < R) {
      int r = 0;
#pragma unroll
      for (int d = 1; d < R; d <<= 1) r += (lane & d) ? R / (2 * d) : 0;
      part[r * NW + wi] = c[0];
    }
  } else if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) part[r * NW + wi] = c[r];
  }
}

// fold_down's tree over the W lanes of each group with every lane ending with its
// group's total: lanes i and i ^ d trade values and both combine the lower lane's first
// (in order, the same association as fold_down).
template <int W, class A, class F>
__device__ __forceinline__ A fold_all(A x, F f, int lane) {
#pragma unroll
  for (int d = 1; d < W; d <<= 1) {
    const A o = shfl_any<2>(x, lane ^ d);
    const bool up = (lane & d) != 0;
    x = f(select_words(up, o, x), select_words(up, x, o));
  }
  return x;
}

// The totals of a tile's segments of L consecutive (row-major) elements,
// combined in order with f (associative, not commutative): what a fold needs,
// without the prefixes of every element that tile_scan computes. Layout as
// tile_scan's; needs segments of whole chunks (L > V) and every thread holding
// whole chunks (N >= NT * V). put(s, total) is called once for each segment s
// by one thread; nothing is synchronized after it (the caller's barrier).
//   1. each thread folds each of its chunks (registers);
//   2. the lanes of a segment fold their chunks' totals pairwise in order
//      (fold_down; for segments of whole warps the rounds first trade halves, the
//      butterfly of fold_chunk_rounds);
//   3. segments wider than a warp's round: the warps' totals go through shared memory
//      (one barrier) and a thread per segment folds them in order (a warp per segment,
//      lanes then a shuffle tree, where few segments hold 32 or more totals each).
template <int NT, int N, int V, int L, class A, class F, class Put>
__device__ __forceinline__ void tile_fold_chunks(const A* y, F f, Put put) {
  constexpr int P = N / NT, R = P / V;
  static_assert(L > V && N >= NT * V && P % V == 0 && NT % 32 == 0, "fold layout");
  constexpr int G = L / V < NT ? L / V : NT;  // threads of a segment in one round
  constexpr int W = G < 32 ? G : 32;
  const int lane = (int)threadIdx.x & 31;
  A c[R];
  fold_chunk_rounds<NT, N, V, L>(y, f, c, lane);
  if constexpr (L <= 32 * V) {  // a segment is W lanes of one round
    if ((lane & (W - 1)) == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) put((r * NT * V + (int)threadIdx.x * V) / L, c[r]);
    }
  } else {
    constexpr int NW = NT / 32, GW = G / 32;            // warps; warps of a segment
    constexpr int RS = L > NT * V ? L / (NT * V) : 1;   // rounds of a segment
    constexpr int SR = NW / GW;                         // segments per round
    __shared__ __align__(16) unsigned char raw[R * NW * sizeof(A)];
    A* part = reinterpret_cast<A*>(raw);
    const int wi = (int)threadIdx.x >> 5;
    store_round_totals<NT, N, V, L>(c, part, lane, wi);
    __syncthreads();
    // a segment's RS * GW totals lie in order at part[r0 * NW + w0 ...]
    constexpr int K = RS * GW;
    if constexpr (N / L <= NW && K >= 32 && K % 32 == 0) {
      // few segments of many totals (a whole tile's fold: 256 totals at 512 x 64): a warp
      // per segment, each lane folding K / 32 consecutive totals, then an in-order
      // shuffle-down tree, instead of one thread folding all K in a serial chain
      // (every warp runs the shuffles, those past the segments on segment 0's totals,
      // and only puts nothing: no shuffle under a branch)
      constexpr int E = K / 32;
      const int s = wi < N / L ? wi : 0;
      const int b = (RS > 1 ? s * RS * NW : (s / SR) * NW + (s % SR) * GW) + lane * E;
      A t = part[b];
#pragma unroll
      for (int e = 1; e < E; ++e) t = f(t, part[b + e]);
      t = fold_down<1, 32>(t, f, lane);
      if (lane == 0 && wi < N / L) put(s, t);
    } else {
      for (int s = (int)threadIdx.x; s < N / L; s += NT) {
        const int r0 = RS > 1 ? s * RS : s / SR;
        const int w0 = RS > 1 ? 0 : (s % SR) * GW;
        A t = part[r0 * NW + w0];
#pragma unroll
        for (int q = 0; q < RS; ++q) {
#pragma unroll
          for (int w = 0; w < GW; ++w) {
            if (q || w) t = f(t, part[(r0 + q) * NW + w0 + w]);
          }
        }
        put(s, t);
      }
    }
  }
}

// A tile of fewer elements than threads (threads 0..N-1 hold one each, N a power
// of two, folded whole): one shuffle tree per warp, then the warps' totals in order
// through shared memory. The look-back's small folds (a window of status words, a
// group's words) take this instead of a tile_scan and its broadcast.
template <int NT, int N, class A, class F, class Put>
__device__ __forceinline__ void tile_fold_small(const A* y, F f, Put put) {
  static_assert(N < NT && (N & (N - 1)) == 0 && NT % 32 == 0, "small fold layout");
  constexpr int W = N < 32 ? N : 32;
  const int lane = (int)threadIdx.x & 31;
  const A c = fold_down<1, W>(y[0], f, lane);  // threads past the tile hold garbage,
                                               // which no put sees
  if constexpr (N <= 32) {
    if (threadIdx.x == 0) put(0, c);
  } else {
    constexpr int NW = N / 32;
    __shared__ __align__(16) unsigned char raw[NW * sizeof(A)];
    A* part = reinterpret_cast<A*>(raw);
    if (lane == 0 && (int)threadIdx.x < N) part[threadIdx.x >> 5] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
      A t = part[0];
#pragma unroll
      for (int w = 1; w < NW; ++w) t = f(t, part[w]);
      put(0, t);
    }
  }
}

// A tile of 2..32 elements (threads 0..N-1 hold one each) folded left to right,
// ((x0 f x1) f x2) ... (ct.reduce(..., sequential=True)): lane i's element is
// broadcast in turn; the shuffles do not wait for the running value, only the
// combines chain. Every thread runs the shuffles; thread 0 puts.
template <int N, class A, class F, class Put>
__device__ __forceinline__ void tile_fold_sequential(const A* y, F f, Put put) {
  static_assert(N >= 2 && N <= 32, "a sequential warp fold is of 2..32 elements");
  A acc = shfl_any<2>(y[0], 0);
#pragma unroll
  for (int i = 1; i < N; ++i) acc = f(acc, shfl_any<2>(y[0], i));
  if (threadIdx.x == 0) put(0, acc);
}

// tile_fold_chunks, or tile_fold_small for a tile of fewer elements than threads
// (V == 1, L == N).
template <int NT, int N, int V, int L, class A, class F, class Put>
__device__ __forceinline__ void tile_fold(const A* y, F f, Put put) {
  if constexpr (N < NT * V) {
    static_assert(V == 1 && L == N, "a small fold is of the whole tile, one element a thread");
    tile_fold_small<NT, N>(y, f, put);
  } else {
    tile_fold_chunks<NT, N, V, L>(y, f, put);
  }
}

// The whole tile's fold (tile_fold with one segment, L == N, in the same association:
// the same bits) in every thread, as block_allreduce gives a built-in reduction's: the
// warps' totals go through shared memory once and every warp folds them itself, so a
// call waits at one barrier (REUSED, a call site that runs again: two) where tile_fold,
// its put and the broadcast of the result wait at three. SLOT names the call site (its
// own shared totals). allfold_fits says which tiles it takes: whole chunks a thread,
// K (the warps' round totals) at most 32 or a whole number a lane.
template <int NT, int N, int V>
constexpr bool allfold_fits =
    N < NT * V ? V == 1 && N >= 2 && (N & (N - 1)) == 0
               : NT % 32 == 0 && N % (NT * V) == 0 && N > V &&
                     (N / NT / V * (NT / 32) <= 32 || N / NT / V * (NT / 32) % 32 == 0);

// tile_fold_small's tiles (threads 0..N-1 hold one each): each warp's lane 0 its total
// (fold_down), the totals through shared memory, every thread folds them in order.
template <int N, int SLOT, bool REUSED, class A, class F>
__device__ __forceinline__ A tile_allfold_small(const A* y, F f) {
  constexpr int W = N < 32 ? N : 32, NW = N / W;
  const int lane = (int)threadIdx.x & 31, wi = (int)threadIdx.x >> 5;
  const A c = fold_down<1, W>(y[0], f, lane);
  __shared__ __align__(16) unsigned char raw[NW * sizeof(A)];
  A* part = reinterpret_cast<A*>(raw);
  if (lane == 0 && wi < NW) part[wi] = c;
  __syncthreads();
  A t = part[0];
#pragma unroll
  for (int w = 1; w < NW; ++w) t = f(t, part[w]);
  if constexpr (REUSED) __syncthreads();
  return t;
}

template <int NT, int N, int V, int SLOT, bool REUSED, class A, class F>
__device__ __forceinline__ A tile_allfold_chunks(const A* y, F f) {
  constexpr int R = N / NT / V, NW = NT / 32;
  const int lane = (int)threadIdx.x & 31;
  A c[R];
  fold_chunk_rounds<NT, N, V, N>(y, f, c, lane);
  if constexpr (NT == 32 && R == 1) {  // one warp, one round: lane 0 holds it
    return shfl_any<2>(c[0], 0);
  } else {
    constexpr int K = R * NW;  // in element order at part[0 .. K)
    __shared__ __align__(16) unsigned char raw[K * sizeof(A)];
    A* part = reinterpret_cast<A*>(raw);
    store_round_totals<NT, N, V, N>(c, part, lane, (int)threadIdx.x >> 5);
    __syncthreads();
    A t;
    if constexpr (K % 32 == 0) {  // every warp: K / 32 a lane, then fold_down's tree
      constexpr int E = K / 32;
      t = part[lane * E];
#pragma unroll
      for (int e = 1; e < E; ++e) t = f(t, part[lane * E + e]);
      t = fold_all<32>(t, f, lane);
    } else {  // every thread, in order
      t = part[0];
#pragma unroll
      for (int k = 1; k < K; ++k) t = f(t, part[k]);
    }
    if constexpr (REUSED) __syncthreads();  // every thread has read the totals
    return t;
  }
}

template <int NT, int N, int V, int SLOT, bool REUSED, class A, class F>
__device__ __forceinline__ A tile_allfold(const A* y, F f) {
  static_assert(allfold_fits<NT, N, V>, "allfold layout");
  if constexpr (N < NT * V) {
    return tile_allfold_small<N, SLOT, REUSED>(y, f);
  } else {
    return tile_allfold_chunks<NT, N, V, SLOT, REUSED>(y, f);
  }
}

}  // namespace tc
