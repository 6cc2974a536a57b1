#pragma once
// numpy's legacy RandomState: `np.random.seed(s)` + `np.random.randn(...)`, bit for bit.
#include <cstdint>
#include <vector>

#include "luong/util/mt19937.h"

namespace luong::cloze {

class NumpyRandom {
 public:
  explicit NumpyRandom(std::uint32_t seed) : mt_(Mt19937::from_genrand(seed)) {}

  /// legacy_gauss: the polar Box-Muller method, which yields two values and caches the second.
  double gauss();
  /// `count` draws of randn, in C order.
  std::vector<double> randn(std::size_t count);

 private:
  Mt19937 mt_;
  bool has_gauss_ = false;
  double cached_gauss_ = 0.0;
};

}  // namespace luong::cloze
