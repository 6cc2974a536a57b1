#include "luong/data_pipeline/python_random.h"

namespace luong::data {
namespace {

std::vector<std::uint32_t> seed_words(std::uint64_t seed) {
  // CPython splits abs(seed) into 32-bit words, least significant first; 0 becomes one word.
  std::vector<std::uint32_t> key;
  do {
    key.push_back(static_cast<std::uint32_t>(seed & 0xffffffffU));
    seed >>= 32;
  } while (seed != 0);
  return key;
}

int bit_length(std::uint64_t n) {
  int bits = 0;
  while (n != 0) {
    ++bits;
    n >>= 1;
  }
  return bits;
}

}  // namespace

PythonRandom::PythonRandom(std::uint64_t seed) : mt_(Mt19937::from_array(seed_words(seed))) {}

std::uint64_t PythonRandom::getrandbits(int k) {
  if (k <= 32) return mt_.next_u32() >> (32 - k);
  // Wider requests fill 32-bit words from the least significant end; the last is truncated.
  const std::uint64_t low = mt_.next_u32();
  const std::uint64_t high = mt_.next_u32() >> (64 - k);
  return low | (high << 32);
}

std::uint64_t PythonRandom::randbelow(std::uint64_t n) {
  const int k = bit_length(n);
  std::uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

}  // namespace luong::data
