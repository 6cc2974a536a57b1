#include "luong/models/encoder.h"

#include "luong/models/dropout.h"
#include "luong/models/fused_recurrence.h"
#include "luong/models/matrix_products.h"

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

bool EncoderImpl::uses_fused_kernel(const torch::Device& device) const { return options.fused() && device.is_cpu(); }

namespace {

// [2L, B, H] (layer-major, forward then backward) -> [L, B, 2H]: each layer's two final states side by side.
torch::Tensor join_directions(const torch::Tensor& state, int64_t layers, int64_t hidden) {
  const int64_t batch = state.size(1);
  return state.view({layers, 2, batch, hidden}).permute({0, 2, 1, 3}).reshape({layers, batch, 2 * hidden});
}

}  // namespace

// The stack layer by layer, each layer (both directions) one fused node: what recurrent.sequence()
// computes, with the dropout between layers drawn here.
std::pair<torch::Tensor, RecurrentState> EncoderImpl::fused_sequence(const torch::Tensor& x, const torch::Tensor& lengths) {
  const bool lstm = options.cell() == CellKind::kLstm;
  std::vector<torch::Tensor> hidden, cell;
  torch::Tensor input = x;
  for (int64_t l = 0; l < options.layers(); ++l) {
    const FusedLayerOutput out =
        options.bidirectional()
            ? fused_bidirectional_layer(input, lengths, CellWeights::of(recurrent, l, 0), CellWeights::of(recurrent, l, 1),
                                        lstm)
            : fused_recurrent_layer(input, lengths, CellWeights::of(recurrent, l, 0), lstm, false);
    hidden.push_back(out.hidden.reshape({-1, out.hidden.size(-2), out.hidden.size(-1)}));  // [directions, B, H]
    if (lstm) cell.push_back(out.cell.reshape({-1, out.cell.size(-2), out.cell.size(-1)}));
    input = out.outputs;
    if (l + 1 < options.layers()) input = maybe_dropout(input, recurrent.dropout, is_training());
  }
  return {input, {torch::cat(hidden), lstm ? torch::cat(cell) : torch::Tensor()}};
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& lengths) {
  const double p = options.dropout();
  const torch::Tensor embedded = maybe_dropout(embedding_lookup(embedding, src), p, is_training());  // [B, S, E]
  // On a GPU, the padded form: packing needs the lengths on the host, a wait at every batch, and
  // it would tie a CUDA graph to one batch's lengths.
  auto [outputs, state] = uses_fused_kernel(src.device()) ? fused_sequence(embedded, lengths)
                          : src.is_cuda()                 ? recurrent.sequence_padded(embedded, lengths, is_training())
                                                          : recurrent.sequence(embedded, lengths);
  if (options.bidirectional()) {
    const int64_t layers = options.layers(), h = options.hidden_size();
    const torch::Tensor padding = src.ne(0).unsqueeze(-1).to(outputs.scalar_type());
    // (nn::Linear's function, with its products in oneDNN where they pay)
    const auto bridged = [](torch::nn::Linear& to, const torch::Tensor& from) {
      return torch::tanh(linear_through_products(from, to->weight, to->bias));
    };
    outputs = bridged(bridge, outputs) * padding;
    state.hidden = bridged(bridge, join_directions(state.hidden, layers, h));
    if (state.cell.defined()) state.cell = bridged(cell_bridge, join_directions(state.cell, layers, h));
  }
  return {maybe_dropout(outputs, p, is_training()), state};
}

}  // namespace luong::models
