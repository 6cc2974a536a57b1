// Checkpoint files: the torch.save zip archive, our pickle reader, and loading into a module.
#include <torch/torch.h>

#include <vector>

#include "fuzz_target.h"
#include "luong/models/state_dict.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<char> bytes(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);
  static torch::nn::Linear module(torch::nn::LinearOptions(3, 2));
  luong::fuzz::expect_clean([&] {
    const luong::models::StateDict dict = luong::models::parse_state_dict(bytes, "fuzz.pt");
    for (const auto& [name, tensor] : dict) {
      LUONG_FUZZ_CHECK(tensor.defined());
      // Every element of every tensor is readable.
      if (tensor.numel() > 0 && tensor.is_floating_point()) (void)tensor.sum().item<double>();
    }
    luong::models::load_state_dict(*module, dict, "fuzz.pt");
  });
  return 0;
}
