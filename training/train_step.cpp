#include "luong/training/train_step.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "luong/data_pipeline/batching.h"
#include "luong/training/fused_adam.h"
#include "luong/util/side_tasks.h"

namespace luong::training {

GradientClip gradient_clip(const std::vector<torch::Tensor>& parameters, double max_norm) {
  RECORD_FUNCTION("luong::gradient_clip", std::vector<c10::IValue>());
  torch::NoGradGuard no_grad;
  if (const std::optional<double> squares = gradient_squares_sum(parameters)) {
    // The CPU's one pass; a CPU scalar, as the norms below would be.
    torch::ScalarType dtype = torch::kFloat;  // the gradients', as LibTorch's norms would give
    for (const torch::Tensor& p : parameters) {
      if (p.grad().defined()) {
        dtype = p.grad().scalar_type();
        break;
      }
    }
    const torch::Tensor total = torch::tensor(std::sqrt(*squares), torch::dtype(dtype));
    return {total, torch::clamp(max_norm / (total + 1e-6), std::nullopt, 1.0)};
  }
  std::vector<torch::Tensor> gradients;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) gradients.push_back(p.grad());
  }
  if (gradients.empty()) return {torch::zeros({}), torch::ones({})};
  const std::vector<torch::Tensor> norms = torch::_foreach_norm(gradients, 2);  // one launch on a GPU
  const torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  return {total, torch::clamp(max_norm / (total + 1e-6), std::nullopt, 1.0)};
}

torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  const GradientClip clip = gradient_clip(parameters, max_norm);
  scale_gradients(parameters, clip.coefficient);
  return clip.norm;
}

TrainStep::TrainStep(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, const run::TrainConfig& options,
                     const torch::Device& device, DataParallel* parallel)
    : model_(model),
      optimizer_(optimizer),
      fused_adam_(dynamic_cast<FusedAdam*>(&optimizer)),
      options_(options),
      device_(device),
      parallel_(parallel),
      overlap_(device.is_cpu() && parallel == nullptr && model.options.hidden_size() < options.overlap_below_hidden) {
  if (!options.cuda_graphs || !device.is_cuda()) return;
  std::string why_not = CudaGraphSteps::unavailable(device, optimizer);
  if (why_not.empty() && parallel != nullptr) why_not = "data-parallel training all-reduces between its steps";
  if (why_not.empty() && options.accumulate > 1) why_not = "--accumulate splits an update over several batches";
  if (!why_not.empty()) {
    std::fprintf(stderr, "luong: CUDA graphs off: %s\n", why_not.c_str());
    return;
  }
  graphs_ = CudaGraphSteps::create(model, *fused_adam_, options, device);
}

TrainStep::Result TrainStep::run(const std::vector<const data::EncodedPair*>& rows, bool interrupt, bool last) {
  if (graphs_ != nullptr) {
    Result result;
    result.loss = graphs_->run(rows);
    result.applied = true;
    result.interrupted = interrupt;
    return result;
  }
  if (gathered_ == 0) optimizer_.zero_grad();
  Result result = parallel_ == nullptr ? run_alone(rows, interrupt) : run_shard(rows, interrupt);
  if (!result.finite) return result;
  if (++gathered_ < options_.accumulate && !last) {
    result.interrupted = false;  // a stop waits for the group's update
    return result;
  }
  gathered_ = 0;
  apply();
  result.applied = true;
  return result;
}

TrainStep::Result TrainStep::run_alone(const std::vector<const data::EncodedPair*>& rows, bool interrupt) {
  const data::Batch batch = data::make_batch(rows).to(device_);
  const models::LossOutput loss = [&] {
    const models::PrecisionGuard precision(device_, options_.precision);  // the forward only, as torch.autocast
    return model_.loss(batch, {options_.loss_average, options_.label_smoothing});
  }();
  Result result;
  result.interrupted = interrupt;
  // On the CPU reading the value costs nothing, and a non-finite loss is caught before its update;
  // on a GPU the trainer checks the running sum when it reads it.
  if (device_.is_cpu()) result.finite = std::isfinite(loss.loss.item<double>());
  if (result.finite) {
    // (the group's mean gradient where batches accumulate)
    const torch::Tensor objective =
        options_.accumulate > 1 ? loss.loss / static_cast<double>(options_.accumulate) : loss.loss;
    if (overlaps_backward()) {
      run_with_side_tasks(at::get_num_threads(), [&] { objective.backward(); });
    } else {
      objective.backward();
    }
  }
  result.loss = loss.loss.detach().to(torch::kFloat64);
  return result;
}

// Each rank's loss is its rows' share of the global batch's average, so the summed gradients are
// exactly the single-process gradient of the whole batch.
TrainStep::Result TrainStep::run_shard(const std::vector<const data::EncodedPair*>& rows, bool interrupt) {
  const std::vector<const data::EncodedPair*> mine = data::shard_rows(rows, parallel_->rank(), parallel_->world_size());
  torch::Tensor local = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  if (!mine.empty()) {
    const data::Batch batch = data::make_batch(mine).to(device_);
    const models::LossOutput loss = [&] {
      const models::PrecisionGuard precision(device_, options_.precision);
      return model_.weighted_loss(batch, models::step_weights(data::target_tokens_at_each_step(rows), options_.loss_average),
                                  options_.label_smoothing);
    }();
    local = loss.loss.detach().to(torch::kFloat64);
    // A non-finite shard still takes part in the all-reduce; the summed loss carries it to every rank.
    if (!device_.is_cpu() || std::isfinite(local.item<double>())) loss.loss.backward();
  }
  const torch::Tensor flags = torch::stack({local, torch::full({}, interrupt ? 1.0 : 0.0, local.options())});
  const torch::Tensor totals = parallel_->sum_gradients(model_.parameters(), flags);
  Result result;
  result.loss = totals[0];
  if (device_.is_cpu()) {
    result.finite = std::isfinite(result.loss.item<double>());
    result.interrupted = totals[1].item<double>() > 0;
  } else if (++steps_ % kInterruptVoteInterval == 0) {
    // Every rank counts the same steps, so all read the vote at the same step and stop together.
    result.interrupted = totals[1].item<double>() > 0;
  }
  return result;
}

void TrainStep::apply() {
  if (options_.clip > 0 && fused_adam_ != nullptr) {
    fused_adam_->step_scaled(gradient_clip(model_.parameters(), options_.clip).coefficient);
    return;
  }
  if (options_.clip > 0) clip_gradient_norm(model_.parameters(), options_.clip);
  optimizer_.step();
}

}  // namespace luong::training
