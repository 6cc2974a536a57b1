// Both decoders and their shared GRU step live in one translation unit: they are two short
// variations of the same recurrence.
#include "luong/models/decoder.h"

#include "luong/models/fused_recurrence.h"
#include "luong/models/linear_cross_entropy.h"
#include "luong/models/luong_decoder.h"

#include <cmath>

namespace luong::models {

DecoderState DecoderState::index_select(const torch::Tensor& rows) const {
  return {hidden.index_select(1, rows), attentional.defined() ? attentional.index_select(0, rows) : attentional};
}

torch::Tensor gru_step(torch::nn::GRU& gru, const torch::Tensor& input, const torch::Tensor& hidden, double dropout,
                       bool training) {
  const std::vector<torch::Tensor>& weights = gru->all_weights();  // per layer: w_ih, w_hh, b_ih, b_hh
  const int64_t layers = hidden.size(0);
  std::vector<torch::Tensor> next;
  next.reserve(static_cast<std::size_t>(layers));
  torch::Tensor x = input;
  for (int64_t l = 0; l < layers; ++l) {
    const auto i = static_cast<std::size_t>(4 * l);
    torch::Tensor h = torch::gru_cell(x, hidden[l], weights[i], weights[i + 1], weights[i + 2], weights[i + 3]);
    next.push_back(h);
    x = (l + 1 < layers && dropout > 0) ? torch::dropout(h, dropout, training) : h;
  }
  return layers == 1 ? next[0].unsqueeze(0) : torch::stack(next);
}

TeacherForced DecoderInterface::teacher_forced(const torch::Tensor& dec_in, const DecoderState& initial,
                                               const AttentionMemory& memory, bool keep_weights) {
  const int64_t steps = dec_in.size(1);
  std::vector<torch::Tensor> features;
  std::vector<torch::Tensor> weights;
  features.reserve(static_cast<std::size_t>(steps));
  weights.reserve(static_cast<std::size_t>(steps));
  DecoderState state = initial;
  for (int64_t t = 0; t < steps; ++t) {
    DecoderStep step = this->step(dec_in.select(1, t), state, memory, t);
    features.push_back(step.features);
    weights.push_back(step.weights);
    state = std::move(step.state);
  }
  return {torch::stack(features, 1), keep_weights ? torch::stack(weights, 1) : torch::Tensor()};
}

torch::Tensor DecoderInterface::token_losses(const torch::Tensor& features, const torch::Tensor& targets) {
  if (decoder_options().fused() && features.device().is_cpu()) {
    return linear_cross_entropy(features, fc->weight, fc->bias, targets);
  }
  return torch::nn::functional::cross_entropy(project(features), targets,
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
}

namespace {

void register_common(DecoderInterface& decoder, const DecoderOptions& o, std::shared_ptr<AttentionImpl>& attention) {
  decoder.embedding = decoder.register_module(
      "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(o.vocab_size(), o.embed_size()).padding_idx(0)));
  decoder.gru = decoder.register_module(
      "gru", torch::nn::GRU(torch::nn::GRUOptions(o.embed_size() + o.hidden_size(), o.hidden_size())
                                .num_layers(o.layers())
                                .dropout(o.layers() > 1 ? o.dropout() : 0.0)
                                .batch_first(true)));
  attention = decoder.register_module("attention", make_attention(o.attention(), o.hidden_size()));
}

}  // namespace

// ---- the notebook's Decoder ----------------------------------------------------------------------

DecoderImpl::DecoderImpl(const DecoderOptions& options_) : options(options_) {
  register_common(*this, options, attention_);
  fc = register_module("fc", torch::nn::Linear(options.hidden_size(), options.vocab_size()));
}

DecoderState DecoderImpl::initial_state(const torch::Tensor& encoder_hidden) { return {encoder_hidden, {}}; }

DecoderStep DecoderImpl::step(const torch::Tensor& previous_word, const DecoderState& state,
                              const AttentionMemory& memory, int64_t t) {
  const torch::Tensor embedded = embedding(previous_word);                            // [B, E]
  const AttentionOutput attended = attention_->forward(memory, state.hidden[-1], t);  // query h_{t-1}
  const torch::Tensor input = torch::cat({embedded, attended.context}, 1);            // [B, E + H]
  const torch::Tensor hidden = gru_step(gru, input, state.hidden, options.dropout(), is_training());
  return {hidden[-1], attended.weights, attended.positions, {hidden, {}}};
}

// ---- the notebook's LuongDecoder -----------------------------------------------------------------

LuongDecoderImpl::LuongDecoderImpl(const DecoderOptions& options_) : options(options_) {
  register_common(*this, options, attention_);
  Wc = register_module("Wc", torch::nn::Linear(2 * options.hidden_size(), options.hidden_size()));
  fc = register_module("fc", torch::nn::Linear(options.hidden_size(), options.vocab_size()));
}

DecoderState LuongDecoderImpl::initial_state(const torch::Tensor& encoder_hidden) {
  return {encoder_hidden, torch::zeros({encoder_hidden.size(1), options.hidden_size()}, encoder_hidden.options())};
}

DecoderStep LuongDecoderImpl::step(const torch::Tensor& previous_word, const DecoderState& state,
                                   const AttentionMemory& memory, int64_t t) {
  const torch::Tensor embedded = embedding(previous_word);                     // [B, E]
  const torch::Tensor input = torch::cat({embedded, state.attentional}, 1);   // [B, E + H]
  const torch::Tensor hidden = gru_step(gru, input, state.hidden, options.dropout(), is_training());
  const torch::Tensor h_t = hidden[-1];                                        // [B, H]
  const AttentionOutput attended = attention_->forward(memory, h_t, t);
  const torch::Tensor attentional = torch::tanh(Wc(torch::cat({attended.context, h_t}, 1)));  // h~_t [B, H]
  return {attentional, attended.weights, attended.positions, {hidden, attentional}};
}

bool LuongDecoderImpl::uses_fused_kernel(const torch::Device& device) const {
  const AttentionConfig& a = options.attention();
  return options.fused() && device.is_cpu() && options.layers() == 1 && a.kind == AttentionKind::kGlobal &&
         (a.score == ScoreKind::kDot || a.score == ScoreKind::kGeneral);
}

TeacherForced LuongDecoderImpl::teacher_forced(const torch::Tensor& dec_in, const DecoderState& state,
                                               const AttentionMemory& memory, bool keep_weights) {
  if (keep_weights || !uses_fused_kernel(dec_in.device())) {
    return DecoderInterface::teacher_forced(dec_in, state, memory, keep_weights);
  }
  const double scale = options.attention().scale ? 1.0 / std::sqrt(static_cast<double>(options.hidden_size())) : 1.0;
  return {fused_luong_teacher_forced(embedding(dec_in), state.hidden[0], memory.keys, memory.encoder_outputs,
                                     memory.lengths, GruWeights::of(gru), Wc->weight, Wc->bias, scale),
          {}};
}

std::shared_ptr<DecoderInterface> make_decoder(DecoderKind kind, const DecoderOptions& options) {
  if (kind == DecoderKind::kLuong) return std::make_shared<LuongDecoderImpl>(options);
  return std::make_shared<DecoderImpl>(options);
}

}  // namespace luong::models
