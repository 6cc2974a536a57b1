#pragma once
// The notebook's first `Decoder` (Bahdanau-style ordering): attention is computed from the previous
// hidden state h_{t-1}, the context is concatenated to the embedding and fed to the recurrent
// stack, and its top output goes through `fc` to the vocabulary.
#include "luong/models/decoder_interface.h"

namespace luong::models {

class DecoderImpl : public DecoderInterface {
 public:
  explicit DecoderImpl(const DecoderOptions& options);

  DecoderState initial_state(const RecurrentState& encoder_state) override;
  /// c_t from a(h_{t-1}); h_t = RNN([emb(y_{t-1}); c_t], h_{t-1}); features = h_t [B, H].
  DecoderStep step(const torch::Tensor& previous_word, const DecoderState& state, const AttentionMemory& memory,
                   int64_t t) override;
  /// The fused kernel where uses_fused_kernel() (dropout included); the step loop otherwise.
  TeacherForced teacher_forced(const torch::Tensor& dec_in, const DecoderState& state, const AttentionMemory& memory,
                               bool keep_weights) override;
  AttentionImpl& attention() override { return *attention_; }
  const DecoderOptions& decoder_options() const override { return options; }
  void set_fused(bool fused) override { options.fused(fused); }

  DecoderOptions options;

 private:
  std::shared_ptr<AttentionImpl> attention_;
};
TORCH_MODULE(Decoder);

}  // namespace luong::models
