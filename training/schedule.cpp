#include "luong/training/schedule.h"

#include <algorithm>
#include <cmath>

#include "luong/training/fused_adam.h"
#include "luong/util/error.h"

namespace luong::training {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const run::TrainConfig& config,
                                                        const std::vector<torch::Tensor>& parameters) {
  if (config.optimizer == run::OptimizerKind::kSgd) {
    return std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(config.lr));
  }
  return std::make_unique<FusedAdam>(parameters, torch::optim::AdamOptions(config.lr));
}

double learning_rate(const run::TrainConfig& config, std::int64_t epoch, const TrainerState& state) {
  switch (config.schedule) {
    case run::Schedule::kConstant: return config.lr;
    case run::Schedule::kHalveAfter:
      return config.lr * std::pow(0.5, static_cast<double>(std::max<std::int64_t>(0, epoch - config.decay_after)));
    case run::Schedule::kInverseSqrt: {
      const double step = static_cast<double>(state.optimizer_steps + 1), warmup = static_cast<double>(config.warmup);
      return config.lr * std::min(step / warmup, std::sqrt(warmup / step));
    }
    case run::Schedule::kPlateau: return config.lr * state.lr_scale;
  }
  return config.lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&group.options())) {
      adam->lr(lr);
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) {
      sgd->lr(lr);
    } else {
      throw Error("set_learning_rate: an optimizer of an unknown kind");
    }
  }
}

bool update_plateau(TrainerState& state, double dev_loss, std::int64_t patience) {
  if (std::isnan(dev_loss)) return false;
  if (state.best_dev_loss < 0 || dev_loss < state.best_dev_loss) {
    state.best_dev_loss = dev_loss;
    state.plateau_epochs = 0;
    return false;
  }
  if (++state.plateau_epochs < patience) return false;
  state.lr_scale = std::max(state.lr_scale * 0.5, 1e-6);
  state.plateau_epochs = 0;
  return true;
}

}  // namespace luong::training
