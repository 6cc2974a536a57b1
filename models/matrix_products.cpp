#include "luong/models/matrix_products.h"
#include "luong/util/path_counts.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "luong/util/error.h"
#include "luong/util/side_tasks.h"
#include "luong/util/spin_wait.h"

#if AT_MKLDNN_ENABLED()
namespace at::native {
// LibTorch's oneDNN matrix product (ATen/native/mkldnn/Matmul.cpp, exported by libtorch_cpu but not
// among the installed headers): result = beta result + alpha mat1 mat2, float32 accumulated in float32.
void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2, const at::Tensor& result, float beta, float alpha);
}  // namespace at::native
#endif

namespace luong::models {
namespace {

std::atomic<Float32Products>& current_choice() {
  static std::atomic<Float32Products> choice{Float32Products::kAuto};
  return choice;
}

std::atomic<bool>& panels_enabled() {
  static std::atomic<bool> enabled{true};
  return enabled;
}

std::atomic<bool>& amx_panels_enabled() {  // bf16 panels by AMX where it is here
  static std::atomic<bool> enabled{true};
  return enabled;
}

bool amd_with_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// oneDNN costs more than MKL per call, and gains at larger shapes (the rates per shape are in
// docs/PERFORMANCE.md): so oneDNN from a million multiply-adds, when the inner dimension is at
// least 128 or there are 64 rows or more.
bool onednn_pays_for(int64_t m, int64_t k, int64_t n) {
  return m * k * n >= (int64_t{1} << 20) && (k >= 128 || m >= 64);
}

bool row_major(const torch::Tensor& t) { return t.stride(1) == 1 && t.stride(0) >= t.size(1); }

// LibTorch's oneDNN product copies any other operand layout first (MKL reads strided operands as
// they are): a column slice of a wider buffer would pay a copy per product.
// From the strides: called for every product, where t.t() would allocate a view each time.
bool dense_or_transposed(const torch::Tensor& t) {
  return t.is_contiguous() || (t.stride(0) == 1 && t.stride(1) == t.size(0));
}

}  // namespace

Float32Products float32_products() { return current_choice().load(std::memory_order_relaxed); }

void set_float32_products(Float32Products choice) { current_choice().store(choice, std::memory_order_relaxed); }

bool onednn_float32_is_faster_here() {
  static const bool faster = AT_MKLDNN_ENABLED() && amd_with_avx512();
  return faster;
}

bool onednn_float32_available() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool available = AT_MKLDNN_ENABLED() && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  static const bool available = AT_MKLDNN_ENABLED();
#endif
  return available;
}

bool panel_products_enabled() { return panels_enabled().load(std::memory_order_relaxed); }

void set_panel_products_enabled(bool enabled) { panels_enabled().store(enabled, std::memory_order_relaxed); }

void set_panel_products(PanelProducts choice) {
  set_panel_products_enabled(choice != PanelProducts::kOff);
  set_amx_panels_enabled(choice != PanelProducts::kNoAmx);
}

Bf16PanelKernel bf16_panel_kernel() {
  const Bf16PanelKernel here = bf16_panel_kernel_here();
  return here == Bf16PanelKernel::kAmx && !amx_panels_enabled().load(std::memory_order_relaxed)
             ? Bf16PanelKernel::kAvx512Bf16
             : here;
}

void set_amx_panels_enabled(bool enabled) { amx_panels_enabled().store(enabled, std::memory_order_relaxed); }

PanelOperand::PanelOperand(const torch::Tensor& b, bool bf16) : matrix_(b) {
  if (!panel_products_enabled() || b.dim() != 2 || !b.device().is_cpu() || b.numel() == 0) return;
  const int64_t k = b.size(0), n = b.size(1);
  torch::Tensor source = b;
  if (bf16) {
    bf16_kernel_ = bf16_panel_kernel();
    if (bf16_kernel_ == Bf16PanelKernel::kNone) return;
    if (source.scalar_type() != torch::kFloat) source = detail::to_bf16(source);  // (a float32 b rounds as it packs)
    panels_ = torch::empty({bf16_panel_elements(k, n)}, b.options().dtype(torch::kBFloat16));
  } else {
    if (panel_isa_here() == PanelIsa::kNone || b.scalar_type() != torch::kFloat) return;
    isa_ = panel_isa_here();
    panels_ = torch::empty({panel_floats(isa_, k, n)}, b.options());
  }
  const bool bf16_panels = bf16_kernel_ != Bf16PanelKernel::kNone;
  const int64_t width = bf16_panels ? 48 : panel_width(isa_);
  // A panel is k * width values; a few of them per task keeps small weights on one thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (k * width));
  at::parallel_for(0, (n + width - 1) / width, grain, [&](int64_t first, int64_t last) {
    if (bf16_panels) {
      auto* panels = reinterpret_cast<uint16_t*>(panels_.data_ptr<at::BFloat16>());
      if (source.scalar_type() == torch::kFloat) {
        pack_bf16_panels_rounding(source.data_ptr<float>(), k, n, source.stride(0), source.stride(1), panels, first, last);
      } else {
        pack_bf16_panels(reinterpret_cast<const uint16_t*>(source.data_ptr<at::BFloat16>()), k, n, source.stride(0),
                         source.stride(1), panels, first, last);
      }
    } else {
      pack_panels(isa_, source.data_ptr<float>(), k, n, source.stride(0), source.stride(1), panels_.data_ptr<float>(),
                  first, last);
    }
  });
}

