#include "luong/training/weight_average.h"

#include "luong/util/error.h"

namespace luong::training {

ExponentialAverage::ExponentialAverage(torch::nn::Module& model, double decay) : decay_(decay) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters()) {
    live_.emplace_back(p.key(), p.value());
    average_.emplace_back(p.key(), p.value().detach().clone());
  }
}

void ExponentialAverage::update() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < live_.size(); ++i) average_[i].second.mul_(decay_).add_(live_[i].second, 1 - decay_);
}

models::StateDict ExponentialAverage::state_dict() const {
  models::StateDict out;
  for (const auto& [name, tensor] : average_) out.emplace_back(name, tensor.to(torch::kCPU));
  return out;
}

void ExponentialAverage::load(const models::StateDict& saved, const std::string& origin) {
  if (saved.size() != average_.size()) {
    throw CheckpointError(origin + ": " + std::to_string(saved.size()) + " averaged tensors for a model of " +
                          std::to_string(average_.size()));
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const auto& [name, tensor] = saved[i];
    const torch::Tensor& target = average_[i].second;
    if (name != average_[i].first || !tensor.sizes().equals(target.sizes()) || tensor.scalar_type() != target.scalar_type()) {
      throw CheckpointError(origin + ": '" + printable(name) + "' does not match the model's '" + average_[i].first + "'");
    }
    if (!torch::isfinite(tensor).all().item<bool>()) {
      throw CheckpointError(origin + ": '" + printable(name) + "' holds NaN or Inf");
    }
  }
  for (std::size_t i = 0; i < saved.size(); ++i) average_[i].second.copy_(saved[i].second);
}

models::StateDict average_state_dicts(const std::vector<models::StateDict>& dicts, const std::string& origin) {
  if (dicts.empty()) throw CheckpointError(origin + ": nothing to average");
  models::StateDict out;
  for (std::size_t i = 0; i < dicts.front().size(); ++i) {
    const auto& [name, first] = dicts.front()[i];
    torch::Tensor sum = first.to(torch::kFloat64).clone();
    for (std::size_t d = 1; d < dicts.size(); ++d) {
      if (dicts[d].size() != dicts.front().size() || dicts[d][i].first != name ||
          !dicts[d][i].second.sizes().equals(first.sizes())) {
        throw CheckpointError(origin + ": the weights to average differ at '" + printable(name) + "'");
      }
      sum += dicts[d][i].second.to(torch::kFloat64);
    }
    out.emplace_back(name, (sum / static_cast<double>(dicts.size())).to(first.scalar_type()));
  }
  return out;
}

}  // namespace luong::training
