#include <gtest/gtest.h>

#include "luong/models/attention.h"
#include "luong/models/global_attention.h"
#include "luong/models/local_monotonic_attention.h"
#include "luong/models/predictive_alignment_attention.h"
#include "luong/util/error.h"

namespace luong::models {
namespace {

AttentionConfig make_config(AttentionKind kind, ScoreKind score = ScoreKind::kDot, int64_t window = 1) {
  AttentionConfig c;
  c.kind = kind;
  c.score = score;
  c.window = window;
  return c;
}

const std::vector<AttentionConfig>& all_configs() {
  static const std::vector<AttentionConfig> configs = [] {
    std::vector<AttentionConfig> out;
    for (auto kind : {AttentionKind::kGlobal, AttentionKind::kLocalMonotonic, AttentionKind::kLocalPredictive}) {
      for (auto score : {ScoreKind::kDot, ScoreKind::kGeneral, ScoreKind::kConcat}) out.push_back(make_config(kind, score));
    }
    return out;
  }();
  return configs;
}

TEST(AttentionTest, PaddingGetsExactlyZeroAndRowsAreFinite) {
  torch::manual_seed(0);
  const torch::Tensor enc = torch::randn({3, 6, 8});
  const torch::Tensor query = torch::randn({3, 8});
  const torch::Tensor lengths = torch::tensor({6, 3, 1}, torch::kLong);
  for (const auto& config : all_configs()) {
    auto attention = make_attention(config, 8);
    for (int64_t step = 0; step < 8; ++step) {
      const AttentionOutput out = attention->forward(enc, query, lengths, step);
      EXPECT_TRUE(torch::isfinite(out.weights).all().item<bool>());
      EXPECT_EQ(out.weights[1].slice(0, 3).abs().max().item<float>(), 0.0f);
      EXPECT_EQ(out.weights[2].slice(0, 1).abs().max().item<float>(), 0.0f);
      if (config.kind != AttentionKind::kLocalPredictive) {
        EXPECT_NEAR(out.weights.sum(1)[1].item<float>(), 1.0f, 1e-5);
      }
    }
  }
}

TEST(AttentionTest, MixedLengthBatchEqualsEachExampleAlone) {
  torch::manual_seed(1);
  const torch::Tensor enc = torch::randn({3, 7, 5}, torch::kDouble);
  const torch::Tensor query = torch::randn({3, 5}, torch::kDouble);
  const std::vector<int64_t> lengths = {7, 4, 2};
  for (const auto& config : all_configs()) {
    auto attention = make_attention(config, 5);
    attention->to(torch::kDouble);
    const AttentionOutput batch = attention->forward(enc, query, torch::tensor(lengths, torch::kLong), 2);
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t n = lengths[static_cast<std::size_t>(b)];
      const AttentionOutput alone = attention->forward(enc.slice(0, b, b + 1).slice(1, 0, n), query.slice(0, b, b + 1),
                                                       torch::tensor({n}, torch::kLong), 2);
      EXPECT_TRUE(torch::allclose(batch.weights[b].slice(0, 0, n), alone.weights[0], 1e-12, 1e-14))
          << options::enum_name(config.kind) << "/" << options::enum_name(config.score) << " example " << b;
      EXPECT_TRUE(torch::allclose(batch.context[b], alone.context[0], 1e-12, 1e-14));
    }
  }
}

TEST(AttentionTest, FullyMaskedRowIsZeroNotNaN) {
  const torch::Tensor weights =
      masked_softmax(torch::randn({2, 4}), torch::tensor({{true, true, false, false}, {false, false, false, false}}));
  EXPECT_TRUE(torch::isfinite(weights).all().item<bool>());
  EXPECT_EQ(weights[1].abs().sum().item<float>(), 0.0f);
  EXPECT_NEAR(weights[0].sum().item<float>(), 1.0f, 1e-6);
}

TEST(AttentionTest, LocalMonotonicWindowUsesEachSentencesOwnLength) {
  torch::manual_seed(2);
  auto attention = make_attention(make_config(AttentionKind::kLocalMonotonic, ScoreKind::kDot, 1), 4);
  const torch::Tensor enc = torch::randn({2, 8, 4});
  const torch::Tensor query = torch::randn({2, 4});
  const torch::Tensor lengths = torch::tensor({8, 3}, torch::kLong);
  // step 5: example 0 centres on 5 (window 4..6); example 1 has length 3, so p_t = 2 (window 1..2).
  const AttentionOutput out = attention->forward(enc, query, lengths, 5);
  const auto w = out.weights;
  for (int64_t s = 0; s < 8; ++s) {
    const bool in0 = s >= 4 && s <= 6;
    const bool in1 = s >= 1 && s <= 2;
    EXPECT_EQ(w[0][s].item<float>() > 0, in0) << "s=" << s;
    EXPECT_EQ(w[1][s].item<float>() > 0, in1) << "s=" << s;
  }
  EXPECT_EQ(out.positions[1].item<float>(), 2.0f);
  // At the sentence start the window is cut at 0.
  const auto first = attention->forward(enc, query, lengths, 0).weights;
  EXPECT_GT(first[0][1].item<float>(), 0);
  EXPECT_EQ(first[0][2].item<float>(), 0);
}

TEST(AttentionTest, LocalPredictiveWindowAndGaussian) {
  torch::manual_seed(3);
  auto attention = std::make_shared<PredictiveAlignmentAttentionImpl>(PredictiveAlignmentAttentionOptions(4).window(2));
  const torch::Tensor enc = torch::randn({4, 9, 4});
  const torch::Tensor query = torch::randn({4, 4}) * 3;
  const torch::Tensor lengths = torch::tensor({9, 6, 3, 1}, torch::kLong);
  const AttentionOutput out = attention->forward(enc, query, lengths, 0);
  for (int64_t b = 0; b < 4; ++b) {
    const double p = out.positions[b].item<double>();
    const double last = lengths[b].item<int64_t>() - 1;
    EXPECT_GE(p, 0.0);
    EXPECT_LE(p, last);
    const double centre = std::nearbyint(p);
    for (int64_t s = 0; s < 9; ++s) {
      const float w = out.weights[b][s].item<float>();
      if (std::abs(s - centre) > 2 || s > last) {
        EXPECT_EQ(w, 0.0f) << "b=" << b << " s=" << s;
      }
    }
    // No renormalisation: the Gaussian keeps the total below 1 unless the window is one token at p_t.
    EXPECT_LE(out.weights[b].sum().item<float>(), 1.0f + 1e-6f);
  }
  // A one-token sentence: p_t = 0 exactly, weight exp(0) * 1 = 1.
  EXPECT_NEAR(out.weights[3][0].item<float>(), 1.0f, 1e-6);
}

TEST(AttentionTest, ScaleOptionDividesDotScoresBySqrtH) {
  AlignmentScore scaled(AlignmentScoreOptions(4));
  AlignmentScore raw(AlignmentScoreOptions(4).scale(false));
  const torch::Tensor keys = torch::randn({1, 3, 4});
  const torch::Tensor query = torch::randn({1, 4});
  EXPECT_TRUE(torch::allclose(scaled(keys, query) * 2.0, raw(keys, query)));
}

TEST(AttentionTest, ParsersAndBadWindows) {
  EXPECT_EQ(options::parse_enum<AttentionKind>("local-p"), AttentionKind::kLocalPredictive);
  EXPECT_EQ(options::parse_enum<ScoreKind>("concat"), ScoreKind::kConcat);
  EXPECT_THROW(options::parse_enum<AttentionKind>("local-x"), Error);
  EXPECT_THROW(options::parse_enum<ScoreKind>("cosine"), Error);
  EXPECT_THROW(make_attention(make_config(AttentionKind::kLocalPredictive, ScoreKind::kDot, 0), 4), Error);
}

}  // namespace
}  // namespace luong::models