bool PanelOperand::multiply(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& init,
                            bool parallel) const {
  const int64_t m = a.size(0), k = matrix_.size(0), n = matrix_.size(1);
  // (the bf16 kernels gather a's rows of any stride as they round them)
  if (a.scalar_type() != torch::kFloat || out.scalar_type() != torch::kFloat || a.dim() != 2 || a.size(1) != k ||
      (a.stride(1) != 1 && k > 1 && bf16_kernel_ == Bf16PanelKernel::kNone) || out.dim() != 2 || out.size(0) != m ||
      out.size(1) != n || out.stride(1) != 1) {
    return false;
  }
  const float* init_data = nullptr;
  int64_t init_ld = 0;
  if (init.defined()) {
    if (init.scalar_type() != torch::kFloat) return false;
    if (init.dim() == 2 && init.size(0) == m && init.size(1) == n && init.stride(1) == 1) {
      init_ld = init.stride(0);
    } else if (!(init.dim() == 1 && init.size(0) == n && init.stride(0) == 1)) {
      return false;
    }
    init_data = init.data_ptr<float>();
  }
  const auto rows = [&](int64_t first, int64_t count) {  // out's rows [first, first + count)
    const float* a_rows = a.data_ptr<float>() + first * a.stride(0);
    float* out_rows = out.data_ptr<float>() + first * out.stride(0);
    const float* init_rows = init_data == nullptr || init_ld == 0 ? init_data : init_data + first * init_ld;
    if (bf16_kernel_ != Bf16PanelKernel::kNone) {
      bf16_panel_product(bf16_kernel_, a_rows, count, k, a.stride(0),
                         reinterpret_cast<const uint16_t*>(panels_.data_ptr<at::BFloat16>()), n, out_rows, out.stride(0),
                         init_rows, init_ld, a.stride(1));
    } else {
      panel_product(isa_, a_rows, count, k, a.stride(0), panels_.data_ptr<float>(), n, out_rows, out.stride(0),
                    init_rows, init_ld);
    }
  };
  // The threads take equal shares of 16-row tiles (blocks of 128 rows left one of 2 threads a third
  // idle at 330 rows), each share in blocks whose rows stay in the cache while they run over every
  // panel (128 rows of k 1024 in bf16: 256 KB).
  constexpr int64_t kTile = 16, kBlock = 128;
  if (parallel && m > kTile) {
    at::parallel_for(0, (m + kTile - 1) / kTile, 1, [&](int64_t begin, int64_t end) {
      const int64_t last = std::min(m, end * kTile);
      for (int64_t first = begin * kTile; first < last; first += kBlock) rows(first, std::min(kBlock, last - first));
    });
  } else if (m > 0) {
    rows(0, m);
  }
  path_counts::add(path_counts::Path::kPanelProducts);
  return true;
}

const uint16_t* PanelOperand::amx_panels() const {
  return bf16_kernel_ == Bf16PanelKernel::kAmx ? reinterpret_cast<const uint16_t*>(panels_.data_ptr<at::BFloat16>())
                                               : nullptr;
}

namespace {
std::atomic<bool>& step_teams_switch() {
  static std::atomic<bool> enabled{true};
  return enabled;
}
}  // namespace

bool step_teams_enabled() { return step_teams_switch().load(std::memory_order_relaxed); }
void set_step_teams_enabled(bool enabled) { step_teams_switch().store(enabled, std::memory_order_relaxed); }

bool StepTeam::takes(const MatrixProducts& products) {
  return products.bf16 && step_teams_enabled() && MatrixProducts::bf16_panels_take_products() &&
         bf16_panel_kernel() == Bf16PanelKernel::kAmx;
}

