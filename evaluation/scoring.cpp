#include "luong/evaluation/scoring.h"

namespace luong::evaluation {

CorpusLoss teacher_forced_loss(models::Seq2SeqImpl& model, const std::vector<data::Batch>& batches,
                               const torch::Device& device) {
  CorpusLoss out;
  if (batches.empty()) return out;
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  torch::Tensor sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  for (const data::Batch& cpu_batch : batches) {
    const models::LossOutput loss = model.loss(cpu_batch.to(device));
    sum += loss.sum.to(torch::kFloat64);
    out.tokens += loss.tokens;
  }
  out.sum = sum.item<double>();
  if (was_training) model.train();
  return out;
}

}  // namespace luong::evaluation
