#pragma once
// CPython's `random.Random(seed).shuffle`, reproduced so that `luong` draws the very same
// train/test split as the Python reference (seq2seq_reference.py) for the same seed.
#include <cstdint>
#include <utility>
#include <vector>

#include "luong/util/mt19937.h"

namespace luong::data {

class PythonRandom {
 public:
  explicit PythonRandom(std::uint64_t seed);

  /// random.getrandbits(k) for 0 < k <= 64.
  std::uint64_t getrandbits(int k);
  /// random._randbelow(n): uniform in [0, n) by rejection on bit_length(n) bits.
  std::uint64_t randbelow(std::uint64_t n);

  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(randbelow(i + 1));
      std::swap(items[i], items[j]);
    }
  }

 private:
  Mt19937 mt_;
};

}  // namespace luong::data
