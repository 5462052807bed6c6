// bfloat16 traits (included only by kernels that use bfloat16).
#pragma once
#include <cuda_bf16.h>

namespace tc {
template <> struct Num<__nv_bfloat16> : FloatNum<__nv_bfloat16, float> {
  __device__ static float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ static __nv_bfloat16 from_float(double x) { return __double2bfloat16(x); }
  __device__ static __nv_bfloat16 from_i64(long long x) { return __ll2bfloat16_rn(x); }
  __device__ static __nv_bfloat16 from_u64(unsigned long long x) { return __ull2bfloat16_rn(x); }
};

// Element k of a packed bfloat16 share, as float (the bits, shifted).
template <int P>
__device__ __forceinline__ float unpack_float(const Packed16<__nv_bfloat16, P>& p, int k) {
  const unsigned int w = p.w[k >> 1];
  return __uint_as_float((k & 1) ? (w & 0xffff0000u) : (w << 16));
}

// +, -, * in the bfloat16 unit, rounded once: the same result as float32's
// operation rounded to bfloat16 (the float32 result of two bfloat16 operands is
// exact or rounded innocuously: 24 >= 2 * p + 2 bits), without the
// conversions (a bfloat16 user `a + b` reduction ran at 88% of the float32-
// accumulated sum, H200). The _rn forms are never contracted into an fma.
template <>
__device__ __forceinline__ __nv_bfloat16 op_add(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hadd_rn(a, b);
}
template <>
__device__ __forceinline__ __nv_bfloat16 op_sub(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hsub_rn(a, b);
}
template <>
__device__ __forceinline__ __nv_bfloat16 op_mul(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hmul_rn(a, b);
}
}  // namespace tc
