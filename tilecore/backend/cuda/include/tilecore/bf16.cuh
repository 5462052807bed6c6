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
}  // namespace tc
