#include "luong/models/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>

#include "luong/util/target_clones.h"

namespace luong::models {
namespace detail {
namespace {

template <typename T>
[[gnu::always_inline]] inline void fill_mask(T* out, int64_t begin, int64_t end, std::uint64_t seed,
                                             std::uint32_t keep_below, T scale) {
  for (int64_t i = begin; i < end; ++i) {
    std::uint64_t z = seed + static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i - begin] = static_cast<std::uint32_t>(z >> 40) < keep_below ? scale : T(0);
  }
}

}  // namespace

LUONG_X86_CLONES void fill_dropout_mask(float* out, int64_t begin, int64_t end, std::uint64_t seed,
                                        std::uint32_t keep_below, float scale) {
  fill_mask(out, begin, end, seed, keep_below, scale);
}

LUONG_X86_CLONES void fill_dropout_mask(double* out, int64_t begin, int64_t end, std::uint64_t seed,
                                        std::uint32_t keep_below, double scale) {
  fill_mask(out, begin, end, seed, keep_below, scale);
}

std::uint32_t dropout_keep_below(double p) { return static_cast<std::uint32_t>(std::lround((1 - p) * 16777216.0)); }

}  // namespace detail

namespace {

std::uint64_t draw_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

}  // namespace

torch::Tensor dropout_mask(const torch::Tensor& like, at::IntArrayRef shape, double p) {
  TORCH_CHECK(p >= 0 && p < 1, "dropout_mask: p outside [0, 1)");
  const bool counter_based = like.device().is_cpu() &&
                             (like.scalar_type() == torch::kFloat || like.scalar_type() == torch::kDouble);
  if (!counter_based) {
    if (like.device().is_cpu()) {  // (bf16, half: drawn in float32, then converted)
      return dropout_mask(torch::empty({0}, like.options().dtype(torch::kFloat)), shape, p).to(like.scalar_type());
    }
    return torch::empty(shape, like.options()).bernoulli_(1 - p).div_(1 - p);
  }
  torch::Tensor mask = torch::empty(shape, like.options().memory_format(torch::MemoryFormat::Contiguous));
  const std::uint64_t seed = draw_seed();
  const std::uint32_t keep_below = detail::dropout_keep_below(p);
  AT_DISPATCH_FLOATING_TYPES(mask.scalar_type(), "dropout_mask", [&] {
    scalar_t* out = mask.data_ptr<scalar_t>();
    const auto scale = static_cast<scalar_t>(1.0 / (1 - p));
    at::parallel_for(0, mask.numel(), 32768, [&](int64_t begin, int64_t end) {
      detail::fill_dropout_mask(out + begin, begin, end, seed, keep_below, scale);
    });
  });
  return mask;
}

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  if (!(p > 0 && training)) return x;
  if (!x.device().is_cpu()) return torch::dropout(x, p, true);
  return x * dropout_mask(x, x.sizes(), p);
}

}  // namespace luong::models
