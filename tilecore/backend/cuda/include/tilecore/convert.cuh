// Conversions: astype (tc::cvt) and the storage-only float formats, with the
// rounding and overflow behaviour of ml_dtypes (which the interpreter uses):
//   float8_e4m3fn: round to nearest even; overflow, inf and NaN -> NaN (sign kept)
//   float8_e5m2:   round to nearest even; overflow -> inf; NaN -> NaN (sign kept)
//   float8_e8m0fnu: power of two, mantissa >= 1.5 rounds up; <= 0, inf, NaN,
//                  overflow -> NaN; float32 subnormals above 2^-127 -> 2^-126
//   float4_e2m1fn: round to nearest even, saturates to +-6; NaN -> -0 (+NaN) / +0
//   tfloat32:      float32 rounded to nearest even at 10 mantissa bits
#pragma once

namespace tc {
namespace detail {

// Round a value (exact in double) to a small IEEE-like format with EB
// exponent bits and MB mantissa bits, nearest even; returns the unsigned
// magnitude code (may exceed the largest finite code; callers clamp).
template <int EB, int MB>
__device__ inline unsigned int round_minifloat(double a) {
  const unsigned long long bits = (unsigned long long)__double_as_longlong(a);
  const int exp = (int)(bits >> 52);
  if (exp == 0) return 0;  // double subnormals are far below every target format
  const unsigned long long sig = (bits & 0xFFFFFFFFFFFFFULL) | (1ULL << 52);
  const int bias = (1 << (EB - 1)) - 1;
  const int te = exp - 1023 + bias;  // target exponent field
  int shift = 52 - MB;
  unsigned long long base = 0;
  if (te >= 1) {
    if (te > (1 << EB)) return 0xFFFFu;  // certainly overflows
    base = (unsigned long long)(te - 1) << MB;  // implicit bit adds the last 1
  } else {
    shift += 1 - te;
    if (shift >= 54) return 0;
  }
  unsigned long long q = sig >> shift;
  const unsigned long long rem = sig & ((1ULL << shift) - 1);
  const unsigned long long half = 1ULL << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q += 1;
  return (unsigned int)(base + q);
}

template <int EB, int MB>
__device__ inline float decode_minifloat(unsigned int code) {
  const int bias = (1 << (EB - 1)) - 1;
  const unsigned int e = code >> MB, m = code & ((1u << MB) - 1);
  if (e == 0) return (float)m * __int_as_float((127 - bias - MB + 1) << 23);
  return __int_as_float((int)(((e - bias + 127) << 23) | (m << (23 - MB))));
}

// x rounded to float with round-to-odd: truncate, then set the last bit when
// bits were dropped. A second rounding of the result to a format at least two
// bits narrower than float (tfloat32, the float8 formats) is then the single
// correct rounding of x; a plain (float)x first would round twice.
__device__ inline float f32_round_odd(float f, bool inexact) {
  return inexact ? __int_as_float(__float_as_int(f) | 1) : f;
}
__device__ inline float to_f32_odd(double x) {
  const float f = __double2float_rz(x);
  return f32_round_odd(f, x == x && (double)f != x);
}
__device__ inline float to_f32_odd(long long x) {
  const float f = __ll2float_rz(x);
  return f32_round_odd(f, (long long)f != x);
}
__device__ inline float to_f32_odd(unsigned long long x) {
  const float f = __ull2float_rz(x);
  return f32_round_odd(f, (unsigned long long)f != x);
}

}  // namespace detail

template <> struct Num<f8e4m3> : FloatNum<f8e4m3, float> {
  __device__ static float to_f(f8e4m3 x) {
    const unsigned int s = x.bits & 0x80u, c = x.bits & 0x7Fu;
    const float a = c == 0x7Fu ? __int_as_float(0x7fc00000) : detail::decode_minifloat<4, 3>(c);
    return s ? -a : a;
  }
  __device__ static f8e4m3 from_float(double x) {
    const unsigned char s = (__double_as_longlong(x) < 0) ? 0x80 : 0;
    const double a = fabs(x);
    unsigned int c = (a != a || a > 1e300) ? 0x7Fu : detail::round_minifloat<4, 3>(a);
    if (c > 0x7Fu) c = 0x7Fu;
    return f8e4m3{(unsigned char)(s | c)};
  }
  __device__ static f8e4m3 from_float(float x) { return from_float((double)x); }
  __device__ static f8e4m3 from_i64(long long x) { return from_float((double)x); }
  __device__ static f8e4m3 from_u64(unsigned long long x) { return from_float((double)x); }
};

template <> struct Num<f8e5m2> : FloatNum<f8e5m2, float> {
  __device__ static float to_f(f8e5m2 x) {
    const unsigned int s = x.bits & 0x80u, c = x.bits & 0x7Fu;
    float a;
    if (c >= 0x7Cu) a = c == 0x7Cu ? __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);
    else a = detail::decode_minifloat<5, 2>(c);
    return s ? -a : a;
  }
  __device__ static f8e5m2 from_float(double x) {
    const unsigned char s = (__double_as_longlong(x) < 0) ? 0x80 : 0;
    const double a = fabs(x);
    unsigned int c;
    if (a != a) c = 0x7Eu;
    else if (a > 1e300) c = 0x7Cu;
    else c = detail::round_minifloat<5, 2>(a);
    if (c > 0x7Cu && a == a) c = 0x7Cu;
    return f8e5m2{(unsigned char)(s | c)};
  }
  __device__ static f8e5m2 from_float(float x) { return from_float((double)x); }
  __device__ static f8e5m2 from_i64(long long x) { return from_float((double)x); }
  __device__ static f8e5m2 from_u64(unsigned long long x) { return from_float((double)x); }
};

