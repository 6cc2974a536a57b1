#pragma once
// The optimizer and its learning rate over a run: Adam or the paper's plain SGD, and the schedule of
// run::Schedule, as a function of the run's own counters (so that --resume continues it exactly).
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "luong/run/train_config.h"
#include "luong/training/trainer_state.h"

namespace luong::training {

/// FusedAdam or torch::optim::SGD (no momentum) over `parameters` at config.lr.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const run::TrainConfig& config,
                                                        const std::vector<torch::Tensor>& parameters);

/// The rate of the next update: during epoch `epoch` (1-based), after `state.optimizer_steps`
/// updates, with the plateau factor `state.lr_scale`.
double learning_rate(const run::TrainConfig& config, std::int64_t epoch, const TrainerState& state);

/// Sets every parameter group's rate.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// The plateau schedule's bookkeeping after an epoch's dev loss; returns whether the rate halved.
bool update_plateau(TrainerState& state, double dev_loss, std::int64_t patience);

}  // namespace luong::training
