// float16 traits (included only by kernels that use float16).
#pragma once
#include <cuda_fp16.h>

namespace tc {
template <> struct Num<__half> : FloatNum<__half, float> {
  __device__ static float to_f(__half x) { return __half2float(x); }
  __device__ static __half from_float(float x) { return __float2half_rn(x); }
  __device__ static __half from_float(double x) { return __double2half(x); }
  __device__ static __half from_i64(long long x) { return __ll2half_rn(x); }
  __device__ static __half from_u64(unsigned long long x) { return __ull2half_rn(x); }
};

// Element k of a packed float16 share, as float.
template <int P>
__device__ __forceinline__ float unpack_float(const Packed16<__half, P>& p, int k) {
  const unsigned int w = p.w[k >> 1];
  return __half2float(__ushort_as_half((unsigned short)((k & 1) ? (w >> 16) : (w & 0xffffu))));
}

// +, -, * in the float16 unit, rounded once: float32's result rounded, as in
// bf16.cuh (24 >= 2 * 11 + 2 bits), without the conversions.
template <>
__device__ __forceinline__ __half op_add(__half a, __half b) { return __hadd_rn(a, b); }
template <>
__device__ __forceinline__ __half op_sub(__half a, __half b) { return __hsub_rn(a, b); }
template <>
__device__ __forceinline__ __half op_mul(__half a, __half b) { return __hmul_rn(a, b); }
}  // namespace tc
