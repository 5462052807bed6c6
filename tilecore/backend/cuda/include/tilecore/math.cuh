// Element-wise ops of the IR (unary, binary, compare). Arithmetic runs in
// Num<T>::C and rounds once to T; integer arithmetic wraps (computed in the
// unsigned type Num<T>::W); floordiv/mod follow Python (as NumPy does).
#pragma once

namespace tc {

__device__ __forceinline__ float m_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ double m_fmod(double x, double y) { return fmod(x, y); }
__device__ __forceinline__ float m_copysign(float x, float y) { return copysignf(x, y); }
__device__ __forceinline__ double m_copysign(double x, double y) { return copysign(x, y); }

#define TC_FLOAT_FN(NAME, FEXPR, DEXPR)                                        \
  __device__ __forceinline__ float m_##NAME(float x) { return FEXPR; }         \
  __device__ __forceinline__ double m_##NAME(double x) { return DEXPR; }       \
  template <class T> __device__ __forceinline__ T op_##NAME(T x) {             \
    return Num<T>::down(m_##NAME(Num<T>::up(x)));                              \
  }
TC_FLOAT_FN(exp, expf(x), exp(x))
TC_FLOAT_FN(exp2, exp2f(x), exp2(x))
TC_FLOAT_FN(log, logf(x), log(x))
TC_FLOAT_FN(log2, log2f(x), log2(x))
TC_FLOAT_FN(sqrt, sqrtf(x), sqrt(x))
TC_FLOAT_FN(rsqrt, rsqrtf(x), rsqrt(x))  // CUDA: at most 2 ulp (float), 1 ulp (double)
TC_FLOAT_FN(sin, sinf(x), sin(x))
TC_FLOAT_FN(cos, cosf(x), cos(x))
TC_FLOAT_FN(tan, tanf(x), tan(x))
TC_FLOAT_FN(sinh, sinhf(x), sinh(x))
TC_FLOAT_FN(cosh, coshf(x), cosh(x))
TC_FLOAT_FN(tanh, tanhf(x), tanh(x))
TC_FLOAT_FN(floor, floorf(x), floor(x))
TC_FLOAT_FN(ceil, ceilf(x), ceil(x))
#undef TC_FLOAT_FN

template <class T> __device__ __forceinline__ bool op_isnan(T x) {
  const auto c = Num<T>::up(x);
  return c != c;
}

template <class T> __device__ __forceinline__ T op_neg(T x) {
  if constexpr (Num<T>::kind == kFloat) return Num<T>::down(-Num<T>::up(x));
  else return (T)(0u - (typename Num<T>::W)x);
}

template <class T> __device__ __forceinline__ T op_invert(T x) {
  if constexpr (Num<T>::kind == kBool) return !x;
  else return (T)(~x);
}

// Integer abs that maps the minimum to itself (as PTX's abs.s32/abs.s64 do),
// 8- and 16-bit values sign-extended to 32 bits and the result truncated, so
// abs(int16(-32768)) == -32768 as in NumPy. Measured on the H100 (NVRTC 13.0):
// with abs.s16, or the C++ forms x < 0 ? -x : x and (x ^ m) - m in 16 bits, the
// compiled `0 >= abs(x)` of -32768 was false (found by the fuzzer, seed 9811).
// 32-bit values through abs.s64 and a truncation: ptxas took abs.s32's result for
// non-negative and dropped the `>= 0` half of a gather's bounds test, so abs(INT_MIN)
// read 2^31 elements before the array (H200, NVRTC 13.0; the fuzzer's seed 3900037).
__device__ __forceinline__ int iabs(int x) {
  long long r;
  asm("abs.s64 %0, %1;" : "=l"(r) : "l"((long long)x));
  return (int)r;
}
__device__ __forceinline__ short iabs(short x) { return (short)iabs((int)x); }
__device__ __forceinline__ signed char iabs(signed char x) { return (signed char)iabs((int)x); }
// 64-bit values in 32-bit halves, (x ^ m) - m with a borrow (m: x's sign in every
// bit): with abs.s64, ptxas took the result for non-negative in the same way and
// dropped the gather's test of abs(INT64_MIN) (H200, NVRTC 13.0).
__device__ __forceinline__ long long iabs(long long x) {
  long long r;
  asm("{\n\t.reg .b32 lo, hi, m;\n\t"
      "mov.b64 {lo, hi}, %1;\n\t"
      "shr.s32 m, hi, 31;\n\t"
      "xor.b32 lo, lo, m;\n\t"
      "xor.b32 hi, hi, m;\n\t"
      "sub.cc.u32 lo, lo, m;\n\t"
      "subc.u32 hi, hi, m;\n\t"
      "mov.b64 %0, {lo, hi};\n\t}"
      : "=l"(r) : "l"(x));
  return r;
}

template <class T> __device__ __forceinline__ T op_abs(T x) {
  if constexpr (Num<T>::kind == kFloat) {
    const auto c = Num<T>::up(x);
    return Num<T>::down(c < 0 ? -c : (c == 0 ? c * c : c));  // abs(-0.0) == +0.0
  } else if constexpr (Num<T>::kind == kSigned) {
    return iabs(x);
  } else {
    return x;
  }
}

#define TC_WRAP_OP(NAME, OP)                                                   \
  template <class T> __device__ __forceinline__ T op_##NAME(T a, T b) {        \
    if constexpr (Num<T>::kind == kFloat)                                      \
      return Num<T>::down(Num<T>::up(a) OP Num<T>::up(b));                     \
    else                                                                       \
      return (T)((typename Num<T>::W)a OP (typename Num<T>::W)b);              \
  }
