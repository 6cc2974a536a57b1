#include "luong/models/row_exponentials.h"

#include "luong/util/target_clones.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "luong/util/vector_lanes.h"
#include "luong/util/vector_math.h"

namespace luong::models {
namespace {

// e^x for x = a logit less its row's maximum: never above 0 (or NaN).
template <typename T>
[[gnu::always_inline]] inline T exponential(T x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return vector_expf_below_88(x);
  } else {
    return vector_exp(x);
  }
}

// The row's maximum: four lanes of partial maxima, so that the comparisons do not wait on each other.
// NaNs are passed over as by the indexed version (a comparison with NaN is false).
template <typename T>
[[gnu::always_inline]] inline T plain_row_maximum(const T* row, int64_t cols) {
  using V = typename Lanes<T>::type;
  constexpr int64_t kWidth = sizeof(V) / sizeof(T);
  int64_t c = 0;
  T top = row[0];
  if (cols >= 4 * kWidth) {
    V lane_max[4];
    std::memcpy(lane_max, row, sizeof lane_max);
    for (c = 4 * kWidth; c + 4 * kWidth <= cols; c += 4 * kWidth) {
      for (int j = 0; j < 4; ++j) {
        V v;
        std::memcpy(&v, row + c + j * kWidth, sizeof v);
        lane_max[j] = v > lane_max[j] ? v : lane_max[j];
      }
    }
    for (int j = 1; j < 4; ++j) lane_max[0] = lane_max[j] > lane_max[0] ? lane_max[j] : lane_max[0];
    top = lane_max[0][0];
    for (int64_t i = 1; i < kWidth; ++i) top = lane_max[0][i] > top ? lane_max[0][i] : top;
  }
  for (; c < cols; ++c) top = row[c] > top ? row[c] : top;
  return top;
}

// The row's maximum, and (when `column` is not null) the first column holding it.
template <typename T>
[[gnu::always_inline]] inline T row_maximum(const T* row, int64_t cols, int64_t* column_out) {
  if (column_out == nullptr) return plain_row_maximum(row, cols);
  using V = typename Lanes<T>::type;
  using I = typename Lanes<T>::index;
  using J = typename Lanes<T>::lane_index;
  constexpr int64_t kWidth = sizeof(V) / sizeof(T);
  // Per lane the maximum and the first column holding that lane's maximum.
  int64_t c = 0;
  T top = row[0];
  int64_t top_column = 0;
  if (cols >= kWidth) {
    V lane_max;
    std::memcpy(&lane_max, row, sizeof lane_max);
    I lane_column, column;
    for (int64_t i = 0; i < kWidth; ++i) column[i] = static_cast<J>(i);
    lane_column = column;
    for (c = kWidth; c + kWidth <= cols; c += kWidth) {
      V v;
      std::memcpy(&v, row + c, sizeof v);
      column += static_cast<J>(kWidth);
      const I greater = v > lane_max;
      lane_max = greater ? v : lane_max;
      lane_column = greater ? column : lane_column;
    }
    top = lane_max[0];
    top_column = lane_column[0];
    for (int64_t i = 1; i < kWidth; ++i) {
      if (lane_max[i] > top || (lane_max[i] == top && lane_column[i] < top_column)) {
        top = lane_max[i];
        top_column = lane_column[i];
      }
    }
  }
  for (; c < cols; ++c) {
    if (row[c] > top) {
      top = row[c];
      top_column = c;
    }
  }
  *column_out = top_column;
  return top;
}

// The sum of x[0..n): four lanes of partial sums (one add's latency apart, not four), then across.
template <typename T>
[[gnu::always_inline]] inline T lane_sum(const T* x, int64_t n) {
  using V = typename Lanes<T>::type;
  constexpr int64_t kWidth = sizeof(V) / sizeof(T);
  V lanes[4] = {};
  int64_t c = 0;
  for (; c + 4 * kWidth <= n; c += 4 * kWidth) {
    for (int j = 0; j < 4; ++j) {
      V v;
      std::memcpy(&v, x + c + j * kWidth, sizeof v);
      lanes[j] += v;
    }
  }
  for (; c + kWidth <= n; c += kWidth) {
    V v;
    std::memcpy(&v, x + c, sizeof v);
    lanes[0] += v;
  }
  const V total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  T sum = 0;
  for (int64_t i = 0; i < kWidth; ++i) sum += total[i];
  for (; c < n; ++c) sum += x[c];
  return sum;
}

template <typename T>
[[gnu::always_inline]] inline void exponentiate_rows_impl(T* x, int64_t rows, int64_t cols, int64_t stride, T* maxima,
                                                          T* sums, int64_t* argmax) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = x + r * stride;
    const T top = row_maximum(row, cols, argmax != nullptr ? argmax + r : nullptr);
    maxima[r] = top;
    for (int64_t c = 0; c < cols; ++c) row[c] = exponential<T>(row[c] - top);
    sums[r] = lane_sum(row, cols);
  }
}