void StepTeam::meet(int member) {
  // Each member counts its own meetings; the k-th is over once both have arrived k times.
  const int64_t target = kMembers * ++passed_[member];
  arrivals_.fetch_add(1, std::memory_order_acq_rel);
  for (SpinWait wait; arrivals_.load(std::memory_order_acquire) < target; wait()) {
    if (abandoned_.load(std::memory_order_relaxed)) throw Error("a step product's other row block failed");
  }
}

void StepTeam::product(int member, const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& init,
                       const PanelOperand& b) {
  const uint16_t* panels = b.amx_panels();
  TORCH_CHECK(panels != nullptr, "StepTeam::product: b is not in AMX panels");
  TORCH_CHECK(a.dim() == 2 && out.dim() == 2 && a.size(0) == out.size(0) && (a.size(0) == 0 || a.stride(1) == 1) &&
                  (out.size(0) == 0 || out.stride(1) == 1) && a.scalar_type() == torch::kFloat &&
                  out.scalar_type() == torch::kFloat &&
                  (!init.defined() || (init.scalar_type() == torch::kFloat &&
                                       (init.dim() == 1 ? init.stride(0) == 1
                                                        : init.dim() == 2 && (init.size(0) == 0 || init.stride(1) == 1)))),
              "StepTeam::product: rows of unit column stride in float32 expected");
  Bf16RowBlock& mine = blocks_[member];
  mine = {a.data_ptr<float>(), a.size(0), a.size(0) > 0 ? a.stride(0) : 0, out.data_ptr<float>(),
          out.size(0) > 0 ? out.stride(0) : 0, nullptr, 0};
  if (init.defined()) {
    mine.init = init.data_ptr<float>();
    mine.init_ld = init.dim() == 2 ? init.stride(0) : 0;
  }
  meet(member);  // both members' rows are known
  const int64_t panel_count = (b.columns() + 47) / 48, half = (panel_count + 1) / 2;
  const int64_t first = member == 0 ? 0 : half, last = member == 0 ? half : panel_count;
  amx_panel_product_of_two_blocks(blocks_, a.size(1), panels, b.columns(), first, last);
  if (member == 0) path_counts::add(path_counts::Path::kStepTeamProducts);
  meet(member);  // both halves are written, and neither member's rows are read any more
}

namespace detail {

bool onednn_chosen_for(int64_t m, int64_t k, int64_t n) {
  switch (float32_products()) {
    case Float32Products::kMkl: return false;
    case Float32Products::kOneDnn: return onednn_float32_available();
    case Float32Products::kAuto: return onednn_float32_is_faster_here() && onednn_pays_for(m, k, n);
  }
  return false;
}

bool use_onednn(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& out) {
#if AT_MKLDNN_ENABLED()
  if (a.scalar_type() != torch::kFloat || b.scalar_type() != torch::kFloat || !a.device().is_cpu() ||
      a.dim() != 2 || b.dim() != 2 || a.numel() == 0 || b.numel() == 0 || !dense_or_transposed(a) ||
      !dense_or_transposed(b)) {
    return false;
  }
  if (out.defined() && (out.scalar_type() != torch::kFloat || !row_major(out))) return false;
  // oneDNN's product is not differentiable: only where autograd is not recording (the fused kernels).
  if (torch::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) return false;
  return onednn_chosen_for(a.size(0), a.size(1), b.size(1));
#else
  (void)a, (void)b, (void)out;
  return false;
#endif
}

torch::Tensor library_bf16_mm(const torch::Tensor& a, const torch::Tensor& b) {
  path_counts::add(path_counts::Path::kBf16LibraryProducts);
  return to_bf16(a).mm(to_bf16(b));
}

void onednn_mm(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b, bool accumulate) {
#if AT_MKLDNN_ENABLED()
  at::native::mkldnn_matmul(a, b, out, accumulate ? 1.0f : 0.0f, 1.0f);
  path_counts::add(path_counts::Path::kOneDnnFloat32Products);
#else
  (void)out, (void)a, (void)b, (void)accumulate;
  throw Error("this LibTorch was built without oneDNN");
#endif
}

}  // namespace detail

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  // x [M, I], weight [O, I] (dense), bias [O] or empty -> [M, O]
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
    RECORD_FUNCTION("luong::LinearFunction::forward", std::vector<c10::IValue>());
    const MatrixProducts products;
    ctx->save_for_backward({x, weight});
    return bias.numel() > 0 ? products.addmm(bias, x, weight.t()) : products.mm(x, weight.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const MatrixProducts products;
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor dy = grads[0].contiguous();
    return {ctx->needs_input_grad(0) ? products.mm(dy, weight) : torch::Tensor(),
            ctx->needs_input_grad(1) ? products.mm(dy.t(), x) : torch::Tensor(),
            ctx->needs_input_grad(2) ? dy.sum(0) : torch::Tensor()};  // (an empty bias needs none)
  }
};

}  // namespace

