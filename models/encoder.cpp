#include "luong/models/encoder.h"

#include "luong/models/fused_recurrence.h"

namespace luong::models {

EncoderImpl::EncoderImpl(const EncoderOptions& options_) : options(options_) { reset(); }

void EncoderImpl::reset() {
  const int64_t embed = options.embed_size() > 0 ? options.embed_size() : options.hidden_size();
  embedding = register_module(
      "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(options.vocab_size(), embed).padding_idx(0)));
  recurrent = register_recurrent(*this, RecurrentOptions(embed, options.hidden_size())
                                            .cell(options.cell())
                                            .layers(options.layers())
                                            .dropout(options.dropout())
                                            .bidirectional(options.bidirectional()));
  if (options.bidirectional()) {
    bridge = register_module("bridge", torch::nn::Linear(2 * options.hidden_size(), options.hidden_size()));
    if (options.cell() == CellKind::kLstm) {
      cell_bridge = register_module("cell_bridge", torch::nn::Linear(2 * options.hidden_size(), options.hidden_size()));
    }
  }
}

bool EncoderImpl::uses_fused_kernel(const torch::Device& device) const {
  return options.fused() && device.is_cpu() && options.cell() == CellKind::kGru && options.layers() == 1 &&
         !options.bidirectional() && (options.dropout() == 0 || !is_training());
}

namespace {

// [2L, B, H] (layer-major, forward then backward) -> [L, B, 2H]: each layer's two final states side by side.
torch::Tensor join_directions(const torch::Tensor& state, int64_t layers, int64_t hidden) {
  const int64_t batch = state.size(1);
  return state.view({layers, 2, batch, hidden}).permute({0, 2, 1, 3}).reshape({layers, batch, 2 * hidden});
}

}  // namespace

EncoderOutput EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& lengths) {
  const double p = options.dropout();
  const torch::Tensor embedded = maybe_dropout(embedding(src), p, is_training());  // [B, S, E]
  if (uses_fused_kernel(src.device())) {
    auto [outputs, last] = fused_gru_sequence(embedded, lengths, GruWeights::of(recurrent.gru));
    return {outputs, {last.unsqueeze(0), {}}};
  }
  auto [outputs, state] = recurrent.sequence(embedded, lengths);
  if (options.bidirectional()) {
    const int64_t layers = options.layers(), h = options.hidden_size();
    const torch::Tensor padding = src.ne(0).unsqueeze(-1).to(outputs.scalar_type());
    outputs = torch::tanh(bridge(outputs)) * padding;
    state.hidden = torch::tanh(bridge(join_directions(state.hidden, layers, h)));
    if (state.cell.defined()) state.cell = torch::tanh(cell_bridge(join_directions(state.cell, layers, h)));
  }
  return {maybe_dropout(outputs, p, is_training()), state};
}

}  // namespace luong::models
