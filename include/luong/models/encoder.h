#pragma once
// The notebook's Encoder: embedding (padding_idx 0) + GRU over packed variable-length batches.
#include <torch/torch.h>

#include <tuple>

namespace luong::models {

struct EncoderOptions {
  EncoderOptions(int64_t vocab_size, int64_t hidden_size) : vocab_size_(vocab_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, vocab_size);
  /// H: GRU state size, and the size of every output the decoder sees.
  TORCH_ARG(int64_t, hidden_size);
  /// Embedding size; 0 means H (the notebook embeds the source at the hidden size).
  TORCH_ARG(int64_t, embed_size) = 0;
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout between GRU layers (layers > 1).
  TORCH_ARG(double, dropout) = 0.0;
  /// A bidirectional GRU; `bridge` maps [forward; backward] (2H) back to H for outputs and state.
  TORCH_ARG(bool, bidirectional) = false;
  /// On the CPU, run the GRU through the hand-differentiated kernel of fused_recurrence.h where the
  /// architecture allows (one layer, one direction); elsewhere, and on CUDA (cuDNN), LibTorch's module.
  TORCH_ARG(bool, fused) = true;
};

class EncoderImpl : public torch::nn::Cloneable<EncoderImpl> {
 public:
  explicit EncoderImpl(const EncoderOptions& options);
  void reset() override;

  /// src [B, S] int64 (0 = <pad>), lengths [B] int64 (CPU or device) ->
  ///   outputs [B, S, H] (zero on padding), hidden [layers, B, H].
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& src, const torch::Tensor& lengths);
  /// Whether forward() takes the fused kernel for inputs on `device`.
  bool uses_fused_kernel(const torch::Device& device) const;

  EncoderOptions options;
  torch::nn::Embedding embedding{nullptr};
  torch::nn::GRU gru{nullptr};
  torch::nn::Linear bridge{nullptr};  ///< bidirectional only: 2H -> H
};
TORCH_MODULE(Encoder);

}  // namespace luong::models
