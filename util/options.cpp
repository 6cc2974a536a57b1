#include "luong/util/options.h"

namespace luong::options {

std::string Range::describe() const {
  const auto bound = [](double v) { return std::isinf(v) ? std::string(v < 0 ? "-inf" : "inf") : value_text(v); };
  return std::string(min_open ? "(" : "[") + bound(min) + ", " + bound(max) + (max_open ? ")" : "]");
}

}  // namespace luong::options
