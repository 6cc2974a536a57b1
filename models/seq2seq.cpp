#include "luong/models/seq2seq.h"

#include <cmath>
#include <vector>

#include "luong/models/gather_rows.h"
#include "luong/util/error.h"

namespace luong::models {

Seq2SeqImpl::Seq2SeqImpl(const Seq2SeqOptions& options_) : options(options_) {
  if (options.hidden_size() <= 0 || options.embed_size() <= 0 || options.layers() <= 0) {
    throw Error("hidden size, embedding size and layers must be positive");
  }
  encoder = register_module("encoder", Encoder(EncoderOptions(options.source_vocab_size(), options.hidden_size())
                                                   .cell(options.cell())
                                                   .layers(options.layers())
                                                   .dropout(options.dropout())
                                                   .bidirectional(options.bidirectional())
                                                   .fused(options.fused())));
  decoder = register_module(
      "decoder", make_decoder(options.decoder(), DecoderOptions(options.target_vocab_size(), options.embed_size(),
                                                                options.hidden_size())
                                                     .cell(options.cell())
                                                     .layers(options.layers())
                                                     .dropout(options.dropout())
                                                     .attention(options.attention())
                                                     .tie_embeddings(options.tie_embeddings())
                                                     .fused(options.fused())));
}

void Seq2SeqImpl::set_fused(bool fused) {
  options.fused(fused);
  encoder->options.fused(fused);
  decoder->set_fused(fused);
}

void Seq2SeqImpl::initialize_uniform(double range) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& weight : parameters()) weight.uniform_(-range, range);
  // Each embedding knows its own padding row; LibTorch zeroes it at construction, and so do we.
  for (const auto& module : modules()) {
    if (auto* embedding = module->as<torch::nn::Embedding>()) {
      if (const auto padding = embedding->options.padding_idx()) embedding->weight[*padding].zero_();
    }
  }
}

EncodedSource Seq2SeqImpl::encode(const torch::Tensor& src, const torch::Tensor& src_lengths) {
  const EncoderOutput encoded = encoder(src, src_lengths);
  return {decoder->attention().prepare(encoded.outputs, src_lengths), decoder->initial_state(encoded.state)};
}

Seq2SeqOutput Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                   const torch::Tensor& dec_in) {
  const EncodedSource encoded = encode(src, src_lengths);
  const TeacherForced decoded = decoder->teacher_forced(dec_in, encoded.state, encoded.memory, /*keep_weights=*/true);
  return {decoder->project(decoded.features), decoded.weights};
}

Seq2SeqImpl::TokenLosses Seq2SeqImpl::token_losses(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                                   const torch::Tensor& dec_in, const torch::Tensor& dec_tgt,
                                                   const torch::Tensor& rows, double label_smoothing) {
  const EncodedSource encoded = encode(src, src_lengths);
  const torch::Tensor features = decoder->teacher_forced(dec_in, encoded.state, encoded.memory, false).features;
  const torch::Tensor selected = gather_rows(features.reshape({-1, features.size(-1)}), rows);  // [N, H]
  const torch::Tensor targets = dec_tgt.reshape({-1}).index_select(0, rows);                       // [N]
  return {decoder->token_losses(selected, targets, label_smoothing), rows};
}

std::vector<double> step_weights(const std::vector<int64_t>& tokens_at_step, LossAverage average) {
  int64_t tokens = 0;
  for (const int64_t at_step : tokens_at_step) tokens += at_step;
  const auto steps = static_cast<double>(tokens_at_step.size());
  std::vector<double> weights(tokens_at_step.size());
  for (std::size_t t = 0; t < weights.size(); ++t) {
    const auto at_step = static_cast<double>(tokens_at_step[t]);
    weights[t] = average == LossAverage::kToken ? 1.0 / static_cast<double>(tokens) : 1.0 / (at_step * steps);
  }
  return weights;
}

