#include "luong/data_pipeline/python_random.h"

#include <gtest/gtest.h>

#include <numeric>

#include "luong/util/mt19937.h"

namespace luong::data {
namespace {

// Expected values printed by CPython 3.11:
//   r = random.Random(0); [r.getrandbits(32) for _ in range(3)]
//   x = list(range(10)); random.Random(0).shuffle(x)
//   x = list(range(10)); random.Random(42).shuffle(x)
TEST(PythonRandomTest, MatchesCPythonGetrandbits) {
  PythonRandom r(0);
  EXPECT_EQ(r.getrandbits(32), 3626764237u);
  EXPECT_EQ(r.getrandbits(32), 1654615998u);
  EXPECT_EQ(r.getrandbits(32), 3255389356u);
}

TEST(PythonRandomTest, MatchesCPythonShuffle) {
  std::vector<int> x(10);
  std::iota(x.begin(), x.end(), 0);
  PythonRandom(0).shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{7, 8, 1, 5, 3, 4, 2, 0, 9, 6}));
  std::iota(x.begin(), x.end(), 0);
  PythonRandom(42).shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{7, 3, 2, 8, 5, 6, 9, 4, 0, 1}));
}

// numpy: np.random.seed(0); np.random.random_sample() twice.
TEST(Mt19937Test, MatchesNumpyLegacySeeding) {
  Mt19937 mt = Mt19937::from_genrand(0);
  EXPECT_DOUBLE_EQ(mt.next_double53(), 0.5488135039273248);
  EXPECT_DOUBLE_EQ(mt.next_double53(), 0.7151893663724195);
}

}  // namespace
}  // namespace luong::data
