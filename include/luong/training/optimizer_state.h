#pragma once
// The optimizer's state in a checkpoint: a state_dict file (checkpoint/optimizer.pt) of plain tensors,
// verified against the model's parameters before anything is used.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "luong/models/state_dict.h"

namespace luong::training {

/// Adam's per-parameter state as tensors named param.<i>.step / .exp_avg / .exp_avg_sq
/// (/ .max_exp_avg_sq with amsgrad), i the parameter's position in the optimizer's only group;
/// nothing for plain SGD.
models::StateDict optimizer_state(torch::optim::Optimizer& optimizer);

/// Installs what optimizer_state() saved. Every tensor must belong to a parameter of `optimizer`,
/// with that parameter's shape and dtype, finite values and a step count in [1, 1e12]; a parameter
/// has all of its state or none. Anything else throws luong::CheckpointError naming `origin` and the
/// entry, and leaves the optimizer unchanged.
void load_optimizer_state(torch::optim::Optimizer& optimizer, const models::StateDict& state, const std::string& origin);

}  // namespace luong::training
