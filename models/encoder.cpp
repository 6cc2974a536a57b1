#include "luong/models/encoder.h"

#include "luong/models/fused_recurrence.h"

namespace luong::models {

EncoderImpl::EncoderImpl(const EncoderOptions& options_) : options(options_) { reset(); }

void EncoderImpl::reset() {
  const int64_t embed = options.embed_size() > 0 ? options.embed_size() : options.hidden_size();
  embedding = register_module(
      "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(options.vocab_size(), embed).padding_idx(0)));
  gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(embed, options.hidden_size())
                                                  .num_layers(options.layers())
                                                  .dropout(options.layers() > 1 ? options.dropout() : 0.0)
                                                  .bidirectional(options.bidirectional())
                                                  .batch_first(true)));
  if (options.bidirectional()) {
    bridge = register_module("bridge", torch::nn::Linear(2 * options.hidden_size(), options.hidden_size()));
  }
}

bool EncoderImpl::uses_fused_kernel(const torch::Device& device) const {
  return options.fused() && device.is_cpu() && options.layers() == 1 && !options.bidirectional();
}

std::tuple<torch::Tensor, torch::Tensor> EncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& lengths) {
  namespace rnn = torch::nn::utils::rnn;
  const torch::Tensor embedded = embedding(src);  // [B, S, E]
  if (uses_fused_kernel(src.device())) {
    auto [outputs, last] = fused_gru_sequence(embedded, lengths, GruWeights::of(gru));
    return {outputs, last.unsqueeze(0)};
  }
  const rnn::PackedSequence packed =
      rnn::pack_padded_sequence(embedded, lengths.to(torch::kCPU, torch::kLong), /*batch_first=*/true,
                                /*enforce_sorted=*/false);
  auto [packed_outputs, hidden] = gru->forward_with_packed_input(packed);
  torch::Tensor outputs = std::get<0>(rnn::pad_packed_sequence(packed_outputs, /*batch_first=*/true,
                                                               /*padding_value=*/0.0, src.size(1)));
  if (options.bidirectional()) {
    const int64_t layers = options.layers();
    const int64_t batch = src.size(0);
    // [2L, B, H] -> [L, B, 2H]: each layer's forward and backward final states side by side.
    hidden = hidden.view({layers, 2, batch, options.hidden_size()}).permute({0, 2, 1, 3}).reshape(
        {layers, batch, 2 * options.hidden_size()});
    const torch::Tensor padding = src.ne(0).unsqueeze(-1).to(outputs.scalar_type());
    outputs = torch::tanh(bridge(outputs)) * padding;
    hidden = torch::tanh(bridge(hidden));
  }
  return {outputs, hidden};
}

}  // namespace luong::models
