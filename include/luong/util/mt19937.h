#pragma once
// The Mersenne Twister exactly as CPython's `random` and numpy's legacy `RandomState` run it, so
// that C++ reproduces their shuffles and draws bit for bit (std::mt19937 seeds differently).
#include <cstdint>
#include <vector>

namespace luong {

class Mt19937 {
 public:
  /// numpy's `np.random.seed(s)` for an integer s: Matsumoto & Nishimura's init_genrand.
  static Mt19937 from_genrand(std::uint32_t seed);
  /// CPython's `random.seed(n)` for an integer n: init_by_array over n's 32-bit words.
  static Mt19937 from_array(const std::vector<std::uint32_t>& key);

  std::uint32_t next_u32();
  /// numpy's legacy random_double: 53 random bits from two draws, in [0, 1).
  double next_double53();

 private:
  Mt19937() = default;
  void init_genrand(std::uint32_t seed);
  void twist();

  static constexpr int kN = 624;
  std::uint32_t state_[kN]{};
  int index_ = kN + 1;
};

}  // namespace luong
