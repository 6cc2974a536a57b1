#include "luong/evaluation/search.h"

#include <gtest/gtest.h>

#include <ATen/record_function.h>

#include <limits>
#include <string>

#include "luong/data_pipeline/vocabulary.h"
#include "luong/evaluation/best_continuations.h"
#include "luong/models/row_exponentials.h"

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

// LibTorch's composition that best_continuations replaces: to double, add each row's base, top-k over
// each sentence's beams x vocabulary.
std::pair<torch::Tensor, torch::Tensor> torch_continuations(const torch::Tensor& log_probs, const torch::Tensor& base,
                                                            int64_t beams, int64_t count) {
  const int64_t sentences = log_probs.size(0) / beams;
  const torch::Tensor totals = (log_probs.to(torch::kDouble) + base.unsqueeze(1)).view({sentences, -1});
  const auto [values, indices] = totals.topk(count, 1);
  return {values, indices};
}

std::pair<torch::Tensor, torch::Tensor> kernel_continuations(const torch::Tensor& log_probs, const torch::Tensor& base,
                                                             int64_t beams, int64_t count) {
  const int64_t sentences = log_probs.size(0) / beams, vocab = log_probs.size(1);
  torch::Tensor values = torch::empty({sentences, count}, torch::kDouble);
  torch::Tensor indices = torch::empty({sentences, count}, torch::kLong);
  AT_DISPATCH_FLOATING_TYPES(log_probs.scalar_type(), "test", [&] {
    best_continuations(log_probs.data_ptr<scalar_t>(), base.data_ptr<double>(), beams, vocab, count, 0, sentences,
                       values.data_ptr<double>(), indices.data_ptr<int64_t>());
  });
  return {values, indices};
}

TEST(BestContinuationsTest, EqualsLibTorchsTopKOfTheSums) {
  torch::manual_seed(3);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const int64_t vocab : {7, 8, 37, 4642}) {
      const int64_t sentences = 6, beams = 5, count = 10;
      const torch::Tensor log_probs = torch::log_softmax(torch::randn({sentences * beams, vocab}, dtype) * 3, 1);
      torch::Tensor base = -torch::rand({sentences * beams}, torch::kDouble) * 20;
      base[3] = -std::numeric_limits<double>::infinity();  // an unused row
      const auto [want_values, want_indices] = torch_continuations(log_probs, base, beams, count);
      const auto [values, indices] = kernel_continuations(log_probs, base, beams, count);
      EXPECT_TRUE(torch::equal(values, want_values)) << "vocab " << vocab << " " << dtype;
      EXPECT_TRUE(torch::equal(indices, want_indices)) << "vocab " << vocab << " " << dtype;
    }
  }
}

// From logits, with the normalisers of log_sum_exponentials: LibTorch's log_softmax to a few float
// ulps (its exponential is Sleef's, ours vector_expf), the same choices.
TEST(BestContinuationsTest, FromLogitsEqualsLogSoftmaxFirst) {
  torch::manual_seed(4);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const int64_t sentences = 8, beams = 5, vocab = 4642, count = 10;
    const torch::Tensor logits = torch::randn({sentences * beams, vocab}, dtype) * 4;
    const torch::Tensor base = -torch::rand({sentences * beams}, torch::kDouble) * 20;
    const auto [want_values, want_indices] = torch_continuations(torch::log_softmax(logits, 1), base, beams, count);
    torch::Tensor maxima = torch::empty({sentences * beams}, dtype), log_sums = torch::empty({sentences * beams}, dtype);
    torch::Tensor values = torch::empty({sentences, count}, torch::kDouble);
    torch::Tensor indices = torch::empty({sentences, count}, torch::kLong);
    AT_DISPATCH_FLOATING_TYPES(dtype, "test", [&] {
      models::log_sum_exponentials(logits.data_ptr<scalar_t>(), sentences * beams, vocab, vocab, maxima.data_ptr<scalar_t>(),
                                   log_sums.data_ptr<scalar_t>());
      best_continuations(logits.data_ptr<scalar_t>(), base.data_ptr<double>(), beams, vocab, count, 0, sentences,
                         values.data_ptr<double>(), indices.data_ptr<int64_t>(), maxima.data_ptr<scalar_t>(),
                         log_sums.data_ptr<scalar_t>());
    });
    EXPECT_TRUE(torch::equal(maxima, std::get<0>(logits.max(1)))) << dtype;
    EXPECT_TRUE(torch::allclose(log_sums, (logits - maxima.unsqueeze(1)).exp().sum(1).log(), 1e-6, 1e-6)) << dtype;
    EXPECT_TRUE(torch::allclose(values, want_values, 0, dtype == torch::kFloat ? 2e-5 : 1e-12)) << dtype;
    EXPECT_TRUE(torch::equal(indices, want_indices)) << dtype;
  }
}

TEST(BestContinuationsTest, BlockedTokensAndTiesAndTooFewCandidates) {
  const double inf = std::numeric_limits<double>::infinity();
  // One sentence, two beams of four tokens; the second beam unused; -inf (blocked) tokens never chosen.
  const torch::Tensor log_probs = torch::tensor({-1.0f, -2.0f, -1.0f, -static_cast<float>(inf), 0.f, 0.f, 0.f, 0.f});
  const torch::Tensor base = torch::tensor({-0.5, -inf}, torch::kDouble);
  const auto [values, indices] = kernel_continuations(log_probs.view({2, 4}), base, 2, 5);
  EXPECT_TRUE(torch::equal(values, torch::tensor({{-1.5, -1.5, -2.5, -inf, -inf}}, torch::kDouble)));
  EXPECT_TRUE(torch::equal(indices, torch::tensor({{0, 2, 1, -1, -1}}, torch::kLong)));  // the tie: index 0 first
}

// The batched beam search on the CPU selects with best_continuations: LibTorch's log_softmax and topk
// never run, and the translations are those of the one-sentence reference search (which uses both).
TEST(BestContinuationsTest, BeamSearchOnTheCpuRunsTheKernel) {
  models::Seq2Seq model = random_model(models::AttentionKind::kGlobal, models::DecoderKind::kLuong);
  model->eval();
  const torch::Tensor src = torch::tensor({{5, 6, 7, 8, 2}, {9, 10, 2, 0, 0}, {11, 2, 0, 0, 0}}, torch::kLong);
  const torch::Tensor lengths = torch::tensor({5, 3, 2}, torch::kLong);
  SearchOptions options;
  options.beam = 4;
  options.max_len = 12;
  static std::vector<std::string> ops;  // RecordFunction takes a plain function: no captures
  ops.clear();
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        ops.emplace_back(fn.name());
        return nullptr;
      }));
  const auto batched = translate(*model, src, lengths, options);
  EXPECT_FALSE(ops.empty());  // the callback saw the search's operators
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::topk"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::log_softmax"), 0);
  ops.clear();
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = lengths[b].item<int64_t>();
    const Hypothesis alone =
        reference_beam_search(*model, src.slice(0, b, b + 1).slice(1, 0, n), lengths.slice(0, b, b + 1), options);
    EXPECT_EQ(batched[static_cast<std::size_t>(b)].tokens, alone.tokens) << "row " << b;
  }
  at::removeCallback(handle);
  EXPECT_GT(std::count(ops.begin(), ops.end(), "aten::topk"), 0);  // the observer does see topk where it runs
}

}  // namespace
}  // namespace luong::evaluation
