#include "luong/evaluation/search.h"

#include <gtest/gtest.h>

#include "luong/data_pipeline/vocabulary.h"

namespace luong::evaluation {
namespace {

models::Seq2Seq random_model(models::AttentionKind kind, models::DecoderKind decoder) {
  models::AttentionConfig attention;
  attention.kind = kind;
  torch::manual_seed(11);
  models::Seq2Seq model(models::Seq2SeqOptions(20, 15).embed_size(8).hidden_size(12).decoder(decoder).attention(attention));
  // Larger output weights make the distributions peaked, so greedy paths are long and varied.
  torch::NoGradGuard no_grad;
  model->decoder->fc->weight().mul_(4);
  return model;
}

TEST(SearchTest, BeamOfOneEqualsGreedy) {
  for (auto decoder : {models::DecoderKind::kLuong, models::DecoderKind::kBahdanau}) {
    for (auto kind : {models::AttentionKind::kGlobal, models::AttentionKind::kLocalPredictive}) {
      models::Seq2Seq model = random_model(kind, decoder);
      const torch::Tensor src = torch::tensor({{5, 6, 7, 8, 2}, {9, 10, 2, 0, 0}, {11, 2, 0, 0, 0}}, torch::kLong);
      const torch::Tensor lengths = torch::tensor({5, 3, 2}, torch::kLong);
      SearchOptions options;
      options.max_len = 12;
      options.alpha = 0.0;
      const auto greedy = translate(*model, src, lengths, options);
      c10::InferenceMode inference;
      model->eval();
      for (int64_t b = 0; b < 3; ++b) {
        const int64_t n = lengths[b].item<int64_t>();
        const Hypothesis beam =
            reference_beam_search(*model, src.slice(0, b, b + 1).slice(1, 0, n), lengths.slice(0, b, b + 1), options);
        EXPECT_EQ(beam.tokens, greedy[static_cast<std::size_t>(b)].tokens) << "row " << b;
        EXPECT_NEAR(beam.log_prob, greedy[static_cast<std::size_t>(b)].log_prob, 1e-4);
        EXPECT_EQ(beam.finished, greedy[static_cast<std::size_t>(b)].finished);
      }
    }
  }
}

TEST(SearchTest, WiderBeamNeverScoresWorseThanGreedy) {
  models::Seq2Seq model = random_model(models::AttentionKind::kGlobal, models::DecoderKind::kLuong);
  const torch::Tensor src = torch::tensor({{5, 6, 7, 8, 2}}, torch::kLong);
  const torch::Tensor lengths = torch::tensor({5}, torch::kLong);
  SearchOptions options;
  options.max_len = 10;
  options.alpha = 0.0;
  const double greedy = translate(*model, src, lengths, options)[0].log_prob;
  options.beam = 5;
  const Hypothesis beam = translate(*model, src, lengths, options)[0];
  if (beam.finished) {
    EXPECT_GE(beam.log_prob, greedy - 1e-6);
  }
}

TEST(SearchTest, AttentionIsKeptPerStep) {
  models::Seq2Seq model = random_model(models::AttentionKind::kLocalMonotonic, models::DecoderKind::kLuong);
  SearchOptions options;
  options.max_len = 6;
  options.keep_attention = true;
  const auto out = translate(*model, torch::tensor({{5, 6, 2}}, torch::kLong), torch::tensor({3}, torch::kLong), options);
  const Hypothesis& h = out[0];
  EXPECT_EQ(h.attention.size(), h.tokens.size() + (h.finished ? 1 : 0));
  for (const auto& row : h.attention) EXPECT_EQ(row.size(), 3u);
  EXPECT_EQ(h.positions.size(), h.attention.size());
}

}  // namespace
}  // namespace luong::evaluation