TC_WRAP_OP(add, +)
TC_WRAP_OP(sub, -)
TC_WRAP_OP(mul, *)
#undef TC_WRAP_OP

template <class T> __device__ __forceinline__ T op_truediv(T a, T b) {
  return Num<T>::down(Num<T>::up(a) / Num<T>::up(b));
}

// Division of many values by one divisor (a broadcast scalar), IEEE
// round-to-nearest like op_truediv but cheaper per element (the generated code
// computes quick() for a chunk of a thread's elements and redoes the chunk with
// exact() only if some quotient failed its check: no branch per element):
// y = RN(1/b) once, then q = RN(a*y) and one FMA correction,
// q' = RN(q + (a - b*q)*y), which is RN(a/b) by Markstein's theorem (y within
// half an ulp of 1/b, q within one ulp of a/b) when nothing overflows or
// underflows. For 2^-20 <= |b| <= 2^20 one check of the result suffices,
// |q'| >= 2^-80 (false for NaN): then |a| >= 2^-100, so a - b*q is exact and
// q is normal; an infinite dividend, or a product a*y that overflows, makes q'
// NaN; and a q' that overflows past FLT_MAX is the correct infinity (a/b is
// never within 2^-49 of a rounding boundary). Zeros, tiny quotients, NaN and
// other divisors take IEEE division. Only for types computed in float32
// (float, half, bfloat16).
template <class W> struct ComputedInFloat { static constexpr bool value = false; };
template <> struct ComputedInFloat<float> { static constexpr bool value = true; };

template <class T>
struct DivBy {
  using W = decltype(Num<T>::up(T()));
  static_assert(ComputedInFloat<W>::value, "DivBy is for types computed in float32");
  float b, y;
  bool fast;  // the divisor allows the quick form
  __device__ explicit DivBy(T divisor) : b(Num<T>::up(divisor)) {
    const float m = fabsf(b);
    fast = m >= 0x1p-20f && m <= 0x1p20f;
    y = fast ? __frcp_rn(b) : 1.0f;
  }
  // RN(a/b) when `ok` stays true; clears `ok` when it may not be (given `fast`).
  __device__ __forceinline__ T quick(T a, bool& ok) const {
    const float x = Num<T>::up(a);
    const float q = __fmul_rn(x, y);
    const float r = __fmaf_rn(__fmaf_rn(-q, b, x), y, q);
    ok &= fabsf(r) >= 0x1p-80f;
    return Num<T>::down(r);
  }
  __device__ __forceinline__ T exact(T a) const { return Num<T>::down(__fdiv_rn(Num<T>::up(a), b)); }
};

