// tilecore C++ tile runtime: fragments, the register layout, numeric traits.
// Generated kernels include this header first; fp16.cuh / bf16.cuh add the
// traits of the half types only when a kernel uses them (compile time).
#pragma once

namespace tc {

// A thread's share of a tile: P elements held in registers (copied by value).
template <class T, int P>
struct Frag {
  T v[P];
};

// A tile share of a 16-bit float type kept as packed 32-bit words (two elements
// each): used for a load whose only use is a conversion to float, so that the
// words stay packed in registers until each element is converted.
template <class T, int P>
struct Packed16 {
  static_assert(sizeof(T) == 2 && P % 2 == 0, "two 16-bit elements per word");
  unsigned int w[P / 2];
};

// V consecutive elements moved by one vector load/store.
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Every kernel's first statement. Launched with programmatic dependent launch
// (sm_90+), a grid may start while the grid before it in the stream drains;
// this waits until that grid has finished and its writes are visible, before
// the kernel touches memory. Otherwise (or below sm_90) it returns at once.
__device__ __forceinline__ void wait_for_prior_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the stream's next grid, when launched for early start, begin before this
// one finishes (once every block has called this or exited). Orders no access:
// the next grid still waits (above) before it sees this grid's writes.
__device__ __forceinline__ void launch_dependent_grids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Linear (row-major) tile element held by this thread as its k-th element:
// chunks of V consecutive elements dealt round-robin to the T threads.
// A one-element tile is replicated: every thread holds element 0.
template <int N, int T, int V>
__device__ __forceinline__ int elem(int k) {
  if (N == 1) return 0;
  return ((k / V) * T + (int)threadIdx.x) * V + (k % V);
}

// First array coordinate of a tile addressed by a 64-bit tile index:
// index * step, clamped to +-2^62 (beyond every array) where the product would
// overflow, so that no wrapped product lands inside the array.
template <long long STEP>
__device__ __forceinline__ long long tile_origin(long long index) {
  constexpr long long kFar = 1LL << 62;
  constexpr long long kLimit = kFar / STEP;
  return index > kLimit ? kFar : index < -kLimit ? -kFar : index * STEP;
}

// Storage-only number formats (no arithmetic): raw codes and a tf32 container.
struct f8e4m3 { unsigned char bits; };
struct f8e5m2 { unsigned char bits; };
struct f8e8m0 { unsigned char bits; };
struct f4e2m1 { unsigned char bits; };  // one value per byte, code in the low 4 bits
struct tf32 { float v; };

enum Kind { kBool = 0, kSigned = 1, kUnsigned = 2, kFloat = 3 };

// Numeric traits: Num<T>::C is the type arithmetic runs in (float for the
// 16-bit floats, so every op rounds once), F the exact float intermediate
// used by conversions; from_* convert with the rounding astype promises.
template <class T> struct Num;

// float -> integer, truncating, through the conversion intrinsics: a NaN or a value out of
// range saturates, as the hardware's cvt does (what a plain cast compiles to), where the
// C++ cast is undefined and lets NVRTC drop code that depends on it (as it dropped a
// branch's stores after a shift past the width). 8- and 16-bit targets convert through 32
// bits, as NVRTC compiles their casts.
template <class T> struct FromFloat;
#define TC_FROM_FLOAT(T, VIA, FROM_F32, FROM_F64)                               \
  template <> struct FromFloat<T> {                                             \
    __device__ static T f(float x) { return (T)(VIA)FROM_F32(x); }              \
    __device__ static T f(double x) { return (T)(VIA)FROM_F64(x); }             \
  };
TC_FROM_FLOAT(signed char, int, __float2int_rz, __double2int_rz)
TC_FROM_FLOAT(short, int, __float2int_rz, __double2int_rz)
TC_FROM_FLOAT(int, int, __float2int_rz, __double2int_rz)
TC_FROM_FLOAT(long long, long long, __float2ll_rz, __double2ll_rz)
TC_FROM_FLOAT(unsigned char, unsigned int, __float2uint_rz, __double2uint_rz)
TC_FROM_FLOAT(unsigned short, unsigned int, __float2uint_rz, __double2uint_rz)
TC_FROM_FLOAT(unsigned int, unsigned int, __float2uint_rz, __double2uint_rz)
TC_FROM_FLOAT(unsigned long long, unsigned long long, __float2ull_rz, __double2ull_rz)
#undef TC_FROM_FLOAT

template <class T, class U, int K>
struct IntNum {
  static constexpr int kind = K;
  using C = T;
  using W = U;  // unsigned type with wrapping arithmetic (at least 32 bits)
  __device__ static C up(T x) { return x; }
  __device__ static T down(C x) { return x; }
  __device__ static T from_i64(long long x) { return (T)x; }
  __device__ static T from_u64(unsigned long long x) { return (T)x; }
  __device__ static T from_float(float x) { return FromFloat<T>::f(x); }
  __device__ static T from_float(double x) { return FromFloat<T>::f(x); }
  __device__ static bool nonzero(T x) { return x != 0; }
};

template <> struct Num<signed char> : IntNum<signed char, unsigned int, kSigned> {
  __device__ static C lowest() { return -128; }
  __device__ static C highest() { return 127; }
};
template <> struct Num<short> : IntNum<short, unsigned int, kSigned> {
  __device__ static C lowest() { return -32768; }
  __device__ static C highest() { return 32767; }
};
template <> struct Num<int> : IntNum<int, unsigned int, kSigned> {
  __device__ static C lowest() { return -2147483647 - 1; }
  __device__ static C highest() { return 2147483647; }
};
template <> struct Num<long long> : IntNum<long long, unsigned long long, kSigned> {
  __device__ static C lowest() { return -9223372036854775807LL - 1; }
  __device__ static C highest() { return 9223372036854775807LL; }
};
template <> struct Num<unsigned char> : IntNum<unsigned char, unsigned int, kUnsigned> {
  __device__ static C lowest() { return 0; }
  __device__ static C highest() { return 255; }
};
template <> struct Num<unsigned short> : IntNum<unsigned short, unsigned int, kUnsigned> {
  __device__ static C lowest() { return 0; }
  __device__ static C highest() { return 65535; }
};
template <> struct Num<unsigned int> : IntNum<unsigned int, unsigned int, kUnsigned> {
  __device__ static C lowest() { return 0; }
  __device__ static C highest() { return 4294967295U; }
};
template <> struct Num<unsigned long long>
    : IntNum<unsigned long long, unsigned long long, kUnsigned> {
  __device__ static C lowest() { return 0; }
  __device__ static C highest() { return 18446744073709551615ULL; }
};

template <> struct Num<bool> {
  static constexpr int kind = kBool;
  using C = bool;
  using W = unsigned int;
  __device__ static C up(bool x) { return x; }
  __device__ static bool down(C x) { return x; }
  __device__ static bool from_i64(long long x) { return x != 0; }
  __device__ static bool from_u64(unsigned long long x) { return x != 0; }
  __device__ static bool from_float(float x) { return x != 0.0f; }
  __device__ static bool from_float(double x) { return x != 0.0; }
  __device__ static bool nonzero(bool x) { return x; }
  __device__ static C lowest() { return false; }
  __device__ static C highest() { return true; }
};

// Traits shared by every float format: S is the storage type, F the exact
// intermediate (float, or double for float64).
template <class S, class F>
struct FloatNum {
  static constexpr int kind = kFloat;
  using C = F;
  __device__ static C up(S x) { return Num<S>::to_f(x); }
  __device__ static S down(C x) { return Num<S>::from_float(x); }
  __device__ static bool nonzero(S x) { return Num<S>::to_f(x) != (F)0; }
  __device__ static C lowest() { return -__int_as_float(0x7f800000); }
  __device__ static C highest() { return __int_as_float(0x7f800000); }
};

template <> struct Num<float> : FloatNum<float, float> {
  __device__ static float to_f(float x) { return x; }
  __device__ static float from_float(float x) { return x; }
  __device__ static float from_float(double x) { return (float)x; }
  __device__ static float from_i64(long long x) { return (float)x; }
  __device__ static float from_u64(unsigned long long x) { return (float)x; }
};

template <> struct Num<double> : FloatNum<double, double> {
  __device__ static double to_f(double x) { return x; }
  __device__ static double from_float(float x) { return x; }
  __device__ static double from_float(double x) { return x; }
  __device__ static double from_i64(long long x) { return (double)x; }
  __device__ static double from_u64(unsigned long long x) { return (double)x; }
  __device__ static C lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
  __device__ static C highest() { return __longlong_as_double(0x7ff0000000000000LL); }
};

}  // namespace tc

#include "convert.cuh"
#include "math.cuh"
#include "block.cuh"
