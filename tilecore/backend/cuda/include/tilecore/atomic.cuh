// Atomics and ordered (strong) global-memory accesses, in inline PTX (no
// libcu++: compile time). Included only by kernels that use atomics or a
// load/store with a memory_order other than WEAK.
//
// Every element access here is a strong access at its scope, relaxed or acquire:
// the tile-level orders are built around them by the generated code, per block:
//   release: __syncthreads(); fence_acq_rel<S>(); relaxed accesses
//   acquire: acquire accesses; __syncthreads()  (a thread holding many of the
//            elements: relaxed accesses; fence_acq_rel<S>(); __syncthreads())
// (a strong write after an acq_rel fence is a release pattern of the PTX memory
// model; the barrier extends the order to the block's other threads, as
// cooperative groups' grid sync does). An acquire is the accesses' own, not a
// fence after relaxed ones: a fence also waits for the thread's earlier loads
// still in flight (a tile loaded ahead), an acquire access only for itself.
// Scope S: 0 = .cta (MemoryScope.BLOCK), 1 = .gpu (DEVICE), 2 = .sys (SYS).
#pragma once

namespace tc {

// One asm statement with the scope S spliced in between BEFORE and AFTER.
#define TC_SCOPED_ASM(S, BEFORE, AFTER, ...)                                   \
  if constexpr ((S) == 0) {                                                    \
    asm volatile(BEFORE ".cta" AFTER __VA_ARGS__);                             \
  } else if constexpr ((S) == 1) {                                             \
    asm volatile(BEFORE ".gpu" AFTER __VA_ARGS__);                             \
  } else {                                                                     \
    asm volatile(BEFORE ".sys" AFTER __VA_ARGS__);                             \
  }

template <int S>
__device__ __forceinline__ void fence_acq_rel() {
  TC_SCOPED_ASM(S, "fence.acq_rel", ";", ::: "memory")
}

// Strong loads and stores of any 1-, 2-, 4- or 8-byte element (bits moved as is).
// SEM: the load's PTX semantics, "ld.relaxed" or "ld.acquire" (an acquire orders
// this thread's later accesses after it without waiting for its earlier ones, as
// a fence.acq_rel would: a fence also drains the thread's loads still in flight).
#define TC_LD(NAME, SEM)                                                              \
  template <int S, class T>                                                           \
  __device__ __forceinline__ T NAME(const T* p) {                                     \
    if constexpr (sizeof(T) == 1) {                                                   \
      unsigned int r;                                                                 \
      TC_SCOPED_ASM(S, SEM, ".global.u8 %0, [%1];", : "=r"(r) : "l"(p) : "memory")    \
      return bitcast<T>((unsigned char)r);                                            \
    } else if constexpr (sizeof(T) == 2) {                                            \
      unsigned short r;                                                               \
      TC_SCOPED_ASM(S, SEM, ".global.b16 %0, [%1];", : "=h"(r) : "l"(p) : "memory")   \
      return bitcast<T>(r);                                                           \
    } else if constexpr (sizeof(T) == 4) {                                            \
      unsigned int r;                                                                 \
      TC_SCOPED_ASM(S, SEM, ".global.b32 %0, [%1];", : "=r"(r) : "l"(p) : "memory")   \
      return bitcast<T>(r);                                                           \
    } else {                                                                          \
      static_assert(sizeof(T) == 8, #NAME ": 1, 2, 4 or 8 bytes");                    \
      unsigned long long r;                                                           \
      TC_SCOPED_ASM(S, SEM, ".global.b64 %0, [%1];", : "=l"(r) : "l"(p) : "memory")   \
      return bitcast<T>(r);                                                           \
    }                                                                                 \
  }

TC_LD(ld_relaxed, "ld.relaxed")
TC_LD(ld_acquire, "ld.acquire")

template <int S, class T>
__device__ __forceinline__ void st_relaxed(T* p, T v) {
  if constexpr (sizeof(T) == 1) {
    const unsigned int b = bitcast<unsigned char>(v);
    TC_SCOPED_ASM(S, "st.relaxed", ".global.u8 [%0], %1;", :: "l"(p), "r"(b) : "memory")
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short b = bitcast<unsigned short>(v);
    TC_SCOPED_ASM(S, "st.relaxed", ".global.b16 [%0], %1;", :: "l"(p), "h"(b) : "memory")
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int b = bitcast<unsigned int>(v);
    TC_SCOPED_ASM(S, "st.relaxed", ".global.b32 [%0], %1;", :: "l"(p), "r"(b) : "memory")
  } else {
    static_assert(sizeof(T) == 8, "st_relaxed: 1, 2, 4 or 8 bytes");
    const unsigned long long b = bitcast<unsigned long long>(v);
    TC_SCOPED_ASM(S, "st.relaxed", ".global.b64 [%0], %1;", :: "l"(p), "l"(b) : "memory")
  }
}

// atom_<op>_<type><S, ACQ>(p, v): one atomic read-modify-write, returning the old
// value, relaxed or (ACQ) acquire; red_<op>_<type><S>(p, v): a relaxed one without
// the old value. T is the element type; U the PTX operand type of constraint C (same
// size).
// One atom instruction, acquire (ACQ) or relaxed, at scope S.
#define TC_ATOM_ASM(ACQ, S, AFTER, ...)                                        \
  if constexpr (ACQ) {                                                         \
    TC_SCOPED_ASM(S, "atom.acquire", AFTER, __VA_ARGS__)                       \
  } else {                                                                     \
    TC_SCOPED_ASM(S, "atom.relaxed", AFTER, __VA_ARGS__)                       \
  }

#define TC_ATOM(NAME, INSTR, U, C)                                             \
  template <int S, bool ACQ = false, class T>                                  \
  __device__ __forceinline__ T atom_##NAME(T* p, T v) {                        \
    U r;                                                                       \
    const U b = bitcast<U>(v);                                                 \
    TC_ATOM_ASM(ACQ, S, ".global." INSTR " %0, [%1], %2;",                     \
                : "=" C(r) : "l"(p), C(b) : "memory")                          \
    return bitcast<T>(r);                                                      \
  }

#define TC_RED(NAME, INSTR, U, C)                                              \
  template <int S, class T>                                                    \
  __device__ __forceinline__ void red_##NAME(T* p, T v) {                      \
    const U b = bitcast<U>(v);                                                 \
    TC_SCOPED_ASM(S, "red.relaxed", ".global." INSTR " [%0], %1;",             \
                  :: "l"(p), C(b) : "memory")                                  \
  }

