#include "luong/models/row_exponentials.h"

#include "luong/util/target_clones.h"

#include <cstdint>
#include <cstring>

#include "luong/util/vector_math.h"

namespace luong::models {
namespace {

// 32 bytes of T as one GCC vector (one ymm with AVX2, half a zmm, two xmm with SSE2): the maximum
// and the sum keep one partial result per lane, which GCC will not do for a plain float loop
// without -ffast-math.
template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float type __attribute__((vector_size(32)));
  typedef std::int32_t lane_index;
  typedef lane_index index __attribute__((vector_size(32)));  // what a comparison of `type` gives
};
template <>
struct Lanes<double> {
  typedef double type __attribute__((vector_size(32)));
  typedef std::int64_t lane_index;
  typedef lane_index index __attribute__((vector_size(32)));
};

template <typename T>
[[gnu::always_inline]] inline T exponential(T x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return vector_expf(x);
  } else {
    return vector_exp(x);
  }
}

template <typename T>
[[gnu::always_inline]] inline void exponentiate_rows_impl(T* x, int64_t rows, int64_t cols, int64_t stride, T* maxima,
                                                          T* sums, int64_t* argmax) {
  using V = typename Lanes<T>::type;
  using I = typename Lanes<T>::index;
  using J = typename Lanes<T>::lane_index;
  constexpr int64_t kWidth = sizeof(V) / sizeof(T);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = x + r * stride;
    // The maximum, and per lane the first column holding that lane's maximum.
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
    maxima[r] = top;
    if (argmax != nullptr) argmax[r] = top_column;
    for (c = 0; c < cols; ++c) row[c] = exponential<T>(row[c] - top);
    V lane_sum = {};
    for (c = 0; c + kWidth <= cols; c += kWidth) {
      V v;
      std::memcpy(&v, row + c, sizeof v);
      lane_sum += v;
    }
    T sum = 0;
    for (int64_t i = 0; i < kWidth; ++i) sum += lane_sum[i];
    for (; c < cols; ++c) sum += row[c];
    sums[r] = sum;
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
