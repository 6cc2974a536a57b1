// BLEU and chrF against values computed by hand from sacreBLEU's definitions.
#include "luong/evaluation/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "luong/util/error.h"

namespace luong::evaluation {
namespace {

using Tokens = std::vector<std::string>;

TEST(MetricsTest, Tokenize13a) {
  EXPECT_EQ(tokenize_13a("Hello, world."), (Tokens{"Hello", ",", "world", "."}));
  EXPECT_EQ(tokenize_13a("3.5 and 1,000 (approx)"), (Tokens{"3.5", "and", "1,000", "(", "approx", ")"}));
  EXPECT_EQ(tokenize_13a("e-mail 5-6"), (Tokens{"e-mail", "5", "-", "6"}));
  EXPECT_EQ(tokenize_13a("a&amp;b &quot;x&quot;"), (Tokens{"a", "&", "b", "\"", "x", "\""}));
  EXPECT_EQ(tokenize_13a("مرحبا، صديقي."), (Tokens{"مرحبا،", "صديقي", "."}));
  EXPECT_EQ(tokenize_13a("it's"), (Tokens{"it's"}));  // the apostrophe is outside the 13a class
}

// hyp "the cat is on the mat", ref "the cat sat on the mat": matches 5/6, 3/5, 1/4, 0/3; the zero
// 4-gram precision is smoothed to 100 / (2 * 3); equal lengths, so BP = 1.
TEST(MetricsTest, BleuByHand) {
  const BleuScore s = corpus_bleu({"the cat is on the mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(s.matches, (std::array<long, 4>{5, 3, 1, 0}));
  EXPECT_EQ(s.totals, (std::array<long, 4>{6, 5, 4, 3}));
  EXPECT_DOUBLE_EQ(s.brevity_penalty, 1.0);
  const double expected = std::pow(100.0 * 5 / 6 * 100.0 * 3 / 5 * 100.0 * 1 / 4 * 100.0 / 6, 0.25);
  EXPECT_NEAR(s.score, expected, 1e-9);
  EXPECT_NEAR(s.score, 37.9918, 1e-4);
}

TEST(MetricsTest, BleuCorpusSumsStatisticsAndAppliesBrevityPenalty) {
  // Two sentences: statistics add up before the geometric mean.
  const BleuScore s = corpus_bleu({"a b c d", "a b"}, {"a b c d", "a b c d e f"});
  EXPECT_EQ(s.hypothesis_length, 6);
  EXPECT_EQ(s.reference_length, 10);
  EXPECT_NEAR(s.brevity_penalty, std::exp(1.0 - 10.0 / 6.0), 1e-12);
  EXPECT_EQ(s.matches, (std::array<long, 4>{6, 4, 2, 1}));
  const double expected = std::exp(1.0 - 10.0 / 6.0) * 100.0;  // every precision is 100%
  EXPECT_NEAR(s.score, expected, 1e-9);
  // No 3-gram in the hypotheses at all: sacreBLEU returns 0.
  EXPECT_EQ(corpus_bleu({"the cat"}, {"the cat sat on the mat"}).score, 0.0);
  EXPECT_THROW(corpus_bleu({"a"}, {}), Error);
}

TEST(MetricsTest, BleuExpSmoothingDoublesPerZeroOrder) {
  // hyp "x y z w" vs "a b c d": no matches; totals 4, 3, 2, 1 -> 100/(2*4), 100/(4*3), 100/(8*2), 100/(16*1).
  const BleuScore s = corpus_bleu({"x y z w"}, {"a b c d"});
  const double expected = std::pow(100.0 / 8 * 100.0 / 12 * 100.0 / 16 * 100.0 / 16, 0.25);
  EXPECT_NEAR(s.score, expected, 1e-9);
}

// hyp "abc", ref "abd": 1-grams 2/3 both ways, 2-grams 1/2, 3-grams 0/1, no longer n-grams;
// average precision = average recall = (2/3 + 1/2 + 0) / 3, and F2 of equal P and R is P.
TEST(MetricsTest, ChrfByHand) {
  EXPECT_NEAR(corpus_chrf({"abc"}, {"abd"}), 100.0 * (2.0 / 3 + 0.5) / 3, 1e-9);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}), 100.0, 1e-9);  // whitespace is ignored
  EXPECT_NEAR(corpus_chrf({"مرحبا"}, {"مرحبا"}), 100.0, 1e-9);
  EXPECT_EQ(corpus_chrf({"xyz"}, {"abc"}), 0.0);
  // Reference "ab" has no 3- to 6-grams: the hypothesis's are not counted (sacreBLEU's rule), so only
  // orders 1 and 2 enter: P = (2/4 + 1/3) / 2 = 5/12, R = 1, F2 = 5PR / (4P + R) = 25/32.
  EXPECT_NEAR(corpus_chrf({"abcd"}, {"ab"}), 100.0 * 25 / 32, 1e-9);
}

}  // namespace
}  // namespace luong::evaluation