template <> struct Num<f8e8m0> : FloatNum<f8e8m0, float> {
  __device__ static float to_f(f8e8m0 x) {
    if (x.bits == 0xFF) return __int_as_float(0x7fc00000);
    if (x.bits == 0) return __int_as_float(0x00400000);  // 2^-127
    return __int_as_float((int)x.bits << 23);
  }
  __device__ static f8e8m0 from_float(float x) {
    const unsigned int b = (unsigned int)__float_as_int(x);
    if (!(x > 0.0f) || (b >> 23) >= 0xFFu) return f8e8m0{0xFF};
    const unsigned int e = b >> 23, m = b & 0x7FFFFFu;
    if (e == 0) return f8e8m0{(unsigned char)(m > 0x400000u ? 1 : 0)};
    const unsigned int c = e + (m >= 0x400000u ? 1u : 0u);
    return f8e8m0{(unsigned char)(c >= 0xFFu ? 0xFFu : c)};
  }
  __device__ static f8e8m0 from_float(double x) { return from_float(detail::to_f32_odd(x)); }
  __device__ static f8e8m0 from_i64(long long x) { return from_float(detail::to_f32_odd(x)); }
  __device__ static f8e8m0 from_u64(unsigned long long x) {
    return from_float(detail::to_f32_odd(x));
  }
};

template <> struct Num<f4e2m1> : FloatNum<f4e2m1, float> {
  __device__ static float to_f(f4e2m1 x) {
    const unsigned int c = x.bits & 7u;
    const float a = c < 4 ? 0.5f * (float)c : (c < 6 ? (float)(c - 2) : (c == 6 ? 4.0f : 6.0f));
    return (x.bits & 8u) ? -a : a;
  }
  __device__ static f4e2m1 from_float(double x) {
    const bool neg = __double_as_longlong(x) < 0;
    if (x != x) return f4e2m1{(unsigned char)(neg ? 0 : 8)};
    const double a = fabs(x);
    unsigned int c = a <= 0.25 ? 0 : a < 0.75 ? 1 : a <= 1.25 ? 2 : a < 1.75 ? 3
                   : a <= 2.5 ? 4 : a < 3.5 ? 5 : a <= 5.0 ? 6 : 7;
    return f4e2m1{(unsigned char)((neg ? 8u : 0u) | c)};
  }
  __device__ static f4e2m1 from_float(float x) { return from_float((double)x); }
  __device__ static f4e2m1 from_i64(long long x) { return from_float((double)x); }
  __device__ static f4e2m1 from_u64(unsigned long long x) { return from_float((double)x); }
};

template <> struct Num<tf32> : FloatNum<tf32, float> {
  __device__ static float to_f(tf32 x) { return x.v; }
  __device__ static tf32 from_float(float x) {
    if (x != x) return tf32{x};
    unsigned int b = (unsigned int)__float_as_int(x);
    b += 0xFFFu + ((b >> 13) & 1u);
    return tf32{__int_as_float((int)(b & 0xFFFFE000u))};
  }
  __device__ static tf32 from_float(double x) { return from_float(detail::to_f32_odd(x)); }
  __device__ static tf32 from_i64(long long x) { return from_float(detail::to_f32_odd(x)); }
  __device__ static tf32 from_u64(unsigned long long x) {
    return from_float(detail::to_f32_odd(x));
  }
};

// astype: element-wise conversion with the rules of the IR's astype op.
template <class To, class From>
__device__ __forceinline__ To cvt(From x) {
  if constexpr (Num<From>::kind == kBool) return Num<To>::from_i64(x ? 1 : 0);
  else if constexpr (Num<To>::kind == kBool) return Num<From>::nonzero(x);
  else if constexpr (Num<From>::kind == kSigned) return Num<To>::from_i64((long long)x);
  else if constexpr (Num<From>::kind == kUnsigned) return Num<To>::from_u64((unsigned long long)x);
  else return Num<To>::from_float(Num<From>::to_f(x));
}

// bitcast: the same bytes read as another type of the same size.
template <class To, class From>
__device__ __forceinline__ To bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  To y;
  memcpy(&y, &x, sizeof(To));
  return y;
}

}  // namespace tc
