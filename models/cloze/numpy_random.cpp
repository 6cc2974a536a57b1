#include "luong/cloze/numpy_random.h"

#include <cmath>

namespace luong::cloze {

double NumpyRandom::gauss() {
  if (has_gauss_) {
    has_gauss_ = false;
    return cached_gauss_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * mt_.next_double53() - 1.0;
    x2 = 2.0 * mt_.next_double53() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  cached_gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

std::vector<double> NumpyRandom::randn(std::size_t count) {
  std::vector<double> out(count);
  for (double& v : out) v = gauss();
  return out;
}

}  // namespace luong::cloze
