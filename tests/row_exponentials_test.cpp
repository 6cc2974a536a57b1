#include "luong/models/row_exponentials.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace luong::models {
namespace {

// Rows of random logits with the maximum placed twice (the first copy is the argmax), widths that
// leave remainders after the vector lanes, and a row stride wider than the row.
// Each exponential within a few ulp of std::exp of the same rounded difference x - max; the sums
// (in lanes, then across them) within summation rounding of the exact sum. Without an argmax
// wanted, the maximum comes from another loop (no column tracking): every output the same to the bit.
template <typename T>
void check_against_reference(double element_tolerance, double sum_tolerance) {
  std::mt19937 rng(7);
  std::normal_distribution<T> normal(0, 4);
  for (const int64_t cols : {1, 3, 8, 13, 31, 32, 33, 98, 4642}) {
    const int64_t rows = 5, stride = cols + 3;
    std::vector<T> x(static_cast<std::size_t>(rows * stride));
    for (auto& v : x) v = normal(rng);
    for (int64_t r = 0; r < rows; ++r) {
      T* row = x.data() + r * stride;
      const int64_t first = (r * 7) % cols, second = (r * 13 + 5) % cols;
      row[std::min(first, second)] = row[std::max(first, second)] = T(30);  // ties: the first wins
    }
    const std::vector<T> original = x;
    std::vector<T> maxima(rows), sums(rows);
    std::vector<int64_t> argmax(rows);
    exponentiate_rows(x.data(), rows, cols, stride, maxima.data(), sums.data(), argmax.data());
    std::vector<T> x_plain = original, maxima_plain(rows), sums_plain(rows);
    exponentiate_rows(x_plain.data(), rows, cols, stride, maxima_plain.data(), sums_plain.data(), nullptr);
    EXPECT_EQ(x_plain, x) << "cols " << cols;
    EXPECT_EQ(maxima_plain, maxima) << "cols " << cols;
    EXPECT_EQ(sums_plain, sums) << "cols " << cols;
    double worst = 0, worst_sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = original.data() + r * stride;
      int64_t best = 0;
      for (int64_t c = 1; c < cols; ++c) best = in[c] > in[best] ? c : best;
      EXPECT_EQ(argmax[r], best) << "cols " << cols << " row " << r;
      EXPECT_EQ(maxima[r], in[best]);
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double expected = std::exp(static_cast<double>(static_cast<T>(in[c] - in[best])));
        worst = std::max(worst, std::fabs(x[r * stride + c] - expected) / expected);
        sum += expected;
      }
      worst_sum = std::max(worst_sum, std::fabs(sums[r] - sum) / sum);
      for (int64_t c = cols; c < stride; ++c) EXPECT_EQ(x[r * stride + c], in[c]) << "wrote past the row";
    }
    std::printf("%s cols %4ld: max relative error %.3g (bound %.0e), of the sums %.3g (bound %.0e)\n",
                sizeof(T) == 4 ? "float " : "double", static_cast<long>(cols), worst, element_tolerance, worst_sum,
                sum_tolerance);
    EXPECT_LT(worst, element_tolerance) << "cols " << cols;
    EXPECT_LT(worst_sum, sum_tolerance) << "cols " << cols;
  }
}

TEST(RowExponentialsTest, FloatMatchesStdExp) { check_against_reference<float>(5e-7, 1e-5); }

TEST(RowExponentialsTest, DoubleMatchesStdExp) { check_against_reference<double>(1e-15, 1e-13); }

TEST(RowExponentialsTest, VeryNegativeLogitsUnderflowToZero) {
  std::vector<float> x = {0.0f, -200.0f, -87.5f, -1e30f};
  float top, sum;
  exponentiate_rows(x.data(), 1, 4, 4, &top, &sum, nullptr);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_FLOAT_EQ(sum, 1.0f + x[2]);
}

}  // namespace
}  // namespace luong::models
