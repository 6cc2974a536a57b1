// The per-step products of the fused kernels on one thread, GFLOP/s: in panels laid out beforehand
// (luong/models/panel_products.h), in MKL (LibTorch's mm) and in oneDNN, each product against one of
// `weights` different weights in turn, so that the weights come from L3 as they do between a step's
// products; under bf16 precision (where the processor has AVX512-BF16), bf16 panels (AVX512-BF16's
// kernel, and AMX's where the processor has it) against LibTorch's bf16 product (oneDNN). Also the
// time to lay a weight out in panels, both ways round, and its transpose in bf16 panels: converted
// to bf16 first, or rounded as it is laid out.
//
// With --whole-batch: a whole batch's bf16 products over 2 threads (tokens x in against a weight
// [out, in]: the input projection, the input gradient, and the weight gradient with its transposed
// a), bf16 panels against LibTorch's bf16 product with its conversions.
//
//   build/luong_panel_rate [M K N ...]     (default: the hidden-512 and notebook per-step shapes)
//   build/luong_panel_rate --whole-batch [TOKENS IN OUT ...]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "luong/models/matrix_products.h"
#include "timing.h"

namespace {

using luong::models::Float32Products;
using luong::models::MatrixProducts;
using luong::models::PanelOperand;

constexpr int kWeights = 5;

// Seconds per call of `run(i)`, i cycling through the weights, over at least a quarter second.
double seconds_per_call(const std::function<void(int)>& run) {
  int i = 0;
  return luong::bench::median_seconds_per_call(
      [&] {
        run(i);
        i = (i + 1) % kWeights;
      },
      2 * kWeights, 1, 0.25);
}

void measure(int64_t m, int64_t k, int64_t n) {
  std::vector<torch::Tensor> weights, operands;  // weights [n, k] as nn.Linear's; operands their transposes
  std::vector<PanelOperand> panels;
  for (int i = 0; i < kWeights; ++i) {
    weights.push_back(torch::randn({n, k}));
    operands.push_back(weights.back().t());
    panels.push_back(PanelOperand(operands.back(), false));
  }
  const torch::Tensor a = torch::randn({m, k});
  torch::Tensor out = torch::empty({m, n});
  const double flop = 2.0 * static_cast<double>(m * k * n);
  const MatrixProducts products;
  const double panel_time = seconds_per_call([&](int i) { products.mm_out(out, a, panels[i]); });
  luong::models::set_float32_products(Float32Products::kMkl);
  const double mkl_time = seconds_per_call([&](int i) { products.mm_out(out, a, operands[i]); });
  luong::models::set_float32_products(Float32Products::kOneDnn);
  const double onednn_time = seconds_per_call([&](int i) { products.mm_out(out, a, operands[i]); });
  luong::models::set_float32_products(Float32Products::kAuto);
  const double transposed_pack = seconds_per_call([&](int i) { PanelOperand(operands[i], false); });
  const double plain_pack = seconds_per_call([&](int i) { PanelOperand(weights[i], false); });
  std::printf("[%3lld, %4lld] x [%4lld, %4lld]  %7.1f  %7.1f  %7.1f   %6.2fx  %8.1f  %8.1f",
              static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(k),
              static_cast<long long>(n), flop / panel_time / 1e9, flop / mkl_time / 1e9, flop / onednn_time / 1e9,
              std::min(mkl_time, onednn_time) / panel_time, transposed_pack * 1e6, plain_pack * 1e6);
  if (luong::models::bf16_panels_here()) {
    const MatrixProducts bf16{true};
    const auto panel_time = [&](bool amx) {
      luong::models::set_amx_panels_enabled(amx);
      std::vector<PanelOperand> bf16_panels;
      for (int i = 0; i < kWeights; ++i) bf16_panels.push_back(PanelOperand(operands[i], true));
      return seconds_per_call([&](int i) { bf16.mm_out(out, a, bf16_panels[i]); });
    };
    const double avx512_bf16 = panel_time(false);
    // LibTorch's bf16 product (panels off), the weights converted once as a kernel call converts them
    luong::models::set_panel_products_enabled(false);
    std::vector<torch::Tensor> bf16_operands;
    for (int i = 0; i < kWeights; ++i) bf16_operands.push_back(bf16.operand(weights[i]).t());
    const double library16 = seconds_per_call([&](int i) { bf16.mm_out(out, a, bf16_operands[i]); });
    luong::models::set_panel_products_enabled(true);
    // A weight's transpose into bf16 panels: converted to bf16 first, or rounded as it is laid out
    const double converted_pack =
        seconds_per_call([&](int i) { PanelOperand(weights[i].to(torch::kBFloat16).t(), true); });
    const double rounding_pack = seconds_per_call([&](int i) { PanelOperand(operands[i], true); });
    // and w itself (the input gradient's operand), rounded as it is laid out
    const double rounding_plain_pack = seconds_per_call([&](int i) { PanelOperand(weights[i], true); });
    std::printf("   %7.1f  %7.1f   %6.2fx  %9.1f  %9.1f  %9.1f", flop / avx512_bf16 / 1e9, flop / library16 / 1e9,
                library16 / avx512_bf16, converted_pack * 1e6, rounding_pack * 1e6, rounding_plain_pack * 1e6);
    if (luong::models::bf16_panel_kernel_here() == luong::models::Bf16PanelKernel::kAmx) {
      const double amx = panel_time(true);
      std::printf("   %7.1f  %6.2fx", flop / amx / 1e9, std::min(library16, avx512_bf16) / amx);
    }
  }
  std::printf("\n");
}

// A whole batch's three bf16 products for `tokens` rows x [tokens, in], dy [tokens, out] and a weight
// [out, in], on 2 threads: bf16 panels, then LibTorch's bf16 product (panels off).
void measure_whole_batch(int64_t tokens, int64_t in, int64_t out_features) {
  const torch::Tensor x = torch::randn({tokens, in}), dy = torch::randn({tokens, out_features});
  const torch::Tensor weight = torch::randn({out_features, in});
  const MatrixProducts bf16{true};
  const double flop = 2.0 * static_cast<double>(tokens * in * out_features);
  std::printf("tokens %5lld, weight [%4lld, %4lld]", static_cast<long long>(tokens), static_cast<long long>(out_features),
              static_cast<long long>(in));
  const std::vector<std::function<void()>> products = {[&] { bf16.mm(x, weight.t()); }, [&] { bf16.mm(dy, weight); },
                                                       [&] { bf16.mm(dy.t(), x); }};
  for (const auto& product : products) {
    luong::models::set_panel_products_enabled(true);
    const double panels = seconds_per_call([&](int) { product(); });
    luong::models::set_panel_products_enabled(false);
    const double library = seconds_per_call([&](int) { product(); });
    std::printf("   %7.1f %7.1f %5.2fx", flop / panels / 1e9, flop / library / 1e9, library / panels);
  }
  luong::models::set_panel_products_enabled(true);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--whole-batch") {
    if (!luong::models::bf16_panels_here()) {
      std::fprintf(stderr, "luong_panel_rate: this processor has no bf16 panel kernel\n");
      return 1;
    }
    at::set_num_threads(2);
    std::vector<int64_t> shapes;
    for (int i = 2; i < argc; ++i) shapes.push_back(std::atoll(argv[i]));
    if (shapes.empty()) shapes = {330, 512, 1536, 330, 1024, 1536, 330, 1024, 3308, 1300, 512, 1536};
    std::printf("2 threads, bf16 (%s panels); GFLOP/s panels, library, speed-up for x w^T, dy w, dy^T x\n",
                luong::models::bf16_panel_kernel_name(luong::models::bf16_panel_kernel()));
    for (std::size_t i = 0; i + 2 < shapes.size(); i += 3) measure_whole_batch(shapes[i], shapes[i + 1], shapes[i + 2]);
    return 0;
  }
  at::set_num_threads(1);
  const luong::models::PanelIsa isa = luong::models::panel_isa_here();
  if (isa == luong::models::PanelIsa::kNone) {
    std::fprintf(stderr, "luong_panel_rate: this processor has no panel kernel (neither AVX2 + FMA nor AVX-512)\n");
    return 1;
  }
  std::vector<int64_t> shapes;
  for (int i = 1; i < argc; ++i) shapes.push_back(std::atoll(argv[i]));
  if (shapes.empty()) {
    // hidden 512 (a decoder block of 16 rows; an encoder direction of 32; their input gradients) and
    // the notebook's hidden 64
    shapes = {16, 512, 1536, 32, 512, 1536, 16, 1024, 512, 16, 1536, 512, 32, 1536, 512, 16, 512, 1024,
              4, 512, 1536, 16, 64, 192, 16, 128, 64, 16, 192, 64};
  }
  if (shapes.size() % 3 != 0) {
    std::fprintf(stderr, "luong_panel_rate: shapes come as M K N triples\n");
    return 2;
  }
  std::printf("one thread, %d weights in turn; %s panels of %lld columns\n", kWeights,
              isa == luong::models::PanelIsa::kAvx512 ? "AVX-512" : "AVX2",
              static_cast<long long>(luong::models::panel_width(isa)));
  std::printf("product                      GFLOP/s: panels      MKL   oneDNN  speed-up  pack w^T us  pack w us%s%s\n",
              luong::models::bf16_panels_here() ? "   bf16: panels  library  speed-up  pack w^T: converted  rounding  pack w: rounding" : "",
              luong::models::bf16_panel_kernel_here() == luong::models::Bf16PanelKernel::kAmx
                  ? "   AMX panels  speed-up"
                  : "");
  for (std::size_t i = 0; i < shapes.size(); i += 3) measure(shapes[i], shapes[i + 1], shapes[i + 2]);
  return 0;
}
