#pragma once
// The notebook's Encoder: embedding (padding_idx 0) + a GRU or LSTM stack over variable-length
// batches (packed; on a GPU padded, each row's end respected), optionally bidirectional, with the
// paper's dropout on the embeddings and between and after the layers.
#include <torch/torch.h>

#include "luong/models/recurrent.h"

namespace luong::models {

struct EncoderOptions {
  EncoderOptions(int64_t vocab_size, int64_t hidden_size) : vocab_size_(vocab_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, vocab_size);
  /// H: state size, and the size of every output the decoder sees.
  TORCH_ARG(int64_t, hidden_size);
  /// Embedding size; 0 means H (the notebook embeds the source at the hidden size).
  TORCH_ARG(int64_t, embed_size) = 0;
  TORCH_ARG(CellKind, cell) = CellKind::kGru;
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout on the embeddings, between the layers and on the outputs (training only).
  TORCH_ARG(double, dropout) = 0.0;
  /// A bidirectional stack; `bridge` maps [forward; backward] (2H) back to H for outputs and state.
  TORCH_ARG(bool, bidirectional) = false;
  /// On the CPU, run every layer and direction through the hand-differentiated kernel of
  /// fused_recurrence.h (GRU or LSTM); on CUDA, cuDNN per layer and direction over the padded rows
  /// (RecurrentLayers::sequence_padded).
  TORCH_ARG(bool, fused) = true;
};

struct EncoderOutput {
  torch::Tensor outputs;  ///< [B, S, H], zero on padding
  RecurrentState state;   ///< [layers, B, H] each (bridged when bidirectional)
};

class EncoderImpl : public torch::nn::Cloneable<EncoderImpl> {
 public:
  explicit EncoderImpl(const EncoderOptions& options);
  void reset() override;

  /// src [B, S] int64 (0 = <pad>), lengths [B] int64 (CPU or device).
  EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& lengths);
  /// Whether forward() takes the fused kernels for inputs on `device`.
  bool uses_fused_kernel(const torch::Device& device) const;

  EncoderOptions options;
  torch::nn::Embedding embedding{nullptr};

 private:
  std::pair<torch::Tensor, RecurrentState> fused_sequence(const torch::Tensor& x, const torch::Tensor& lengths);

 public:
  RecurrentLayers recurrent;
  torch::nn::Linear bridge{nullptr};       ///< bidirectional only: 2H -> H for outputs and hidden state
  torch::nn::Linear cell_bridge{nullptr};  ///< bidirectional LSTM only: 2H -> H for the cell state
};
TORCH_MODULE(Encoder);

}  // namespace luong::models
