#include "luong/util/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace luong {
namespace {

// Every x the gates see: a dense sweep of [-100, 100], the neighbourhood of the tanh polynomial's
// edge (0.625) and of the exponentials' clamps, and tiny values, where tanh's 1 - e^-2|x| would cancel.
std::vector<float> sweep() {
  std::vector<float> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(static_cast<float>(i) * 5e-4f);
  for (const float edge : {0.625f, 43.5f, 44.0f, 87.0f, 88.0f}) {
    float below = edge, above = edge;
    for (int i = 0; i < 64; ++i) {
      below = std::nextafter(below, 0.0f);
      above = std::nextafter(above, 200.0f);
      for (const float x : {below, above, -below, -above}) xs.push_back(x);
    }
  }
  for (float tiny = 1e-30f; tiny < 1e-2f; tiny *= 3.7f) xs.insert(xs.end(), {tiny, -tiny});
  return xs;
}

// |got - want| in units in the last place of want rounded to float.
double ulps(float got, double want) {
  const float rounded = static_cast<float>(want);
  const double ulp = static_cast<double>(std::nextafter(std::fabs(rounded), std::numeric_limits<float>::infinity())) -
                     std::fabs(rounded);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// The float gates (in single precision, no double conversions) within 4 ulp of the double-precision
// functions wherever the result is a normal float; below x = -87 sigmoid stops at e^-87.
TEST(VectorMathTest, FloatSigmoidAndTanhWithinFourUlps) {
  double worst_sigmoid = 0, worst_tanh = 0;
  for (const float x : sweep()) {
    const double exact_sigmoid = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    const double exact_tanh = std::tanh(static_cast<double>(x));
    const float sigmoid = vector_sigmoid(x), tanh = vector_tanh(x);
    if (x > -87.0f) {
      worst_sigmoid = std::max(worst_sigmoid, ulps(sigmoid, exact_sigmoid));
    } else {
      EXPECT_GE(sigmoid, 0.0f) << x;
      EXPECT_LE(sigmoid, std::exp(-87.0f)) << x;
    }
    if (std::fabs(exact_tanh) >= std::numeric_limits<float>::min()) worst_tanh = std::max(worst_tanh, ulps(tanh, exact_tanh));
    ASSERT_EQ(std::signbit(tanh), std::signbit(x)) << x;
    ASSERT_LE(std::fabs(tanh), 1.0f) << x;
  }
  std::printf("  worst: sigmoid %.2f ulp, tanh %.2f ulp\n", worst_sigmoid, worst_tanh);
  EXPECT_LE(worst_sigmoid, 4.0);
  EXPECT_LE(worst_tanh, 4.0);
  EXPECT_GT(worst_tanh, 0.0) << "the reference is double: float cannot match it everywhere";
  EXPECT_EQ(vector_tanh(0.0f), 0.0f);
  EXPECT_EQ(vector_tanh(1e-30f), 1e-30f) << "tanh x = x to float's precision there";
  EXPECT_TRUE(std::isnan(vector_tanh(std::nanf(""))));
  EXPECT_TRUE(std::isnan(vector_sigmoid(std::nanf(""))));
}

// Double stays double (the fused kernels' tests hold them to the module path to 1e-12).
TEST(VectorMathTest, DoubleSigmoidAndTanhToDoublePrecision) {
  double worst_sigmoid = 0, worst_tanh = 0;
  for (const float xf : sweep()) {
    const double x = static_cast<double>(xf) * (1 + 1e-9);  // off float's grid
    if (x < -700) continue;
    worst_sigmoid = std::max(worst_sigmoid, std::fabs(vector_sigmoid(x) - 1.0 / (1.0 + std::exp(-x))) /
                                                (1.0 / (1.0 + std::exp(-x))));
    worst_tanh = std::max(worst_tanh, std::fabs(vector_tanh(x) - std::tanh(x)));
  }
  std::printf("  worst: sigmoid %.2e relative, tanh %.2e absolute\n", worst_sigmoid, worst_tanh);
  EXPECT_LE(worst_sigmoid, 1e-15);
  EXPECT_LE(worst_tanh, 1e-15);
}

// The softmax's exponential without the upper clamp is vector_expf to the bit wherever it may be
// called (x <= 88), the clamp's edge and underflow (below -87: 0) included.
TEST(VectorMathTest, ExpBelow88IsVectorExpfToTheBit) {
  int compared = 0;
  for (const float x : sweep()) {
    if (x > 88.0f) continue;
    const float want = vector_expf(x), got = vector_expf_below_88(x);
    ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0) << x;
    ++compared;
  }
  EXPECT_GT(compared, 200000);
  EXPECT_EQ(vector_expf_below_88(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vector_expf_below_88(-87.5f), 0.0f);
  EXPECT_EQ(vector_expf_below_88(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(vector_expf_below_88(std::nanf(""))));
}

}  // namespace
}  // namespace luong
