#pragma once
// Branch-free exp, sigmoid and tanh that GCC vectorises inside loops (libm's are scalar calls).
// Used by the hand-written kernels: the fused GRU gates and loss, the row exponentials.
#include <cstdint>
#include <cstring>

namespace luong {

// exp(x): range reduction x = k ln2 + r, |r| <= ln2/2, then a degree-13 Taylor polynomial
// (truncation < 1e-17 relative) and 2^k built in the exponent bits. Within 2 ulp of std::exp.
[[gnu::always_inline]] inline double vector_exp(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 0.6931471803691238;
  constexpr double kLn2Lo = 1.9082149292705877e-10;
  constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double clamped = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
  const double shifted = clamped * kLog2e + kShifter;
  const double k = shifted - kShifter;
  const double r = (clamped - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  std::int64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  // The low 32 mantissa bits of `shifted` hold k (two's complement), since 2^51 = 0 mod 2^32.
  const std::int64_t k_int = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
  // Unsigned: for NaN or infinite x, k_int + 1023 may be negative, and shifting it would be undefined.
  const std::uint64_t exponent = static_cast<std::uint64_t>(k_int + 1023) << 52;
  double scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return x < -708.0 ? 0.0 : p * scale;
}

namespace detail {
// e^x for x in [-87, 88] (the callers clamp; x itself only decides the result below -87): the
// range reduction and 2^k construction of vector_exp, with Cephes' degree-5 minimax polynomial for
// e^r - 1 - r.
[[gnu::always_inline]] inline float expf_clamped(float x, float clamped) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = clamped * kLog2e + kShifter;
  const float k = shifted - kShifter;
  const float r = (clamped - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // shifted = 1.5 * 2^23 + k, so its bits less those of 1.5 * 2^23 are k (two's complement): no
  // float -> int conversion, and unsigned arithmetic, both defined for a NaN x.
  std::uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const std::uint32_t exponent = (bits - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return x < -87.0f ? 0.0f : p * scale;
}
}  // namespace detail

// expf(x) in single precision, within 2 ulp of std::exp in float; for loops over float data where
// double (vector_exp) would halve the vector width. Meant for x <= 88 (e^88 above).
[[gnu::always_inline]] inline float vector_expf(float x) {
  return detail::expf_clamped(x, x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x));
}

// vector_expf(x), the same bits, for x <= 88 only (a softmax's logits less their row's maximum,
// tanh's -2|x|: never above 0). Without the clamp above, GCC sees that the one below only feeds a
// result that x < -87 replaces by 0, and drops both: 22 instructions a vector of 16 where
// vector_expf's selects made 32, and the softmax's exponentials take 0.78 of the time.
[[gnu::always_inline]] inline float vector_expf_below_88(float x) {
  return detail::expf_clamped(x, x < -87.0f ? -87.0f : x);
}

/// 1 / (1 + e^-x): in double through vector_exp for double x; in single precision through
/// vector_expf for float x (within 4 ulp, where double's conversions tripled a GRU step's gate time).
/// Below x = -87 the float result is at most e^-87, not e^x.
template <typename T>
[[gnu::always_inline]] inline T vector_sigmoid(T x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return static_cast<T>(1.0f / (1.0f + vector_expf(-static_cast<float>(x))));
  } else {
    return static_cast<T>(1.0 / (1.0 + vector_exp(-static_cast<double>(x))));
  }
}

/// tanh x in single precision: below |x| = 0.625, where 1 - e^-2|x| would cancel, Cephes' odd
/// polynomial x + x^3 P(x^2); above, (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x. Within 4 ulp
/// of std::tanh; both branches are computed and one selected, so loops vectorise.
[[gnu::always_inline]] inline float vector_tanhf(float x) {
  const float a = __builtin_fabsf(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  const float small = p * s * x + x;
  const float e = vector_expf_below_88(-2.0f * a);  // -2|x| <= 0
  const float large = __builtin_copysignf((1.0f - e) / (1.0f + e), x);
  return a < 0.625f ? small : large;
}

/// tanh x: vector_tanhf for float x; for double x (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x,
/// absolute error ~1e-16.
template <typename T>
[[gnu::always_inline]] inline T vector_tanh(T x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return static_cast<T>(vector_tanhf(static_cast<float>(x)));
  } else {
    const double a = __builtin_fabs(static_cast<double>(x));
    const double e = vector_exp(-2.0 * a);
    const double t = (1.0 - e) / (1.0 + e);
    return static_cast<T>(__builtin_copysign(t, static_cast<double>(x)));
  }
}

}  // namespace luong
