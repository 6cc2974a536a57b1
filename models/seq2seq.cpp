#include "luong/models/seq2seq.h"

#include <cmath>

#include "luong/models/fused_recurrence.h"
#include "luong/models/linear_cross_entropy.h"
#include "luong/models/luong_decoder.h"
#include "luong/util/error.h"

namespace luong::models {

Seq2SeqImpl::Seq2SeqImpl(const Seq2SeqOptions& options_) : options(options_) {
  if (options.hidden_size() <= 0 || options.embed_size() <= 0 || options.layers() <= 0) {
    throw Error("hidden size, embedding size and layers must be positive");
  }
  encoder = register_module("encoder", Encoder(EncoderOptions(options.source_vocab_size(), options.hidden_size())
                                                   .layers(options.layers())
                                                   .dropout(options.dropout())
                                                   .bidirectional(options.bidirectional())));
  decoder = register_module(
      "decoder", make_decoder(options.decoder(), DecoderOptions(options.target_vocab_size(), options.embed_size(),
                                                                options.hidden_size())
                                                     .layers(options.layers())
                                                     .dropout(options.dropout())
                                                     .attention(options.attention())));
}

bool Seq2SeqImpl::fused_encoder(const torch::Tensor& src) const {
  return options.fused() && src.device().is_cpu() && options.layers() == 1 && !options.bidirectional();
}

bool Seq2SeqImpl::fused_decoder(const torch::Tensor& src) const {
  const AttentionConfig& attention = options.attention();
  return fused_encoder(src) && options.decoder() == DecoderKind::kLuong && attention.kind == AttentionKind::kGlobal &&
         (attention.score == ScoreKind::kDot || attention.score == ScoreKind::kGeneral);
}

EncodedSource Seq2SeqImpl::encode(const torch::Tensor& src, const torch::Tensor& src_lengths) {
  if (fused_encoder(src)) {
    auto [outputs, last] = fused_gru_sequence(encoder->embedding(src), src_lengths, GruWeights::of(encoder->gru));
    return {decoder->attention().prepare(outputs, src_lengths), decoder->initial_state(last.unsqueeze(0))};
  }
  auto [outputs, hidden] = encoder(src, src_lengths);
  return {decoder->attention().prepare(outputs, src_lengths), decoder->initial_state(hidden)};
}

std::pair<torch::Tensor, torch::Tensor> Seq2SeqImpl::decode_teacher_forced(const EncodedSource& encoded,
                                                                           const torch::Tensor& dec_in) {
  const int64_t steps = dec_in.size(1);
  std::vector<torch::Tensor> features;
  std::vector<torch::Tensor> weights;
  features.reserve(static_cast<std::size_t>(steps));
  weights.reserve(static_cast<std::size_t>(steps));
  DecoderState state = encoded.state;
  for (int64_t t = 0; t < steps; ++t) {
    DecoderStep step = decoder->step(dec_in.select(1, t), state, encoded.memory, t);
    features.push_back(step.features);
    weights.push_back(step.weights);
    state = std::move(step.state);
  }
  return {torch::stack(features, 1), torch::stack(weights, 1)};
}

Seq2SeqOutput Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                   const torch::Tensor& dec_in) {
  auto [features, attention] = decode_teacher_forced(encode(src, src_lengths), dec_in);
  return {decoder->project(features), attention};
}

Seq2SeqImpl::TokenLosses Seq2SeqImpl::token_losses(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                                   const torch::Tensor& dec_in, const torch::Tensor& dec_tgt) {
  const EncodedSource encoded = encode(src, src_lengths);
  torch::Tensor features;
  if (fused_decoder(src)) {
    const auto& luong = dynamic_cast<LuongDecoderImpl&>(*decoder);
    const double scale = options.attention().scale ? 1.0 / std::sqrt(static_cast<double>(options.hidden_size())) : 1.0;
    features = fused_luong_teacher_forced(decoder->embedding(dec_in), encoded.state.hidden[0], encoded.memory.keys,
                                          encoded.memory.encoder_outputs, encoded.memory.lengths,
                                          GruWeights::of(decoder->gru), luong.Wc->weight, luong.Wc->bias, scale);
  } else {
    features = decode_teacher_forced(encoded, dec_in).first;
  }
  const torch::Tensor real = dec_tgt.ne(0).reshape({-1});
  const torch::Tensor rows = real.nonzero().squeeze(1);
  const torch::Tensor selected = features.reshape({-1, features.size(-1)}).index_select(0, rows);  // [N, H]
  const torch::Tensor targets = dec_tgt.reshape({-1}).index_select(0, rows);                       // [N]
  const torch::Tensor per_token =
      options.fused() && selected.device().is_cpu()
          ? linear_cross_entropy(selected, decoder->fc->weight, decoder->fc->bias, targets)
          : torch::nn::functional::cross_entropy(decoder->project(selected), targets,
                                                 torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return {per_token, rows};
}

LossOutput Seq2SeqImpl::loss(const torch::Tensor& src, const torch::Tensor& src_lengths, const torch::Tensor& dec_in,
                             const torch::Tensor& dec_tgt, LossAverage average) {
  const auto [per_token, rows] = token_losses(src, src_lengths, dec_in, dec_tgt);
  const torch::Tensor sum = per_token.sum();
  const int64_t tokens = rows.size(0);
  if (average == LossAverage::kStep) {
    const int64_t steps = dec_tgt.size(1);
    const torch::Tensor step_of = rows.remainder(steps);
    const torch::Tensor step_sum = torch::zeros({steps}, per_token.options()).index_add(0, step_of, per_token);
    const torch::Tensor step_count =
        torch::zeros({steps}, per_token.options()).index_add(0, step_of, torch::ones_like(per_token));
    return {(step_sum / step_count.clamp_min(1.0)).sum() / static_cast<double>(steps), sum, tokens};
  }
  return {sum / static_cast<double>(std::max<int64_t>(tokens, 1)), sum, tokens};
}

LossOutput Seq2SeqImpl::weighted_loss(const torch::Tensor& src, const torch::Tensor& src_lengths,
                                      const torch::Tensor& dec_in, const torch::Tensor& dec_tgt,
                                      const torch::Tensor& step_weights) {
  TORCH_CHECK(step_weights.dim() == 1 && step_weights.size(0) >= dec_tgt.size(1),
              "weighted_loss: step_weights must cover every decoder step");
  const auto [per_token, rows] = token_losses(src, src_lengths, dec_in, dec_tgt);
  const torch::Tensor weights =
      step_weights.to(per_token.device(), per_token.scalar_type()).index_select(0, rows.remainder(dec_tgt.size(1)));
  return {(per_token * weights).sum(), per_token.sum(), rows.size(0)};
}

}  // namespace luong::models
