#pragma once
// torch::optim::Adam with the update of each CPU parameter done in one pass over its elements.
// LibTorch's Adam runs ~7 whole-tensor ops per parameter (mul_, add_, mul_, addcmul_, sqrt, div,
// add_, addcdiv_), each a pass over memory: at the notebook's size a large share of a training step
// (docs/PERFORMANCE.md). Same options, the same state tensors (so checkpoints and Adam::load/save are unchanged)
// and the same arithmetic up to floating-point contraction. A step with any parameter that is not a
// dense, contiguous float/double CPU tensor (sparse gradients, a mix of devices) is Adam's own.
// On CUDA a step is LibTorch's multi-tensor `_fused_adam_` (one launch per group where Adam makes
// seven per parameter), its step counts and learning rate read from device tensors, so that the
// step's device half (launch_device_step) holds no host value a CUDA graph would freeze.
// Gradient clipping's scaling rides in the same pass (step_scaled) rather than a pass of its own
// over every gradient.
#include <torch/torch.h>

#include <optional>
#include <unordered_map>
#include <vector>

namespace luong::training {

/// Multiplies every defined gradient of `parameters` in place by `scale`, a scalar tensor on their
/// device (nothing is read back to the host).
void scale_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& scale);

/// The sum of the squares of every defined gradient of `parameters`, in one parallel pass summing in
/// double (chunks of a fixed size, added in order: the same bits on any thread count), where every
/// gradient is a dense, contiguous float/double CPU tensor; nullopt otherwise. LibTorch's norm per
/// gradient is a parallel region each, one per parameter tensor.
std::optional<double> gradient_squares_sum(const std::vector<torch::Tensor>& parameters);

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(std::vector<torch::Tensor> params, torch::optim::AdamOptions options)
      : torch::optim::Adam(std::move(params), std::move(options)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;

  /// Adam's step on every gradient multiplied by `gradient_scale` (a scalar tensor on the
  /// parameters' device, such as gradient clipping's coefficient). Where the step is fused, the
  /// multiplication is part of its one pass and the gradients are left as they were; otherwise they
  /// are scaled in place first, without reading the scale back to the host, and Adam steps.
  void step_scaled(const torch::Tensor& gradient_scale);

  /// Whether every parameter with a gradient is a dense CUDA tensor, its gradient alike: the
  /// steps then go to prepare_device_step + launch_device_step.
  bool device_fusable() const;
  /// The host half of a CUDA step, never captured in a graph: creates missing state, counts the
  /// step in each parameter's state (what checkpoints save), brings the device step counts in line
  /// with a state loaded since, and writes each group's learning rate into its device tensor.
  void prepare_device_step();
  /// The device half of the step prepare_device_step() readied, safe to capture in a CUDA graph
  /// (replayed after each prepare_device_step()): adds one to the device step counts and runs
  /// Adam over each group's parameters, each gradient multiplied by `gradient_scale` (a scalar
  /// on the device, or undefined for none) first.
  void launch_device_step(const torch::Tensor& gradient_scale);
  /// Takes back the step prepare_device_step() counted when its device half never ran (a CUDA
  /// graph's capture that failed): the host's counts go back, and the device's are written anew.
  void cancel_device_step();

 private:
  bool fusable_step() const;
  void fused_step(double gradient_scale);
  torch::optim::AdamParamState& state_of(const torch::Tensor& p, bool amsgrad);

  struct DeviceCount {
    torch::Tensor value;    ///< float32 scalar on the parameter's device: _fused_adam_'s step
    int64_t host = -1;      ///< the state's step this value stands for
  };
  struct DeviceGroup {      ///< one param group's lists, as _fused_adam_ takes them
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    torch::Tensor learning_rate;  ///< float32 scalar on the device
    std::unordered_map<void*, DeviceCount> counts;
  };
  std::vector<DeviceGroup> device_groups_;
};

}  // namespace luong::training
