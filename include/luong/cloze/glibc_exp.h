#pragma once
// exp(x) rounded exactly as glibc's exp (2.28 and later) rounds it on x86-64 with FMA and AVX2,
// where glibc runs its __exp_fma variant. numpy's float64 exp calls glibc's per element (without
// AVX-512), and the cloze head reproduces the seed's numpy arithmetic bit for bit; this inline,
// branch-free form of the same computation vectorises, where a call per element cannot.
//
// The algorithm is glibc's (from Arm's optimized-routines): x = k ln2/128 + r, 2^(k/128) from a
// 128-entry table, exp(r) - 1 by a degree-5 polynomial. The fused multiply-adds are where GCC put
// them in glibc's __exp_fma (read off its machine code); tests/glibc_exp_test.cpp checks the result
// against std::exp bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace luong::cloze {

/// tab[2k]: the tail t with 2^(k/128) = H (1 + t); tab[2k + 1]: the bits of H minus k 2^52 / 128.
extern const std::uint64_t kGlibcExpTable[256];

/// True where glibc's exp uses glibc_exp_main below; elsewhere (|x| < 2^-54, |x| >= 512, NaN) call
/// std::exp.
[[gnu::always_inline]] inline bool glibc_exp_is_main_path(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t abstop = static_cast<std::uint32_t>(bits >> 52) & 0x7ff;
  return abstop - 0x3c9u < 0x3fu;  // 2^-54 <= |x| < 2^9
}

/// glibc's exp on its main path (see glibc_exp_is_main_path); meaningless elsewhere.
[[gnu::always_inline]] inline double glibc_exp_main(double x) {
  constexpr double kInvLn2N = 0x1.71547652b82fep7;  // 128 / ln 2
  constexpr double kNegLn2HiN = -0x1.62e42fefa0000p-8;
  constexpr double kNegLn2LoN = -0x1.cf79abc9e3b3ap-47;
  constexpr double kShift = 0x1.8p52;
  constexpr double kC2 = 0x1.ffffffffffdbdp-2, kC3 = 0x1.555555555543cp-3;
  constexpr double kC4 = 0x1.55555cf172b91p-5, kC5 = 0x1.1111167a4d017p-7;
  const double shifted = std::fma(x, kInvLn2N, kShift);
  std::uint64_t ki;
  std::memcpy(&ki, &shifted, sizeof ki);
  const double kd = shifted - kShift;
  const double r = std::fma(kd, kNegLn2LoN, std::fma(kd, kNegLn2HiN, x));
  const std::uint64_t idx = 2 * (ki % 128);
  const std::uint64_t sbits = kGlibcExpTable[idx + 1] + (ki << 45);
  double tail, scale;
  std::memcpy(&tail, &kGlibcExpTable[idx], sizeof tail);
  std::memcpy(&scale, &sbits, sizeof scale);
  const double r2 = r * r;
  const double tmp = std::fma(r2 * r2, std::fma(r, kC5, kC4), std::fma(std::fma(r, kC3, kC2), r2, r + tail));
  return std::fma(scale, tmp, scale);
}

/// Whether std::exp is glibc's FMA variant on this processor (glibc picks it where FMA and AVX2 are
/// usable), so that glibc_exp_main reproduces it.
bool glibc_exp_uses_fma();

}  // namespace luong::cloze
