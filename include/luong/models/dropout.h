#pragma once
// Inverted dropout: each element kept and scaled by 1 / (1 - p) with probability 1 - p, else zero.
//
// On the CPU the masks come from a counter-based generator: element i of a draw is kept when the top
// 24 bits of SplitMix64(seed + (i + 1) * 0x9E3779B97F4A7C15) fall below (1 - p) 2^24, the seed
// one 64-bit draw from LibTorch's default CPU generator per mask (so torch::manual_seed and a
// checkpoint's rng.pt fix every mask, whatever the thread count, and the threads fill disjoint
// ranges). LibTorch's bernoulli_ draws one element at a time on one thread where the processor is not
// Intel's (its MKL path is Intel-only), a visible share of a recipe step (docs/PERFORMANCE.md). On
// other devices LibTorch's own dropout and bernoulli_ (Philox on CUDA).
#include <torch/torch.h>

#include <cstdint>

namespace luong::models {

/// The mask of `shape` (1 / (1 - p) or 0), in `like`'s dtype and on its device. p in [0, 1).
torch::Tensor dropout_mask(const torch::Tensor& like, at::IntArrayRef shape, double p);

/// `x` with dropout p when training (x times a fresh mask, differentiable); x itself (no copy, no
/// draw) when p is 0 or not training.
torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training);

namespace detail {
/// Elements [begin, end) of the CPU mask drawn with `seed`: `scale` where kept, else 0 (keep_below:
/// (1 - p) 2^24, rounded). What dropout_mask computes over the threads; tests recompute it.
void fill_dropout_mask(float* out, int64_t begin, int64_t end, std::uint64_t seed, std::uint32_t keep_below, float scale);
void fill_dropout_mask(double* out, int64_t begin, int64_t end, std::uint64_t seed, std::uint32_t keep_below,
                       double scale);
/// (1 - p) 2^24 rounded: the kept draws' bound.
std::uint32_t dropout_keep_below(double p);
}  // namespace detail

}  // namespace luong::models
