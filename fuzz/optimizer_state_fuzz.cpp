// checkpoint/optimizer.pt: the torch.save reader and the optimizer-state checks on arbitrary bytes,
// against a small model's Adam. An accepted state must fit the parameters and survive a step.
#include <torch/torch.h>

#include <vector>

#include "fuzz_target.h"
#include "luong/models/state_dict.h"
#include "luong/training/optimizer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<char> bytes(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  static torch::nn::Linear module(torch::nn::LinearOptions(3, 2));
  static torch::optim::Adam adam(module->parameters(), torch::optim::AdamOptions(1e-3));
  luong::fuzz::expect_clean([&] {
    const luong::models::StateDict dict = luong::models::parse_state_dict(bytes, "optimizer.pt");
    luong::training::load_optimizer_state(adam, dict, "optimizer.pt");
    for (const auto& p : module->parameters()) p.mutable_grad() = torch::ones_like(p);
    adam.step();
    for (const auto& p : module->parameters()) LUONG_FUZZ_CHECK(torch::isfinite(p).all().item<bool>());
    torch::NoGradGuard no_grad;
    for (const auto& p : module->parameters()) p.zero_();  // the next input starts from the same weights
  });
  return 0;
}
