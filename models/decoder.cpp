// Both decoders live in one translation unit: they are two short variations of the same recurrence.
#include "luong/models/decoder.h"

#include "luong/models/dropout.h"
#include "luong/models/fused_recurrence.h"
#include "luong/models/linear_cross_entropy.h"
#include "luong/models/luong_decoder.h"
#include "luong/util/error.h"

#include <cmath>

namespace luong::models {

DecoderState DecoderState::index_select(const torch::Tensor& rows) const {
  return {recurrent.index_select(rows), attentional.defined() ? attentional.index_select(0, rows) : attentional};
}

OutputLayerImpl::OutputLayerImpl(int64_t hidden_size, int64_t vocab_size, torch::nn::Embedding tied_to)
    : tied_(std::move(tied_to)) {
  // nn::Linear's own initialisation (the same draws in the same order), then its tensors.
  torch::nn::Linear linear(hidden_size, vocab_size);
  if (!tied_) weight_ = register_parameter("weight", linear->weight);
  bias = register_parameter("bias", linear->bias);
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

torch::Tensor DecoderInterface::token_losses(const torch::Tensor& features, const torch::Tensor& targets,
                                             double label_smoothing) {
  if (decoder_options().fused() && features.device().is_cpu()) {
    return linear_cross_entropy(features, fc->weight(), fc->bias, targets, label_smoothing);
  }
  return torch::nn::functional::cross_entropy(
      project(features), targets,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(label_smoothing));
}

namespace {

void register_common(DecoderInterface& decoder, const DecoderOptions& o, std::shared_ptr<AttentionImpl>& attention) {
  decoder.embedding = decoder.register_module(
      "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(o.vocab_size(), o.embed_size()).padding_idx(0)));
  decoder.recurrent = register_recurrent(
      decoder, RecurrentOptions(o.embed_size() + o.hidden_size(), o.hidden_size()).cell(o.cell()).layers(o.layers()).dropout(o.dropout()));
  attention = decoder.register_module("attention", make_attention(o.attention(), o.hidden_size()));
}

void register_output(DecoderInterface& decoder, const DecoderOptions& o) {
  if (o.tie_embeddings() && o.embed_size() != o.hidden_size()) {
    throw Error("tied embeddings need the embedding size (" + std::to_string(o.embed_size()) +
                ") to equal the hidden size (" + std::to_string(o.hidden_size()) + ")");
  }
  decoder.fc = decoder.register_module(
      "fc", OutputLayer(o.hidden_size(), o.vocab_size(), o.tie_embeddings() ? decoder.embedding : nullptr));
}

// What both decoders' fused kernels take besides their own inputs: the cells bottom first, the
// attention's parameters, and (training with dropout) the dropout masks between layers
// [L - 1, B, T, H], drawn here.
struct FusedStack {
  torch::Tensor embedded;  ///< the target embeddings [B, T, E], dropped out when training
  std::vector<CellWeights> cells;
  torch::Tensor between;
  torch::Tensor target_lengths;  ///< [B]: each row's steps up to its last non-padding token
  FusedAttentionParameters attention;
  bool lstm = false;
};

FusedStack fused_stack(DecoderInterface& decoder, const torch::Tensor& dec_in, bool training) {
  const DecoderOptions& o = decoder.decoder_options();
  FusedStack stack;
  stack.embedded = maybe_dropout(embedding_lookup(decoder.embedding, dec_in), o.dropout(), training);
  const torch::Tensor& embedded = stack.embedded;
  for (int64_t l = 0; l < o.layers(); ++l) stack.cells.push_back(CellWeights::of(decoder.recurrent, l, 0));
  stack.attention = FusedAttentionParameters::of(decoder.attention(), o.attention(), o.hidden_size());
  stack.lstm = o.cell() == CellKind::kLstm;
  const torch::Tensor steps = torch::arange(1, dec_in.size(1) + 1, dec_in.options().dtype(torch::kLong));
  stack.target_lengths = (dec_in.ne(0).to(torch::kLong) * steps).amax(1);
  if (o.dropout() > 0 && training && o.layers() > 1) {
    stack.between = dropout_mask(embedded, {o.layers() - 1, embedded.size(0), embedded.size(1), o.hidden_size()},
                                 o.dropout());
  }
  return stack;
}

}  // namespace

bool DecoderInterface::uses_fused_kernel(const torch::Device& device) const {
  return decoder_options().fused() && device.is_cpu();
}

// ---- the notebook's Decoder ----------------------------------------------------------------------

DecoderImpl::DecoderImpl(const DecoderOptions& options_) : options(options_) {
  register_common(*this, options, attention_);
  register_output(*this, options);
}

DecoderState DecoderImpl::initial_state(const RecurrentState& encoder_state) { return {encoder_state, {}}; }

DecoderStep DecoderImpl::step(const torch::Tensor& previous_word, const DecoderState& state,
                              const AttentionMemory& memory, int64_t t) {
  const double p = options.dropout();
  const torch::Tensor embedded = maybe_dropout(embedding_lookup(embedding, previous_word), p, is_training());  // [B, E]
  const AttentionOutput attended = attention_->forward(memory, state.recurrent.hidden[-1], t);        // query h_{t-1}
  const torch::Tensor input = torch::cat({embedded, attended.context}, 1);                            // [B, E + H]
  RecurrentState next = recurrent.step(input, state.recurrent, is_training());
  const torch::Tensor features = maybe_dropout(next.hidden[-1], p, is_training());
  return {features, attended.weights, attended.positions, {std::move(next), {}}};
}

TeacherForced DecoderImpl::teacher_forced(const torch::Tensor& dec_in, const DecoderState& state,
                                          const AttentionMemory& memory, bool keep_weights) {
  if (keep_weights || !uses_fused_kernel(dec_in.device())) {
    return DecoderInterface::teacher_forced(dec_in, state, memory, keep_weights);
  }
  const double p = options.dropout();
  const FusedStack stack = fused_stack(*this, dec_in, is_training());
  const torch::Tensor& embedded = stack.embedded;
  const RecurrentState& r = state.recurrent;
  const torch::Tensor top = fused_bahdanau_teacher_forced(embedded, r.hidden, stack.lstm ? r.cell : torch::Tensor(),
                                                          memory.keys, memory.encoder_outputs, memory.lengths,
                                                          stack.cells, stack.lstm, stack.attention, stack.between,
                                                          stack.target_lengths);
  return {maybe_dropout(top, p, is_training()), {}};
}

// ---- the notebook's LuongDecoder -----------------------------------------------------------------

LuongDecoderImpl::LuongDecoderImpl(const DecoderOptions& options_) : options(options_) {
  register_common(*this, options, attention_);
  Wc = register_module("Wc", torch::nn::Linear(2 * options.hidden_size(), options.hidden_size()));
  register_output(*this, options);
}

DecoderState LuongDecoderImpl::initial_state(const RecurrentState& encoder_state) {
  const torch::Tensor& h = encoder_state.hidden;
  return {encoder_state, torch::zeros({h.size(1), options.hidden_size()}, h.options())};
}

DecoderStep LuongDecoderImpl::step(const torch::Tensor& previous_word, const DecoderState& state,
                                   const AttentionMemory& memory, int64_t t) {
  const double p = options.dropout();
  const torch::Tensor embedded = maybe_dropout(embedding_lookup(embedding, previous_word), p, is_training());  // [B, E]
  const torch::Tensor input = torch::cat({embedded, state.attentional}, 1);                  // [B, E + H]
  RecurrentState next = recurrent.step(input, state.recurrent, is_training());
  const torch::Tensor h_t = next.hidden[-1];                                                 // [B, H]
  const AttentionOutput attended = attention_->forward(memory, h_t, t);
  // h~_t = tanh(Wc [c_t; h_t]), dropped out before the output layer and the next step's input.
  const torch::Tensor attentional =
      maybe_dropout(torch::tanh(Wc(torch::cat({attended.context, h_t}, 1))), p, is_training());
  return {attentional, attended.weights, attended.positions, {std::move(next), attentional}};
}

TeacherForced LuongDecoderImpl::teacher_forced(const torch::Tensor& dec_in, const DecoderState& state,
                                               const AttentionMemory& memory, bool keep_weights) {
  if (keep_weights || !uses_fused_kernel(dec_in.device())) {
    return DecoderInterface::teacher_forced(dec_in, state, memory, keep_weights);
  }
  const double p = options.dropout();
  const FusedStack stack = fused_stack(*this, dec_in, is_training());
  const torch::Tensor& embedded = stack.embedded;
  // The dropout on h~ is drawn here and applied inside the kernel (it feeds the next step too).
  const torch::Tensor mask = p > 0 && is_training()
                                 ? dropout_mask(embedded, {dec_in.size(0), dec_in.size(1), options.hidden_size()}, p)
                                 : torch::Tensor();
  const RecurrentState& r = state.recurrent;
  return {fused_luong_teacher_forced(embedded, r.hidden, stack.lstm ? r.cell : torch::Tensor(), memory.keys,
                                     memory.encoder_outputs, memory.lengths, stack.cells, stack.lstm, Wc->weight,
                                     Wc->bias, stack.attention, mask, stack.between, stack.target_lengths),
          {}};
}

std::shared_ptr<DecoderInterface> make_decoder(DecoderKind kind, const DecoderOptions& options) {
  if (kind == DecoderKind::kLuong) return std::make_shared<LuongDecoderImpl>(options);
  return std::make_shared<DecoderImpl>(options);
}

}  // namespace luong::models