// As exponentiate_rows, leaving x as it is: the exponentials go through a block on the stack (in L1),
// where the same loop vectorises, and are summed from there.
template <typename T>
[[gnu::always_inline]] inline void log_sum_exponentials_impl(const T* x, int64_t rows, int64_t cols, int64_t stride,
                                                             T* maxima, T* log_sums) {
  constexpr int64_t kBlock = 512;
  alignas(64) T block[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * stride;
    const T top = row_maximum(row, cols, nullptr);
    T sum = 0;
    for (int64_t begin = 0; begin < cols; begin += kBlock) {
      const int64_t n = cols - begin < kBlock ? cols - begin : kBlock;
      for (int64_t c = 0; c < n; ++c) block[c] = exponential<T>(row[begin + c] - top);
      sum += lane_sum(block, n);
    }
    maxima[r] = top;
    log_sums[r] = std::log(sum);
  }
}

template <typename T>
[[gnu::always_inline]] inline void softmax_gradient_rows_impl(T* x, int64_t rows, int64_t cols, int64_t stride,
                                                              const T* row_scales, T offset,
                                                              const int64_t* target_columns, T target_weight,
                                                              const T* row_weights, T* column_sums) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = x + r * stride;
    const T scale = row_scales[r], weight = row_weights[r];
#pragma GCC ivdep  // the row and the column sums never overlap
    for (int64_t c = 0; c < cols; ++c) {
      const T gradient = row[c] * scale - offset;
      row[c] = gradient;
      column_sums[c] += weight * gradient;
    }
    const int64_t target = target_columns[r];
    if (target >= 0) {
      row[target] -= target_weight;
      column_sums[target] -= weight * target_weight;
    }
  }
}

}  // namespace

#define LUONG_ROW_CLONES LUONG_X86_CLONES

LUONG_ROW_CLONES void exponentiate_rows(float* x, int64_t rows, int64_t cols, int64_t stride, float* maxima,
                                        float* sums, int64_t* argmax) {
  exponentiate_rows_impl(x, rows, cols, stride, maxima, sums, argmax);
}

LUONG_ROW_CLONES void exponentiate_rows(double* x, int64_t rows, int64_t cols, int64_t stride, double* maxima,
                                        double* sums, int64_t* argmax) {
  exponentiate_rows_impl(x, rows, cols, stride, maxima, sums, argmax);
}

}  // namespace luong::models

namespace luong::models {

LUONG_ROW_CLONES void log_sum_exponentials(const float* x, int64_t rows, int64_t cols, int64_t stride, float* maxima,
                                           float* log_sums) {
  log_sum_exponentials_impl(x, rows, cols, stride, maxima, log_sums);
}

LUONG_ROW_CLONES void log_sum_exponentials(const double* x, int64_t rows, int64_t cols, int64_t stride, double* maxima,
                                           double* log_sums) {
  log_sum_exponentials_impl(x, rows, cols, stride, maxima, log_sums);
}

}  // namespace luong::models

namespace luong::models {

LUONG_ROW_CLONES void softmax_gradient_rows(float* x, int64_t rows, int64_t cols, int64_t stride, const float* row_scales,
                                            float offset, const int64_t* target_columns, float target_weight,
                                            const float* row_weights, float* column_sums) {
  softmax_gradient_rows_impl(x, rows, cols, stride, row_scales, offset, target_columns, target_weight, row_weights,
                             column_sums);
}

LUONG_ROW_CLONES void softmax_gradient_rows(double* x, int64_t rows, int64_t cols, int64_t stride,
                                            const double* row_scales, double offset, const int64_t* target_columns,
                                            double target_weight, const double* row_weights, double* column_sums) {
  softmax_gradient_rows_impl(x, rows, cols, stride, row_scales, offset, target_columns, target_weight, row_weights,
                             column_sums);
}

}  // namespace luong::models