// float32 division with an explicit rounding mode (truediv's rounding_mode): the
// exact directed roundings and the hardware's FULL (2 ulp) and APPROX divisions,
// each also in a flush-subnormals-to-zero form.
#define TC_DIV(NAME, INSTR)                                                    \
  __device__ __forceinline__ float NAME(float a, float b) {                    \
    float r;                                                                   \
    asm(INSTR " %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));                      \
    return r;                                                                  \
  }
TC_DIV(div_rn_ftz, "div.rn.ftz.f32")
TC_DIV(div_rz, "div.rz.f32")
TC_DIV(div_rz_ftz, "div.rz.ftz.f32")
TC_DIV(div_rm, "div.rm.f32")
TC_DIV(div_rm_ftz, "div.rm.ftz.f32")
TC_DIV(div_rp, "div.rp.f32")
TC_DIV(div_rp_ftz, "div.rp.ftz.f32")
TC_DIV(div_full, "div.full.f32")
TC_DIV(div_full_ftz, "div.full.ftz.f32")
TC_DIV(div_approx, "div.approx.f32")
TC_DIV(div_approx_ftz, "div.approx.ftz.f32")
#undef TC_DIV

// exp with rounding_mode=APPROX: the hardware's ex2 approximation.
__device__ __forceinline__ float op_exp_approx(float x) { return __expf(x); }

// Python's float divmod, as NumPy computes it (npy_divmod).
template <class F> __device__ __forceinline__ F py_fmod(F a, F b, F* div) {
  F mod = m_fmod(a, b);
  if (b == (F)0) {
    *div = a / b;
    return mod;
  }
  F d = (a - mod) / b;
  if (mod != (F)0) {
    if ((b < (F)0) != (mod < (F)0)) {
      mod += b;
      d -= (F)1;
    }
  } else {
    mod = m_copysign((F)0, b);
  }
  if (d != (F)0) {
    F fd = m_floor(d);
    if (d - fd > (F)0.5) fd += (F)1;
    d = fd;
  } else {
    d = m_copysign((F)0, a / b);
  }
  *div = d;
  return mod;
}

template <class T> __device__ __forceinline__ T op_floordiv(T a, T b) {
  if constexpr (Num<T>::kind == kFloat) {
    typename Num<T>::C d;
    py_fmod(Num<T>::up(a), Num<T>::up(b), &d);
    return Num<T>::down(d);
  } else if constexpr (Num<T>::kind == kSigned) {
    if (b == (T)0) return (T)0;        // undefined in C++ (NVRTC may build on it): 0, as
                                       // the interpreter gives
    if (b == (T)-1) return op_neg(a);  // min / -1 overflows in C++ (undefined); it wraps
    T q = (T)(a / b);
    if ((T)(a % b) != 0 && ((a < 0) != (b < 0))) q = (T)(q - 1);
    return q;
  } else {
    return b == (T)0 ? (T)0 : (T)(a / b);
  }
}

template <class T> __device__ __forceinline__ T op_mod(T a, T b) {
  if constexpr (Num<T>::kind == kFloat) {
    typename Num<T>::C d;
    return Num<T>::down(py_fmod(Num<T>::up(a), Num<T>::up(b), &d));
  } else if constexpr (Num<T>::kind == kSigned) {
    // min % -1 is undefined in C++ (the remainder is 0), and so is % 0 (0, as the interpreter)
    if (b == (T)-1 || b == (T)0) return (T)0;
    T r = (T)(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
    return r;
  } else {
    return b == (T)0 ? (T)0 : (T)(a % b);
  }
}

__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double m_atan2(double a, double b) { return atan2(a, b); }

template <class T> __device__ __forceinline__ T op_pow(T a, T b) {
  if constexpr (Num<T>::kind == kFloat) {
    return Num<T>::down(m_pow(Num<T>::up(a), Num<T>::up(b)));
  } else {  // exponent >= 0; wraps like NumPy's integer power
    typename Num<T>::W r = 1, base = (typename Num<T>::W)a;
    for (unsigned long long e = (unsigned long long)b; e != 0; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return (T)r;
  }
}

template <class T> __device__ __forceinline__ T op_atan2(T a, T b) {
  return Num<T>::down(m_atan2(Num<T>::up(a), Num<T>::up(b)));
}

// minimum/maximum in the compute type; NaN propagates (the first NaN wins).
template <class C> __device__ __forceinline__ C c_min(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return b < a ? b : a;
}
template <class C> __device__ __forceinline__ C c_max(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? b : a;
}
#if __CUDA_ARCH__ >= 800
// One instruction each on sm_80+: max/min that return NaN when either input is NaN.
__device__ __forceinline__ float c_max(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float c_min(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
#endif
template <class T> __device__ __forceinline__ T op_minimum(T a, T b) {
  return Num<T>::down(c_min(Num<T>::up(a), Num<T>::up(b)));
}
template <class T> __device__ __forceinline__ T op_maximum(T a, T b) {
  return Num<T>::down(c_max(Num<T>::up(a), Num<T>::up(b)));
}

template <class T> __device__ __forceinline__ T op_bitand(T a, T b) { return (T)(a & b); }
template <class T> __device__ __forceinline__ T op_bitor(T a, T b) { return (T)(a | b); }
template <class T> __device__ __forceinline__ T op_bitxor(T a, T b) { return (T)(a ^ b); }
// Shift counts outside [0, bits) give what the interpreter gives: 0 for lshift
// and unsigned rshift, the sign's fill for signed rshift. C++ leaves them
// undefined, and NVRTC's optimizer then drops code that depends on them (a
// branch's stores, found by the fuzzer); a count known to be in range costs nothing.
template <class T> __device__ __forceinline__ bool shift_in_range(T b) {
  return !(b < (T)0) && (unsigned long long)b < 8ULL * sizeof(T);
}
template <class T> __device__ __forceinline__ T op_lshift(T a, T b) {
  return shift_in_range(b) ? (T)((typename Num<T>::W)a << b) : (T)0;
}
template <class T> __device__ __forceinline__ T op_rshift(T a, T b) {
  if (shift_in_range(b)) return (T)(a >> b);
  return a < (T)0 ? (T)-1 : (T)0;
}

// c ? a : b that NVVM cannot fold with the comparison that made c into max/min (which
// order -0.0 below +0.0 where the select keeps the operand it names): one selp.
__device__ __forceinline__ float select_exact(bool c, float a, float b) {
  float r;
  asm("{ .reg .pred p; setp.ne.b32 p, %1, 0; selp.f32 %0, %2, %3, p; }"
      : "=f"(r) : "r"((int)c), "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double select_exact(bool c, double a, double b) {
  double r;
  asm("{ .reg .pred p; setp.ne.b32 p, %1, 0; selp.f64 %0, %2, %3, p; }"
      : "=d"(r) : "r"((int)c), "d"(a), "d"(b));
  return r;
}

#define TC_CMP_OP(NAME, OP)                                                    \
  template <class T> __device__ __forceinline__ bool op_##NAME(T a, T b) {     \
    return Num<T>::up(a) OP Num<T>::up(b);                                     \
  }
TC_CMP_OP(eq, ==)
TC_CMP_OP(ne, !=)
TC_CMP_OP(lt, <)
TC_CMP_OP(le, <=)
TC_CMP_OP(gt, >)
TC_CMP_OP(ge, >=)
#undef TC_CMP_OP

}  // namespace tc
