// L2 prefetch hints (ct.prefetch): bring global memory into L2 without
// loading it into registers. Included only by kernels that prefetch.
//
// None of these is a memory access of the C++ program: no "memory" clobber, so
// the compiler keeps loads and stores where they are on either side of them
// (asm volatile keeps the hints themselves). Every address they take lies
// inside the bytes they are given, so a hint never touches memory outside the
// array (and a prefetch never faults anyway).
#pragma once

namespace tc {

// The 128-byte line holding byte `p` of global memory, into L2.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
}

// The j-th 128-byte line that bytes [begin, end) touch (the first at `begin`
// itself), into L2; nothing if they touch fewer than j + 1 lines.
__device__ __forceinline__ void prefetch_l2_line(const void* begin, const void* end, int j) {
  const unsigned long long b = __cvta_generic_to_global(begin);
  const unsigned long long e = __cvta_generic_to_global(end);
  const unsigned long long line = (b & ~127ull) + 128ull * (unsigned long long)j;
  const unsigned long long a = line > b ? line : b;
  if (a < e) asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
}

// Whether elements p and p - stride lie in one 128-byte line (a strided tile
// prefetches each line once: at the first of its elements in the line).
template <class T>
__device__ __forceinline__ bool same_line(const T* p, long long stride) {
  const unsigned long long a = (unsigned long long)p;
  const unsigned long long b = a - (unsigned long long)stride * sizeof(T);
  return (a >> 7) == (b >> 7);
}

// Bytes [begin, end) into L2 with one bulk prefetch (sm_90+), whose address
// must be 16-byte aligned and size a multiple of 16: the span shrinks to its
// 16-byte aligned interior (the ragged ends are left out, nothing outside is
// touched), nothing if that is empty. Below sm_90 (source generated for sm_90
// compiled for an older architecture) each line of the span instead.
__device__ __forceinline__ void prefetch_l2_bulk(const void* begin, const void* end) {
  const unsigned long long b = (__cvta_generic_to_global(begin) + 15ull) & ~15ull;
  const unsigned long long e = __cvta_generic_to_global(end) & ~15ull;
  if (b >= e) return;
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(b), "r"((unsigned int)(e - b)));
#else
  for (unsigned long long a = b; a < e; a = (a & ~127ull) + 128ull)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
#endif
}

}  // namespace tc
