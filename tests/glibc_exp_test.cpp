#include "luong/cloze/glibc_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

namespace luong::cloze {
namespace {

std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(GlibcExpTest, MainPathIsTheRangeGlibcComputesInline) {
  EXPECT_TRUE(glibc_exp_is_main_path(0x1p-54));
  EXPECT_FALSE(glibc_exp_is_main_path(std::nextafter(0x1p-54, 0.0)));
  EXPECT_TRUE(glibc_exp_is_main_path(-std::nextafter(512.0, 0.0)));
  EXPECT_FALSE(glibc_exp_is_main_path(-512.0));
  EXPECT_FALSE(glibc_exp_is_main_path(0.0));
  EXPECT_FALSE(glibc_exp_is_main_path(-1e9));
  EXPECT_FALSE(glibc_exp_is_main_path(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(glibc_exp_is_main_path(-1.0));
  EXPECT_TRUE(glibc_exp_is_main_path(3.5));
}

// Every main-path argument the cloze softmaxes produce is x - max <= 0; positive ones are checked
// too. Magnitudes are log-uniform over the whole main path, plus a dense run around k ln2 / 128,
// where the table index changes.
TEST(GlibcExpTest, EqualsStdExpBitForBit) {
  if (!glibc_exp_uses_fma()) GTEST_SKIP() << "glibc's exp is not its FMA variant on this processor";
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log_magnitude(std::log(0x1p-54), std::log(511.99));
  long checked = 0, different = 0;
  double first_different = 0;
  const auto check = [&](double x) {
    if (!glibc_exp_is_main_path(x)) return;
    ++checked;
    if (bits_of(glibc_exp_main(x)) != bits_of(std::exp(x))) {
      if (different++ == 0) first_different = x;
    }
  };
  for (int i = 0; i < 4'000'000; ++i) {
    const double magnitude = std::exp(log_magnitude(rng));
    check(-magnitude);
    if (i % 4 == 0) check(magnitude);
  }
  for (int k = -128 * 40; k <= 128 * 2; ++k) {
    double x = k * 0.6931471805599453 / 128;
    for (int step = 0; step < 64; ++step) {
      check(x);
      x = std::nextafter(x, 1.0);
    }
  }
  std::printf("glibc_exp_main against std::exp: %ld arguments, %ld different\n", checked, different);
  EXPECT_GT(checked, 4'500'000);
  EXPECT_EQ(different, 0) << "first at x = " << first_different;
}

}  // namespace
}  // namespace luong::cloze
