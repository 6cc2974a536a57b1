#pragma once
// The recurrent layers of the encoder and both decoders: GRU (the notebook's) or LSTM (the paper's),
// stacked, registered on their owner as PyTorch names them ("gru" or "lstm" with weight_ih_l0 ...),
// so that state dicts load into nn.GRU / nn.LSTM.
#include <torch/torch.h>

#include <utility>
#include <vector>

#include "luong/util/options.h"

namespace luong::models {

enum class CellKind { kGru, kLstm };

/// The recurrent state between steps: hidden [layers, B, H], and for LSTM the cell [layers, B, H].
struct RecurrentState {
  torch::Tensor hidden;
  torch::Tensor cell;  ///< undefined for GRU
  RecurrentState index_select(const torch::Tensor& rows) const;
};

struct RecurrentOptions {
  RecurrentOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(CellKind, cell) = CellKind::kGru;
  TORCH_ARG(int64_t, layers) = 1;
  /// Dropout on each layer's output that feeds the next layer (the paper's "between layers").
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bidirectional) = false;
};

/// The GRU or LSTM stack of a module (one of the two is set).
struct RecurrentLayers {
  CellKind kind = CellKind::kGru;
  torch::nn::GRU gru{nullptr};
  torch::nn::LSTM lstm{nullptr};
  double dropout = 0.0;

  /// Per layer and direction: w_ih, w_hh, b_ih, b_hh (gates r|z|n for GRU, i|f|g|o for LSTM).
  std::vector<torch::Tensor> all_weights() const;
  int64_t layers() const;

  /// One time step of every layer: input [B, I], state -> the state after it. Dropout between
  /// layers when `training` (the same draws as nn.GRU/nn.LSTM would make are not promised).
  RecurrentState step(const torch::Tensor& input, const RecurrentState& state, bool training) const;

  /// The whole stack over a packed batch: x [B, S, I], lengths [B] on the CPU -> outputs
  /// [B, S, H * directions] (zero on padding) and the final state [layers * directions, B, H].
  std::pair<torch::Tensor, RecurrentState> sequence(const torch::Tensor& x, const torch::Tensor& lengths);

  /// What sequence() computes, with `lengths` on x's device and every shape fixed by x's: nothing
  /// is read back to the host, so a CUDA graph can hold it. Layer by layer and direction by
  /// direction: a GRU direction is one call of LibTorch's gru (cuDNN) over the padded rows, the
  /// backward one over each row reversed within its length, and the final states gathered at each
  /// row's end; an LSTM, whose final cell no whole-sequence call returns, steps its cells with
  /// the state held past each row's end. Dropout between layers when `training` (other draws than
  /// nn.GRU's).
  std::pair<torch::Tensor, RecurrentState> sequence_padded(const torch::Tensor& x, const torch::Tensor& lengths,
                                                           bool training) const;
};

/// Registers the stack on `owner` under "gru" or "lstm" (batch_first) and returns it.
RecurrentLayers register_recurrent(torch::nn::Module& owner, const RecurrentOptions& options);

/// embedding(ids) through gather_rows, the padding row's gradient zero as nn.Embedding's
/// padding_idx makes it.
torch::Tensor embedding_lookup(const torch::nn::Embedding& embedding, const torch::Tensor& ids);

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::CellKind> {
  static constexpr std::pair<luong::models::CellKind, const char*> values[] = {{luong::models::CellKind::kGru, "gru"},
                                                                             {luong::models::CellKind::kLstm, "lstm"}};
};
