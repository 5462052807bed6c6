// Reductions: reducer functors (accumulator type A, identity, combine) and
// the block-wide all-reduce (thread -> warp shuffles -> shared memory).
#pragma once

namespace tc {

// Accumulator of sum/prod: the float compute type, or the wrapping unsigned
// type for integers (sums of integers wrap).
template <class T, bool F = Num<T>::kind == kFloat> struct AccT { using A = typename Num<T>::C; };
template <class T> struct AccT<T, false> { using A = typename Num<T>::W; };

template <class T> struct RSum {
  using A = typename AccT<T>::A;
  __device__ static A identity() { return (A)0; }
  __device__ static A in(T x) { return (A)Num<T>::up(x); }
  __device__ static T out(A a) { return Num<T>::down((typename Num<T>::C)a); }
  __device__ static A combine(A a, A b) { return a + b; }
};
template <class T> struct RProd {
  using A = typename AccT<T>::A;
  __device__ static A identity() { return (A)1; }
  __device__ static A in(T x) { return (A)Num<T>::up(x); }
  __device__ static T out(A a) { return Num<T>::down((typename Num<T>::C)a); }
  __device__ static A combine(A a, A b) { return a * b; }
};
template <class T> struct RMax {
  using A = typename Num<T>::C;
  __device__ static A identity() { return Num<T>::lowest(); }
  __device__ static A in(T x) { return Num<T>::up(x); }
  __device__ static T out(A a) { return Num<T>::down(a); }
  __device__ static A combine(A a, A b) { return c_max(a, b); }
};
template <class T> struct RMin {
  using A = typename Num<T>::C;
  __device__ static A identity() { return Num<T>::highest(); }
  __device__ static A in(T x) { return Num<T>::up(x); }
  __device__ static T out(A a) { return Num<T>::down(a); }
  __device__ static A combine(A a, A b) { return c_min(a, b); }
};

// argmax/argmin: (value, index) pairs; ties and NaNs pick the smaller index,
// a NaN beats every number (NumPy's rule). combine is commutative, so every
// lane of a butterfly reduction ends with the same pair.
template <class C> struct ArgVal { C v; int i; };

template <class T, bool MAX> struct RArg {
  using C = typename Num<T>::C;
  using A = ArgVal<C>;
  __device__ static A identity() { return A{MAX ? Num<T>::lowest() : Num<T>::highest(), 0x7fffffff}; }
  __device__ static A make(T x, int i) { return A{Num<T>::up(x), i}; }
  __device__ static A combine(A a, A b) {
    const bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (MAX ? (a.v > b.v) : (a.v < b.v)) return a;
    if (MAX ? (b.v > a.v) : (b.v < a.v)) return b;
    return a.i < b.i ? a : b;
  }
};
template <class T> using RArgMax = RArg<T, true>;
template <class T> using RArgMin = RArg<T, false>;

// Shuffle any trivially copyable value, 32 bits at a time.
template <class A>
__device__ __forceinline__ A shfl_xor(const A& x, int mask) {
  constexpr int W = (int)((sizeof(A) + 3) / 4);
  unsigned int w[W] = {};
  memcpy(w, &x, sizeof(A));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}

// Every thread of the NT-thread block gets combine() over all threads' x.
// SLOT names the call site: each has its own NT/32 partials in static shared
// memory, so nothing else writes them and one barrier suffices. A call site
// that runs again (in a loop: REUSED) waits a second time, for every thread
// to have read its partials before they are rewritten.
template <class R, int NT, int SLOT, bool REUSED>
__device__ __forceinline__ typename R::A block_allreduce(typename R::A x) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) x = R::combine(x, shfl_xor(x, m));
  if constexpr (NT > 32) {
    constexpr int NW = NT / 32;
    __shared__ typename R::A part[NW];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
    __syncthreads();
    x = part[0];
#pragma unroll
    for (int w = 1; w < NW; ++w) x = R::combine(x, part[w]);
    if constexpr (REUSED) __syncthreads();
  }
  return x;
}

}  // namespace tc
