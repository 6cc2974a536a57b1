#include "luong/training/optimizer_state.h"

#include <map>
#include <memory>

#include "luong/util/error.h"

namespace luong::training {
namespace {

// Plain SGD (the paper's, without momentum) keeps no state; Adam keeps moments and a step count.
bool is_stateless_sgd(torch::optim::Optimizer& optimizer) {
  auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer);
  if (sgd == nullptr) return false;
  for (const auto& group : sgd->param_groups()) {
    if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() != 0) {
      throw Error("optimizer state: SGD with momentum is not supported");
    }
  }
  return true;
}

torch::optim::Adam& as_adam(torch::optim::Optimizer& optimizer) {
  auto* adam = dynamic_cast<torch::optim::Adam*>(&optimizer);
  if (adam == nullptr) throw Error("optimizer state: only Adam and plain SGD are supported");
  return *adam;
}

const std::vector<torch::Tensor>& parameters_of(torch::optim::Optimizer& optimizer) {
  if (optimizer.param_groups().size() != 1) throw Error("optimizer state: expected one parameter group");
  return optimizer.param_groups().front().params();
}

std::string describe(const torch::Tensor& t) {
  std::string shape = "[";
  for (int64_t d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
  return shape + "] " + std::string(c10::toString(t.scalar_type()));
}

}  // namespace

models::StateDict optimizer_state(torch::optim::Optimizer& optimizer) {
  if (is_stateless_sgd(optimizer)) return {};
  torch::optim::Adam& adam = as_adam(optimizer);
  const auto& params = parameters_of(optimizer);
  models::StateDict out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto found = adam.state().find(params[i].unsafeGetTensorImpl());
    if (found == adam.state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*found->second);
    const std::string prefix = "param." + std::to_string(i) + ".";
    out.emplace_back(prefix + "step", torch::tensor(s.step(), torch::kLong));
    out.emplace_back(prefix + "exp_avg", s.exp_avg());
    out.emplace_back(prefix + "exp_avg_sq", s.exp_avg_sq());
    if (s.max_exp_avg_sq().defined()) out.emplace_back(prefix + "max_exp_avg_sq", s.max_exp_avg_sq());
  }
  return out;
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const models::StateDict& state, const std::string& origin) {
  if (is_stateless_sgd(optimizer)) {
    if (!state.empty()) {
      throw CheckpointError(origin + ": '" + printable(state.front().first) + "' is state, but plain SGD keeps none");
    }
    return;
  }
  torch::optim::Adam& adam = as_adam(optimizer);
  const auto& params = parameters_of(optimizer);
  const bool amsgrad = static_cast<const torch::optim::AdamOptions&>(adam.param_groups().front().options()).amsgrad();
  const auto fail = [&](const std::string& key, const std::string& why) -> void {
    throw CheckpointError(origin + ": '" + printable(key) + "' " + why + " (the optimizer state of another run?)");
  };
  std::map<std::size_t, std::map<std::string, torch::Tensor>> by_param;
  for (const auto& [key, tensor] : state) {
    const std::size_t dot = key.find('.', 6);
    if (key.rfind("param.", 0) != 0 || dot == std::string::npos) fail(key, "is not an optimizer entry");
    const std::string index_text = key.substr(6, dot - 6);
    if (index_text.empty() || index_text.size() > 9 || index_text.find_first_not_of("0123456789") != std::string::npos) {
      fail(key, "has no parameter index");
    }
    const std::size_t index = std::stoul(index_text);
    if (index >= params.size()) fail(key, "names parameter " + index_text + " of a model with " + std::to_string(params.size()));
    if (!by_param[index].emplace(key.substr(dot + 1), tensor).second) fail(key, "appears twice");
  }
  std::vector<std::pair<std::size_t, std::unique_ptr<torch::optim::AdamParamState>>> fresh;
  for (auto& indexed : by_param) {
    const std::size_t index = indexed.first;
    auto& entries = indexed.second;  // (not a structured binding: C++17 lambdas cannot capture those)
    const torch::Tensor& p = params[index];
    const std::string prefix = "param." + std::to_string(index) + ".";
    auto s = std::make_unique<torch::optim::AdamParamState>();
    const auto take = [&](const std::string& name, bool required) -> torch::Tensor {
      const auto it = entries.find(name);
      if (it == entries.end()) {
        if (required) fail(prefix + name, "is missing");
        return {};
      }
      torch::Tensor t = it->second;
      entries.erase(it);
      if (name == "step") {
        if (t.dim() != 0 || t.scalar_type() != torch::kLong) fail(prefix + name, "must be an int64 scalar, not " + describe(t));
        const int64_t step = t.item<int64_t>();
        if (step < 1 || step > 1000000000000LL) fail(prefix + name, std::to_string(step) + " is outside [1, 1e12]");
        return t;
      }
      if (!t.sizes().equals(p.sizes()) || t.scalar_type() != p.scalar_type()) {
        fail(prefix + name, "is " + describe(t) + " but the parameter is " + describe(p));
      }
      if (!torch::isfinite(t).all().item<bool>()) fail(prefix + name, "holds non-finite values");
      return t.to(p.device()).clone();
    };
    s->step(take("step", true).item<int64_t>());
    s->exp_avg(take("exp_avg", true));
    s->exp_avg_sq(take("exp_avg_sq", true));
    if (torch::Tensor m = take("max_exp_avg_sq", amsgrad); m.defined()) s->max_exp_avg_sq(m);
    if (!entries.empty()) fail(prefix + entries.begin()->first, "is not part of Adam's state");
    if ((s->exp_avg_sq().lt(0)).any().item<bool>()) fail(prefix + "exp_avg_sq", "holds negative values");
    fresh.emplace_back(index, std::move(s));
  }
  adam.state().clear();
  for (auto& [index, s] : fresh) adam.state()[params[index].unsafeGetTensorImpl()] = std::move(s);
}

}  // namespace luong::training
