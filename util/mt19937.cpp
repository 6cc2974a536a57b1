#include "luong/util/mt19937.h"

#include <algorithm>

namespace luong {
namespace {
constexpr int kM = 397;
constexpr std::uint32_t kMatrixA = 0x9908b0dfU;
constexpr std::uint32_t kUpperMask = 0x80000000U;
constexpr std::uint32_t kLowerMask = 0x7fffffffU;
}  // namespace

void Mt19937::init_genrand(std::uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  }
  index_ = kN;
}

Mt19937 Mt19937::from_genrand(std::uint32_t seed) {
  Mt19937 mt;
  mt.init_genrand(seed);
  return mt;
}

Mt19937 Mt19937::from_array(const std::vector<std::uint32_t>& key) {
  Mt19937 mt;
  mt.init_genrand(19650218U);
  const int key_length = static_cast<int>(key.size());
  int i = 1;
  int j = 0;
  for (int k = std::max(kN, key_length); k > 0; --k) {
    mt.state_[i] = (mt.state_[i] ^ ((mt.state_[i - 1] ^ (mt.state_[i - 1] >> 30)) * 1664525U)) + key[j] +
                   static_cast<std::uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt.state_[0] = mt.state_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt.state_[i] = (mt.state_[i] ^ ((mt.state_[i - 1] ^ (mt.state_[i - 1] >> 30)) * 1566083941U)) -
                   static_cast<std::uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt.state_[0] = mt.state_[kN - 1];
      i = 1;
    }
  }
  mt.state_[0] = 0x80000000U;
  mt.index_ = kN;
  return mt;
}

void Mt19937::twist() {
  static const std::uint32_t mag01[2] = {0U, kMatrixA};
  int k = 0;
  for (; k < kN - kM; ++k) {
    const std::uint32_t y = (state_[k] & kUpperMask) | (state_[k + 1] & kLowerMask);
    state_[k] = state_[k + kM] ^ (y >> 1) ^ mag01[y & 1U];
  }
  for (; k < kN - 1; ++k) {
    const std::uint32_t y = (state_[k] & kUpperMask) | (state_[k + 1] & kLowerMask);
    state_[k] = state_[k + (kM - kN)] ^ (y >> 1) ^ mag01[y & 1U];
  }
  const std::uint32_t y = (state_[kN - 1] & kUpperMask) | (state_[0] & kLowerMask);
  state_[kN - 1] = state_[kM - 1] ^ (y >> 1) ^ mag01[y & 1U];
  index_ = 0;
}

std::uint32_t Mt19937::next_u32() {
  if (index_ >= kN) twist();
  std::uint32_t y = state_[index_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

double Mt19937::next_double53() {
  const std::uint32_t a = next_u32() >> 5;
  const std::uint32_t b = next_u32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

}  // namespace luong
