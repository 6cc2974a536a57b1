#include "luong/models/alignment_score.h"

#include <cmath>

#include "luong/models/matrix_products.h"
#include "luong/util/error.h"

namespace luong::models {

AlignmentScoreImpl::AlignmentScoreImpl(const AlignmentScoreOptions& options_) : options(options_) { reset(); }

void AlignmentScoreImpl::reset() {
  const int64_t h = options.hidden_size();
  if (options.kind() == ScoreKind::kGeneral) {
    Wa = register_module("Wa", torch::nn::Linear(torch::nn::LinearOptions(h, h).bias(false)));
  } else if (options.kind() == ScoreKind::kConcat) {
    Wa = register_module("Wa", torch::nn::Linear(torch::nn::LinearOptions(2 * h, h).bias(false)));
    va = register_module("va", torch::nn::Linear(torch::nn::LinearOptions(h, 1).bias(false)));
  } else if (options.kind() == ScoreKind::kLocation) {
    Wa = register_module("Wa", torch::nn::Linear(torch::nn::LinearOptions(h, options.positions()).bias(false)));
  }
}

torch::Tensor AlignmentScoreImpl::prepare_keys(const torch::Tensor& encoder_outputs) {
  const int64_t h = options.hidden_size();
  switch (options.kind()) {
    case ScoreKind::kDot: return encoder_outputs;
    case ScoreKind::kGeneral: return linear_through_products(encoder_outputs, Wa->weight);
    case ScoreKind::kConcat: return linear_through_products(encoder_outputs, Wa->weight.narrow(1, h, h));
    case ScoreKind::kLocation: return encoder_outputs;  // unused: the score reads the query alone
  }
  return encoder_outputs;
}

torch::Tensor AlignmentScoreImpl::forward(const torch::Tensor& keys, const torch::Tensor& query) {
  if (options.kind() == ScoreKind::kLocation) {
    const int64_t sources = keys.size(1), positions = options.positions();
    const torch::Tensor scores = Wa(query);  // [B, P]
    if (sources <= positions) return scores.narrow(1, 0, sources);
    // Positions W_a does not score: a finite fill that the softmax turns into weight 0.
    return torch::cat({scores, torch::full({scores.size(0), sources - positions}, -1e30, scores.options())}, 1);
  }
  if (options.kind() == ScoreKind::kConcat) {
    const int64_t h = options.hidden_size();
    const torch::Tensor query_part = torch::matmul(query, Wa->weight.narrow(1, 0, h).t());  // [B, H]
    return va(torch::tanh(keys + query_part.unsqueeze(1))).squeeze(-1);                   // [B, S]
  }
  torch::Tensor scores = torch::bmm(keys, query.unsqueeze(2)).squeeze(2);  // [B, S]
  if (options.scale()) scores = scores / std::sqrt(static_cast<double>(options.hidden_size()));
  return scores;
}

}  // namespace luong::models
