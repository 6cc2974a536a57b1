#pragma once
// The notebook's `LuongDecoder` (Luong et al. 2015, section 3 and 3.3): input feeding, attention on
// the current state h_t, the attentional vector h~_t = tanh(W_c [c_t; h_t]) fed to `fc` and to the
// next step.
#include "luong/models/decoder_interface.h"

namespace luong::models {

class LuongDecoderImpl : public DecoderInterface {
 public:
  explicit LuongDecoderImpl(const DecoderOptions& options);

  /// h~_0 = 0, as the notebook seeds it.
  DecoderState initial_state(const RecurrentState& encoder_state) override;
  /// h_t = RNN([emb(y_{t-1}); h~_{t-1}], h_{t-1}); c_t from a(h_t); features = h~_t [B, H].
  DecoderStep step(const torch::Tensor& previous_word, const DecoderState& state, const AttentionMemory& memory,
                   int64_t t) override;
  /// The fused kernel where uses_fused_kernel() (dropout included); the step loop otherwise.
  TeacherForced teacher_forced(const torch::Tensor& dec_in, const DecoderState& state, const AttentionMemory& memory,
                               bool keep_weights) override;
  AttentionImpl& attention() override { return *attention_; }
  const DecoderOptions& decoder_options() const override { return options; }
  void set_fused(bool fused) override { options.fused(fused); }

  DecoderOptions options;
  torch::nn::Linear Wc{nullptr};  ///< [H, 2H] over [c_t; h_t]

 private:
  std::shared_ptr<AttentionImpl> attention_;
};
TORCH_MODULE(LuongDecoder);

}  // namespace luong::models
