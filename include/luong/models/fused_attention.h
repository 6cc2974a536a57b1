#pragma once
// The attention of the fused teacher-forced decoders (models/fused_recurrence.cpp), one decoder step
// for a block of batch rows, forward and backward side by side: global, local-m and local-p windows
// with the dot, general, concat and location scores, and local-p's Gaussian, its position predictor
// and the notebook's renormalisation. It computes what GlobalAttention, LocalMonotonicAttention and
// PredictiveAlignmentAttention compute (those modules are the reference in the tests), with each
// step's query-side products as matrix products over the block's rows and every parameter's
// gradient as one product over all steps at the end.
#include <torch/torch.h>

#include <vector>

#include "luong/models/attention.h"
#include "luong/models/matrix_products.h"

namespace luong::models {

/// What a fused decoder takes of its attention module: the configuration, the dot/general scale, and
/// the parameters that act on each step's query (the keys, the query-independent half of the score,
/// come from the module's prepare() before the kernel, so their parameters are autograd's).
struct FusedAttentionParameters {
  AttentionConfig config;
  /// dot and general: 1 / sqrt(H) or 1 (AttentionConfig::scale); the other scores ignore it.
  double scale = 1.0;
  /// In this order, those present: concat W_a[:, :H] [H, H] and v_a [1, H]; location W_a [P, H];
  /// local-p W_p [H, H], b_p [H], v_p [1, H], b_v [1].
  std::vector<torch::Tensor> tensors;

  /// Gathers them from a decoder's attention module of hidden size H.
  static FusedAttentionParameters of(AttentionImpl& attention, const AttentionConfig& config, int64_t hidden_size);
  /// Global attention with the dot or general score (keys prepared by the caller), no parameters.
  static FusedAttentionParameters global(double scale);
};

/// The kernels' side: built from the parameters in the forward pass (which it runs step by step and
/// records), rebuilt from the autograd context in the backward pass.
class StepAttention {
 public:
  /// keys and values [B, S, H] (contiguous), lengths [B] int64 on the CPU, `steps` T, the parameters'
  /// tensors as FusedAttentionParameters::tensors lists them.
  StepAttention(const AttentionConfig& config, double scale, at::TensorList parameters, torch::Tensor keys,
                torch::Tensor values, torch::Tensor lengths, int64_t steps, const MatrixProducts& products);
  explicit StepAttention(torch::autograd::AutogradContext* ctx);
  void save(torch::autograd::AutogradContext* ctx) const;

  /// Buffers of one block of rows (one per thread).
  struct Workspace {
    torch::Tensor scores;  ///< location: [rows, P], the step's scores
    torch::Tensor row;     ///< [S]: a row's weight gradients
    torch::Tensor terms;   ///< [H]: concat's terms of one score
  };
  Workspace workspace(int64_t rows) const;

  /// Step t for rows [first, first + rows) (a workspace of at least `rows` rows): query [rows, H] ->
  /// contexts()[t] = [context; query] for those rows; the weights are recorded for the backward pass.
  /// The steps a decoder skips (past a row's target) stay zero in every record.
  template <typename scalar_t>
  void forward_step(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query, Workspace& workspace) const;

  /// Step t backwards: dch [rows, 2H] (gradients of [context; query], row stride 2H) -> dquery
  /// [rows, H] (overwritten: dch's query half plus every path through the scores and the window's
  /// position); the keys' and values' gradients accumulate, and so do the per-step records the
  /// parameters' gradients are made of.
  template <typename scalar_t>
  void backward_step(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query, const scalar_t* dch,
                     torch::Tensor& dquery, Workspace& workspace);

  /// After the backward loop: appends the gradients of keys and values, then of each parameter in
  /// FusedAttentionParameters::tensors' order. queries [T, B, H]: every step's query; tokens [N]: the
  /// steps t * B + b that the decoder ran (PackedRows::tokens), which the products run over.
  void append_input_gradients(torch::autograd::variable_list& out) const;
  void append_parameter_gradients(torch::autograd::variable_list& out, const torch::Tensor& queries,
                                  const torch::Tensor& tokens) const;

  /// [context; query] of every step [T, B, 2H] (what W_c, or the next layer, reads).
  const torch::Tensor& contexts() const { return contexts_; }
  /// Every step's weights [T, B, S], exactly 0 outside each window.
  const torch::Tensor& weights() const { return weights_; }

 private:
  // The window [lo, hi) of row `row` (a batch index) at step t.
  struct Window {
    int64_t lo, hi;
  };
  template <typename scalar_t>
  Window window(int64_t t, int64_t row) const;
  template <typename scalar_t>
  void position_forward(int64_t t, int64_t first, int64_t rows, const torch::Tensor& query) const;
  template <typename scalar_t>
  const scalar_t* position_backward(int64_t t, int64_t b, const Window& w, const scalar_t* a, scalar_t* dw);

  bool concat() const { return config_.score == ScoreKind::kConcat; }
  bool location() const { return config_.score == ScoreKind::kLocation; }
  bool predictive() const { return config_.kind == AttentionKind::kLocalPredictive; }

  AttentionConfig config_;
  double scale_ = 1.0;
  MatrixProducts products_;
  int64_t T_ = 0, B_ = 0, S_ = 0, H_ = 0, P_ = 0;
  // Detached; the matrices (query_weight_: concat's W_a[:, :H] or location's W_a; position_weight_:
  // local-p's W_p) as the products take them.
  torch::Tensor query_weight_, score_vector_, position_weight_, position_bias_, position_vector_, position_offset_;
  // The per-step products' operands: query_weight_ and position_weight_ transposed forwards, as they
  // are backwards.
  PanelOperand query_step_, position_step_;
  torch::Tensor keys_, values_, lengths_;
  // Recorded in the forward pass.
  torch::Tensor contexts_;         // [T, B, 2H]
  torch::Tensor weights_;          // [T, B, S]
  torch::Tensor align_;            // local-p: [T, B, S], the window's softmax before the Gaussian
  torch::Tensor query_part_;       // concat: [T, B, H], W_a[:, :H] h_t
  torch::Tensor position_hidden_;  // local-p: [T, B, H], tanh(W_p h_t + b_p)
  torch::Tensor position_gate_;    // local-p: [T, B], sigmoid(v_p . tanh(W_p h_t + b_p) + b_v)
  // Accumulated in the backward pass.
  torch::Tensor dkeys_, dvalues_;
  torch::Tensor d_query_part_;     // concat: [T, B, H]
  torch::Tensor d_score_vector_;   // concat: [T, B, H], each row's share of v_a's gradient
  torch::Tensor d_scores_;         // location: [T, B, P]
  torch::Tensor d_position_hidden_;  // local-p: [T, B, H], the gradient of W_p h_t + b_p
  torch::Tensor d_position_gate_;    // local-p: [T, B], the gradient of v_p . tanh(...) + b_v
};

}  // namespace luong::models