#define TC_ATOM_RED(NAME, INSTR, U, C) TC_ATOM(NAME, INSTR, U, C) TC_RED(NAME, INSTR, U, C)

TC_ATOM_RED(add_u32, "add.u32", unsigned int, "r")
TC_ATOM_RED(add_u64, "add.u64", unsigned long long, "l")
TC_ATOM_RED(add_f32, "add.f32", float, "f")
TC_ATOM_RED(add_f64, "add.f64", double, "d")
TC_ATOM_RED(add_f16, "add.noftz.f16", unsigned short, "h")
TC_ATOM_RED(max_s32, "max.s32", int, "r")
TC_ATOM_RED(max_u32, "max.u32", unsigned int, "r")
TC_ATOM_RED(max_s64, "max.s64", long long, "l")
TC_ATOM_RED(max_u64, "max.u64", unsigned long long, "l")
TC_ATOM_RED(min_s32, "min.s32", int, "r")
TC_ATOM_RED(min_u32, "min.u32", unsigned int, "r")
TC_ATOM_RED(min_s64, "min.s64", long long, "l")
TC_ATOM_RED(min_u64, "min.u64", unsigned long long, "l")
TC_ATOM_RED(and_b32, "and.b32", unsigned int, "r")
TC_ATOM_RED(and_b64, "and.b64", unsigned long long, "l")
TC_ATOM_RED(or_b32, "or.b32", unsigned int, "r")
TC_ATOM_RED(or_b64, "or.b64", unsigned long long, "l")
TC_ATOM_RED(xor_b32, "xor.b32", unsigned int, "r")
TC_ATOM_RED(xor_b64, "xor.b64", unsigned long long, "l")
TC_ATOM(exch_b32, "exch.b32", unsigned int, "r")
TC_ATOM(exch_b64, "exch.b64", unsigned long long, "l")

// atom_cas_<bits><S>(p, expected, desired): the old value; desired is written
// where it equalled expected, bit for bit.
#define TC_CAS(NAME, INSTR, U, C)                                              \
  template <int S, bool ACQ = false, class T>                                  \
  __device__ __forceinline__ T atom_##NAME(T* p, T expected, T desired) {      \
    U r;                                                                       \
    const U e = bitcast<U>(expected), d = bitcast<U>(desired);                 \
    TC_ATOM_ASM(ACQ, S, ".global." INSTR " %0, [%1], %2, %3;",                 \
                : "=" C(r) : "l"(p), C(e), C(d) : "memory")                    \
    return bitcast<T>(r);                                                      \
  }

