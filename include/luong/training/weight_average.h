#pragma once
// Averaged weights: an exponential moving average kept through training (ema_model.pt), and the
// mean of the last N epochs' weights (averaged_model.pt).
#include <torch/torch.h>

#include <string>
#include <vector>

#include "luong/models/state_dict.h"

namespace luong::training {

/// ema <- decay * ema + (1 - decay) * w after every optimizer step, over the model's floating-point
/// state (its state_dict's names), on the model's device.
class ExponentialAverage {
 public:
  ExponentialAverage(torch::nn::Module& model, double decay);
  void update();
  /// On the CPU, named as the model's state_dict.
  models::StateDict state_dict() const;
  /// Restores a saved average; names, shapes and dtypes must be the model's. Throws luong::CheckpointError.
  void load(const models::StateDict& saved, const std::string& origin);

 private:
  double decay_;
  std::vector<std::pair<std::string, torch::Tensor>> live_;     // the model's tensors
  std::vector<std::pair<std::string, torch::Tensor>> average_;  // their average
};

/// The element-wise mean of state dicts with the same names and shapes (in float64, cast back).
/// Throws luong::CheckpointError naming the first mismatch.
models::StateDict average_state_dicts(const std::vector<models::StateDict>& dicts, const std::string& origin);

}  // namespace luong::training
