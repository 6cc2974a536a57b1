#include "luong/evaluation/best_continuations.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "luong/util/target_clones.h"
#include "luong/util/vector_lanes.h"

namespace luong::evaluation {
namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// A value of T below which no element of a row can beat `threshold` once `base` is added in double:
// the threshold less base, less a margin for double's rounding of the sum, rounded down to T. The
// exact comparison in double follows for the few elements that pass.
template <typename T>
T admission_limit(double threshold, double base) {
  if (threshold == kMinusInfinity) return -std::numeric_limits<T>::infinity();
  const double exact = threshold - base;
  const double margin = 1e-12 * (1.0 + std::fabs(threshold) + std::fabs(base));
  const double limit = exact - margin;
  if constexpr (sizeof(T) == sizeof(double)) {
    return limit;
  } else {
    // A double beyond float's range has no float to convert to (undefined): clamp first.
    constexpr double kLargest = std::numeric_limits<float>::max();
    if (limit < -kLargest) return -std::numeric_limits<float>::infinity();
    if (limit > kLargest) return std::numeric_limits<float>::max();
    float rounded = static_cast<float>(limit);
    rounded = std::nextafter(rounded, -std::numeric_limits<float>::infinity());
    return std::nextafter(rounded, -std::numeric_limits<float>::infinity());
  }
}

// The `count` best (value, index) pairs seen so far, best first.
struct Best {
  double* values;
  int64_t* indices;
  int64_t count;
  int64_t size = 0;

  // Indices arrive in increasing order, so a candidate equal to the worst kept is never better.
  double threshold() const { return size < count ? kMinusInfinity : values[size - 1]; }
  void offer(double value, int64_t index) {
    if (!(value > threshold())) return;  // also refuses -inf and NaN
    int64_t at = size < count ? size++ : count - 1;
    while (at > 0 && values[at - 1] < value) {
      values[at] = values[at - 1];
      indices[at] = indices[at - 1];
      --at;
    }
    values[at] = value;
    indices[at] = index;
  }
};

template <typename T>
[[gnu::always_inline]] inline void best_continuations_impl(const T* log_probs, const double* base, int64_t beams,
                                                           int64_t vocab, int64_t count, int64_t first_sentence,
                                                           int64_t last_sentence, double* values, int64_t* indices,
                                                           const T* maxima, const T* log_sums) {
  using V = typename Lanes<T>::type;
  constexpr int64_t kWidth = sizeof(V) / sizeof(T);
  if (count <= 0) return;
  for (int64_t s = first_sentence; s < last_sentence; ++s) {
    Best best{values + s * count, indices + s * count, count};
    for (int64_t beam = 0; beam < beams; ++beam) {
      const int64_t row = s * beams + beam;
      const double b = base[row];
      if (!(b > kMinusInfinity)) continue;
      const T* x = log_probs + row * vocab;
      const int64_t offset = beam * vocab;
      // Logits become log-probabilities as LibTorch's log_softmax makes them: (x - max) - log sum.
      const T shift = maxima != nullptr ? maxima[row] : T(0);
      const T log_sum = log_sums != nullptr ? log_sums[row] : T(0);
      const bool normalise = maxima != nullptr;
      auto log_prob = [&](T logit) { return normalise ? (logit - shift) - log_sum : logit; };
      T limit = 0;
      V lanes_limit;
      auto set_limit = [&] {
        limit = admission_limit<T>(best.threshold(), b);
        for (int64_t i = 0; i < kWidth; ++i) lanes_limit[i] = limit;
      };
      set_limit();
      auto consider = [&](int64_t c) {
        const T lp = log_prob(x[c]);
        if (!(lp >= limit)) return;
        best.offer(static_cast<double>(lp) + b, offset + c);
        set_limit();
      };
      int64_t c = 0;
      for (; c + kWidth <= vocab; c += kWidth) {
        V v;
        std::memcpy(&v, x + c, sizeof v);
        if (normalise) v = (v - shift) - log_sum;
        const auto pass = v >= lanes_limit;
        bool any = false;
        for (int64_t i = 0; i < kWidth; ++i) any |= pass[i] != 0;
        if (!any) continue;
        for (int64_t i = 0; i < kWidth; ++i) consider(c + i);
      }
      for (; c < vocab; ++c) consider(c);
    }
    for (int64_t i = best.size; i < count; ++i) {
      best.values[i] = kMinusInfinity;
      best.indices[i] = -1;
    }
  }
}

}  // namespace

LUONG_X86_CLONES void best_continuations(const float* log_probs, const double* base, int64_t beams, int64_t vocab,
                                         int64_t count, int64_t first_sentence, int64_t last_sentence, double* values,
                                         int64_t* indices, const float* maxima, const float* log_sums) {
  best_continuations_impl(log_probs, base, beams, vocab, count, first_sentence, last_sentence, values, indices, maxima,
                          log_sums);
}

LUONG_X86_CLONES void best_continuations(const double* log_probs, const double* base, int64_t beams, int64_t vocab,
                                         int64_t count, int64_t first_sentence, int64_t last_sentence, double* values,
                                         int64_t* indices, const double* maxima, const double* log_sums) {
  best_continuations_impl(log_probs, base, beams, vocab, count, first_sentence, last_sentence, values, indices, maxima,
                          log_sums);
}

}  // namespace luong::evaluation