torch::Tensor linear_through_products(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t in = weight.size(1), out = weight.size(0);
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  const bool through_products = x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
                                x.device().is_cpu() && x.size(-1) == in && !bf16_products(x.device()) &&
                                (!bias.defined() || bias.scalar_type() == torch::kFloat) &&
                                rows > 0 && in > 0 && out > 0 && detail::onednn_chosen_for(rows, in, out);
  if (!through_products) return torch::linear(x, weight, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  const torch::Tensor y = LinearFunction::apply(x.reshape({rows, in}).contiguous(), weight.contiguous(),
                                                bias.defined() ? bias : torch::empty({0}, weight.options()));
  return y.view(shape);
}

std::vector<torch::Tensor> MatrixProducts::mm_each(const std::vector<Factors>& factors,
                                                   const std::vector<torch::Tensor>& outs) const {
  TORCH_CHECK(outs.empty() || outs.size() == factors.size(), "mm_each: ", outs.size(), " outputs for ", factors.size(),
              " products");
  // Below this many multiply-adds a product is dealt whole to a thread: the largest of the notebook's
  // weight gradients is 2.5 million, hidden 512's are hundreds of millions, which the libraries split well.
  constexpr int64_t kDealtProduct = int64_t{1} << 24;
  const auto threads = static_cast<std::size_t>(task_threads());
  std::vector<int64_t> sizes;
  for (const auto& [a, b] : factors) sizes.push_back(a.size(0) * a.size(1) * b.size(1));
  std::vector<torch::Tensor> out(factors.size());
  const auto multiply = [&](std::size_t i) {
    if (outs.empty() || !outs[i].defined()) {
      out[i] = mm(factors[i].first, factors[i].second);
    } else {
      out[i] = outs[i];
      mm_out(out[i], factors[i].first, factors[i].second);
    }
  };
  const bool deal = threads > 1 && factors.size() > 1 &&
                    std::all_of(sizes.begin(), sizes.end(), [](int64_t size) { return size < kDealtProduct; });
  if (!deal) {
    for (std::size_t i = 0; i < factors.size(); ++i) multiply(i);
    return out;
  }
  std::vector<std::size_t> order(factors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return sizes[x] > sizes[y]; });
  std::vector<std::vector<std::size_t>> dealt(std::min(threads, factors.size()));
  std::vector<int64_t> load(dealt.size(), 0);
  for (const std::size_t i : order) {
    const auto least = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    dealt[least].push_back(i);
    load[least] += sizes[i];
  }
  run_tasks(static_cast<int64_t>(dealt.size()), [&](int64_t t) {
    for (const std::size_t i : dealt[static_cast<std::size_t>(t)]) multiply(i);
  });
  path_counts::add(path_counts::Path::kProductsDealt, static_cast<int64_t>(factors.size()));
  return out;
}

std::optional<PanelProductRates> measure_panel_product_rates(int64_t rows, int64_t k, int64_t n, double seconds) {
  if (!panel_products_enabled() || bf16_panel_kernel() == Bf16PanelKernel::kNone) return std::nullopt;
  const torch::NoGradGuard no_grad;
  // (values that leave the random generators alone: the product's speed does not depend on them)
  const torch::Tensor a = torch::linspace(-1, 1, rows * k).view({rows, k});
  const torch::Tensor b = torch::linspace(1, -1, k * n).view({k, n});
  torch::Tensor out = torch::empty({rows, n});
  const auto rate = [&](bool bf16) {
    const PanelOperand operand(b, bf16);
    if (!operand.in_panels()) return 0.0;
    const MatrixProducts products{bf16};
    products.mm_out(out, a, operand);  // (first-call costs out of the timing)
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    int64_t calls = 0;
    double elapsed = 0;
    do {
      products.mm_out(out, a, operand);
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds);
    return 2.0 * static_cast<double>(rows * k * n) * static_cast<double>(calls) / elapsed / 1e9;
  };
  const PanelProductRates rates{rate(false), rate(true)};
  if (rates.float32 <= 0 || rates.bf16 <= 0) return std::nullopt;
  return rates;
}

}  // namespace luong::models