TC_CAS(cas_b16, "cas.b16", unsigned short, "h")
TC_CAS(cas_b32, "cas.b32", unsigned int, "r")
TC_CAS(cas_b64, "cas.b64", unsigned long long, "l")

// bfloat16 add: the instruction exists from sm_90; below, a compare-and-swap
// loop computing in float and rounding once, which gives the same result
// (float has more than twice bfloat16's precision, so the double rounding of
// a sum is innocuous).
#if __CUDA_ARCH__ >= 900
TC_ATOM_RED(add_bf16, "add.noftz.bf16", unsigned short, "h")
#else
template <int S, bool ACQ = false, class T>
__device__ __forceinline__ T atom_add_bf16(T* p, T v) {
  T old = ld_relaxed<S>(p);
  unsigned short seen;
  do {
    seen = bitcast<unsigned short>(old);
    const T sum = Num<T>::from_float(Num<T>::to_f(old) + Num<T>::to_f(v));
    old = atom_cas_b16<S, ACQ>(p, old, sum);   // the one that succeeds acquires
  } while (bitcast<unsigned short>(old) != seen);
  return old;
}

template <int S, class T>
__device__ __forceinline__ void red_add_bf16(T* p, T v) {
  atom_add_bf16<S>(p, v);
}
#endif

#undef TC_LD
#undef TC_ATOM_ASM
#undef TC_ATOM_RED
#undef TC_RED
#undef TC_ATOM
#undef TC_CAS

// Private windows (backend/cuda/privatize.py): a block applies an atomic's
// updates to a shared-memory copy of a few array elements, then adds the copy
// into the array once. FN: 0 add, 1 and, 2 or, 3 xor, 4 max, 5 min.
template <int FN, class T>
__device__ __forceinline__ T private_combine(T a, T b) {
  if constexpr (FN == 0) return (T)(a + b);
  else if constexpr (FN == 1) return a & b;
  else if constexpr (FN == 2) return a | b;
  else if constexpr (FN == 3) return a ^ b;
  else if constexpr (FN == 4) return a > b ? a : b;
  else return a < b ? a : b;
}

// One update of a shared-memory element (32-bit types; 64-bit for add).
template <int FN, class T>
__device__ __forceinline__ void private_update(T* p, T v) {
  if constexpr (sizeof(T) == 8) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), bitcast<unsigned long long>(v));
  } else if constexpr (FN >= 4 && (T)-1 < (T)0) {
    int* q = reinterpret_cast<int*>(p);
    if constexpr (FN == 4) atomicMax(q, (int)v); else atomicMin(q, (int)v);
  } else {
    unsigned int* q = reinterpret_cast<unsigned int*>(p);
    const unsigned int u = bitcast<unsigned int>(v);
    if constexpr (FN == 0) atomicAdd(q, u);
    else if constexpr (FN == 1) atomicAnd(q, u);
    else if constexpr (FN == 2) atomicOr(q, u);
    else if constexpr (FN == 3) atomicXor(q, u);
    else if constexpr (FN == 4) atomicMax(q, u);
    else atomicMin(q, u);
  }
}

// The last run of a thread's updates (window index i, combined value v; i < 0: none),
// with every lane of the warp present: when the whole warp updates one element
// (all-equal data), the warp combines its values and one lane updates it.
template <int FN, class T>
__device__ __forceinline__ void private_flush(T* window, long long i, T v) {
  const long long first = __shfl_sync(0xffffffffu, i, 0);
  if (__all_sync(0xffffffffu, i == first && i >= 0)) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      v = private_combine<FN>(v, (T)__shfl_xor_sync(0xffffffffu, v, d));
    }
    if ((threadIdx.x & 31) == 0) private_update<FN>(window + first, v);
  } else if (i >= 0) {
    private_update<FN>(window + i, v);
  }
}

// Thread 0's x in every thread of the block: the result of a one-element
// atomic or ordered load, which thread 0 alone performs (so that every thread
// sees the same value and control flow stays uniform). SLOT names the call
// site (its own shared word); one that runs again (in a loop: REUSED) waits a
// second time before thread 0 may rewrite the slot.
template <class T, int SLOT, bool REUSED>
__device__ __forceinline__ T broadcast0(const T& x) {
  __shared__ __align__(8) unsigned char slot[sizeof(T)];
  if (threadIdx.x == 0) memcpy(slot, &x, sizeof(T));
  __syncthreads();
  T r;
  memcpy(&r, slot, sizeof(T));
  if constexpr (REUSED) __syncthreads();
  return r;
}

}  // namespace tc