namespace {

// Each real token's weight, its step's: rows are flat indices b * T + t. On the CPU one pass over
// the rows: the dozen small tensor operations that made the notebook's average took longer with
// their backward nodes. On a GPU the step weights travel from
// pinned memory without waiting for the device, and are indexed there.
torch::Tensor token_weights(const torch::Tensor& rows, int64_t steps, const std::vector<double>& step_weights,
                            const torch::TensorOptions& options) {
  TORCH_CHECK(static_cast<int64_t>(step_weights.size()) >= steps, "step weights must cover every decoder step");
  if (!rows.is_cpu()) {
    torch::Tensor host = torch::tensor(c10::ArrayRef<double>(step_weights.data(), static_cast<std::size_t>(steps)),
                                       torch::kFloat64);
    if (rows.is_cuda()) host = host.pin_memory();
    return host.to(rows.device(), options.dtype().toScalarType(), /*non_blocking=*/true)
        .index_select(0, rows.remainder(steps));
  }
  const torch::Tensor flat = rows.contiguous();
  const int64_t* row = flat.data_ptr<int64_t>();
  const int64_t count = flat.numel();
  torch::Tensor weights = torch::empty({count}, options);
  AT_DISPATCH_FLOATING_TYPES_AND2(torch::kHalf, torch::kBFloat16, weights.scalar_type(), "token_weights", [&] {
    scalar_t* weight = weights.data_ptr<scalar_t>();
    for (int64_t i = 0; i < count; ++i) weight[i] = static_cast<scalar_t>(step_weights[row[i] % steps]);
  });
  return weights;
}

// Each token's loss times its step's weight, summed; with the plain sum and the token count.
LossOutput weighted_sum(const torch::Tensor& per_token, const torch::Tensor& rows, int64_t steps,
                        const std::vector<double>& step_weights) {
  return {(per_token * token_weights(rows, steps, step_weights, per_token.options())).sum(), per_token.sum(),
          rows.size(0)};
}

}  // namespace

LossOutput Seq2SeqImpl::average_loss(const TokenLosses& losses, const std::vector<int64_t>& tokens_at_step,
                                     LossAverage average) const {
  if (average == LossAverage::kStep) {
    return weighted_sum(losses.per_token, losses.rows, static_cast<int64_t>(tokens_at_step.size()),
                        step_weights(tokens_at_step, average));
  }
  const torch::Tensor sum = losses.per_token.sum();
  const int64_t tokens = losses.rows.size(0);
  return {sum / static_cast<double>(std::max<int64_t>(tokens, 1)), sum, tokens};
}

LossOutput Seq2SeqImpl::loss(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                             const torch::Tensor& dec_tgt, const LossOptions& options) {
  const torch::Tensor real = dec_tgt.ne(0);
  const torch::Tensor rows = real.reshape({-1}).nonzero().squeeze(1);
  const torch::Tensor at_step = real.sum(0).to(torch::kCPU, torch::kLong).contiguous();
  const std::vector<int64_t> tokens_at_step(at_step.data_ptr<int64_t>(), at_step.data_ptr<int64_t>() + at_step.numel());
  return average_loss(token_losses(src, src_lengths, dec_in, dec_tgt, rows, options.label_smoothing), tokens_at_step,
                      options.average);
}

LossOutput Seq2SeqImpl::loss(const data::Batch& batch, const LossOptions& options) {
  return average_loss(
      token_losses(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt, batch.target_rows, options.label_smoothing),
      batch.tokens_at_step, options.average);
}

LossOutput Seq2SeqImpl::padded_loss(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                     const torch::Tensor& dec_in, const torch::Tensor& dec_tgt,
                                     const LossOptions& options) {
  const EncodedSource encoded = encode(src, src_lengths);
  const torch::Tensor features = decoder->teacher_forced(dec_in, encoded.state, encoded.memory, false).features;
  const torch::Tensor per_token =
      decoder->token_losses(features.reshape({-1, features.size(-1)}), dec_tgt.reshape({-1}), options.label_smoothing)
          .view(dec_tgt.sizes());
  const torch::Tensor real = dec_tgt.ne(0);
  const torch::Tensor counted = torch::where(real, per_token, torch::zeros({}, per_token.options()));
  const torch::Tensor ones = real.to(per_token.scalar_type());
  torch::Tensor weights;  // what average_loss divides each token's loss by, on the device
  if (options.average == LossAverage::kStep) {
    const torch::Tensor step_count = ones.sum(0);         // [T]
    const torch::Tensor steps = step_count.gt(0).sum();  // the batch's own T: its last step has a token
    weights = ones / (step_count.clamp_min(1.0) * steps.to(ones.scalar_type()));
  } else {
    weights = ones / ones.sum().clamp_min(1.0);
  }
  return {(counted * weights).sum(), counted.sum(), 0};
}

LossOutput Seq2SeqImpl::weighted_loss(const data::Batch& batch, const std::vector<double>& step_weights,
                                      double label_smoothing) {
  const auto [per_token, rows] =
      token_losses(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt, batch.target_rows, label_smoothing);
  return weighted_sum(per_token, rows, batch.dec_tgt.size(1), step_weights);
}

}  // namespace luong::models
