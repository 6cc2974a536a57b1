#include "luong/training/fused_adam.h"

#include "luong/util/target_clones.h"
#include "luong/util/path_counts.h"

#include <ATen/Parallel.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_foreach_add.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>

namespace luong::training {

namespace {

// Adam::state() is keyed by the parameter's TensorImpl address.
void* state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

struct Coefficients {
  double gradient_scale, beta1, beta2, eps, weight_decay, step_size, sqrt_correction2;
  bool amsgrad;
};

// One pass of Adam (Kingma & Ba, with LibTorch's order of operations) over [begin, end).
// Inlined into the clones below. This file is compiled with -fno-math-errno (CMakeLists.txt):
// otherwise GCC keeps std::sqrt scalar, since it may set errno, and this loop would not vectorise.
template <typename T>
[[gnu::always_inline]] inline void adam_range(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t begin, int64_t end,
                const Coefficients& c) {
  const T gradient_scale = static_cast<T>(c.gradient_scale);
  const T beta1 = static_cast<T>(c.beta1), beta2 = static_cast<T>(c.beta2);
  const T one_minus_beta1 = static_cast<T>(1 - c.beta1), one_minus_beta2 = static_cast<T>(1 - c.beta2);
  const T eps = static_cast<T>(c.eps), weight_decay = static_cast<T>(c.weight_decay);
  const T step_size = static_cast<T>(c.step_size), sqrt_correction2 = static_cast<T>(c.sqrt_correction2);
  for (int64_t i = begin; i < end; ++i) {
    const T scaled = grad[i] * gradient_scale;  // as clipping's mul_ would have left it, to the bit
    const T g = c.weight_decay != 0 ? scaled + weight_decay * param[i] : scaled;
    const T m = exp_avg[i] * beta1 + one_minus_beta1 * g;
    T v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (c.amsgrad) v = max_exp_avg_sq[i] = std::max(max_exp_avg_sq[i], v);
    const T denom = std::sqrt(v) / sqrt_correction2 + eps;
    param[i] -= step_size * m / denom;
  }
}

#define LUONG_ADAM_CLONES LUONG_X86_CLONES

LUONG_ADAM_CLONES void adam_range_float(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                        float* max_exp_avg_sq, int64_t begin, int64_t end, const Coefficients& c) {
  adam_range(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, begin, end, c);
}

LUONG_ADAM_CLONES void adam_range_double(double* param, const double* grad, double* exp_avg, double* exp_avg_sq,
                                         double* max_exp_avg_sq, int64_t begin, int64_t end, const Coefficients& c) {
  adam_range(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, begin, end, c);
}

// The sums of x[s][i]^2 in double of `Arrays` arrays at once, each summed as it would be alone: 32
// values a turn into four sums of 8 lanes, each a vector load (and, for float, one conversion), so
// that neither the loads nor the additions' latency bound the pass (one sum with element-wise loads
// gathered the lanes one by one). The vector types keep GCC from summing in order. Four arrays side
// by side are four streams for the prefetchers, faster than one array at a time (the same sums to
// the bit; docs/PERFORMANCE.md).
template <int Arrays, typename T>
[[gnu::always_inline]] inline void squares_sums(const T* const* x, const int64_t* n, double* out) {
  typedef double Lanes __attribute__((vector_size(64)));
  typedef T Loaded __attribute__((vector_size(8 * sizeof(T))));
  Lanes sum[Arrays][4] = {};
  const auto add_turn = [&](int a, int64_t i) {
    for (int u = 0; u < 4; ++u) {
      Loaded v;
      std::memcpy(&v, x[a] + i + 8 * u, sizeof v);
      const Lanes d = __builtin_convertvector(v, Lanes);
      sum[a][u] += d * d;
    }
  };
  int64_t shortest = n[0];
  for (int a = 1; a < Arrays; ++a) shortest = std::min(shortest, n[a]);
  int64_t i = 0;
  for (; i + 32 <= shortest; i += 32) {
    for (int a = 0; a < Arrays; ++a) add_turn(a, i);
  }
  for (int a = 0; a < Arrays; ++a) {
    int64_t j = i;
    for (; j + 32 <= n[a]; j += 32) add_turn(a, j);
    const Lanes lanes = (sum[a][0] + sum[a][1]) + (sum[a][2] + sum[a][3]);
    double total = 0;
    for (int k = 0; k < 8; ++k) total += lanes[k];
    for (; j < n[a]; ++j) total += static_cast<double>(x[a][j]) * static_cast<double>(x[a][j]);
    out[a] = total;
  }
}

constexpr int kArraysSideBySide = 4;

// `count` arrays' sums: kArraysSideBySide at a time where there are that many, else one by one.
template <typename T>
[[gnu::always_inline]] inline void squares_sums_of(const T* const* x, const int64_t* n, int count, double* out) {
  if (count == kArraysSideBySide) {
    squares_sums<kArraysSideBySide>(x, n, out);
    return;
  }
  for (int a = 0; a < count; ++a) squares_sums<1>(x + a, n + a, out + a);
}

LUONG_ADAM_CLONES void squares_sums_float(const float* const* x, const int64_t* n, int count, double* out) {
  squares_sums_of(x, n, count, out);
}
LUONG_ADAM_CLONES void squares_sums_double(const double* const* x, const int64_t* n, int count, double* out) {
  squares_sums_of(x, n, count, out);
}


bool fusable(const torch::Tensor& p) {
  return p.device().is_cpu() && p.layout() == torch::kStrided && p.is_contiguous() &&
         (p.scalar_type() == torch::kFloat || p.scalar_type() == torch::kDouble) && !p.grad().is_sparse() &&
         p.grad().is_contiguous() && p.grad().scalar_type() == p.scalar_type();
}

}  // namespace

void scale_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& scale) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) p.grad().mul_(scale);
  }
}

bool FusedAdam::fusable_step() const {
  for (const auto& group : param_groups()) {
    for (const torch::Tensor& p : group.params()) {
      if (p.grad().defined() && !fusable(p)) return false;
    }
  }
  return true;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  if (device_fusable()) {
    torch::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    prepare_device_step();
    launch_device_step({});
    return loss;
  }
  if (!fusable_step()) return torch::optim::Adam::step(std::move(closure));
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  fused_step(1.0);
  return loss;
}

void FusedAdam::step_scaled(const torch::Tensor& gradient_scale) {
  if (device_fusable()) {
    prepare_device_step();
    launch_device_step(gradient_scale);
    return;
  }
  if (fusable_step()) {
    fused_step(gradient_scale.item<double>());  // a CPU scalar: reading it costs nothing
    return;
  }
  for (const auto& group : param_groups()) scale_gradients(group.params(), gradient_scale);
  torch::optim::Adam::step();
}

std::optional<double> gradient_squares_sum(const std::vector<torch::Tensor>& parameters) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<const void*> chunk_data;
  std::vector<int64_t> chunk_count;
  std::vector<bool> chunk_is_float;
  for (const torch::Tensor& p : parameters) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (!g.device().is_cpu() || g.layout() != torch::kStrided || !g.is_contiguous() ||
        (g.scalar_type() != torch::kFloat && g.scalar_type() != torch::kDouble)) {
      return std::nullopt;
    }
    const bool is_float = g.scalar_type() == torch::kFloat;
    const auto* base = static_cast<const char*>(g.data_ptr());
    const int64_t size = is_float ? 4 : 8;
    for (int64_t begin = 0; begin < g.numel(); begin += kChunk) {
      chunk_data.push_back(base + begin * size);
      chunk_count.push_back(std::min(kChunk, g.numel() - begin));
      chunk_is_float.push_back(is_float);
    }
  }
  // Groups of kArraysSideBySide consecutive chunks, summed side by side where they share a type.
  const auto chunks = static_cast<int64_t>(chunk_data.size());
  std::vector<double> sums(chunk_data.size(), 0.0);
  const auto sum_chunks = [&](std::size_t first, int count) {  // chunks of one type
    if (chunk_is_float[first]) {
      std::array<const float*, kArraysSideBySide> x{};
      for (int k = 0; k < count; ++k) x[k] = static_cast<const float*>(chunk_data[first + k]);
      squares_sums_float(x.data(), &chunk_count[first], count, &sums[first]);
    } else {
      std::array<const double*, kArraysSideBySide> x{};
      for (int k = 0; k < count; ++k) x[k] = static_cast<const double*>(chunk_data[first + k]);
      squares_sums_double(x.data(), &chunk_count[first], count, &sums[first]);
    }
    if (count == kArraysSideBySide) path_counts::add(path_counts::Path::kGradientChunksSideBySide, count);
  };
  at::parallel_for(0, (chunks + kArraysSideBySide - 1) / kArraysSideBySide, 1, [&](int64_t begin, int64_t end) {
    for (int64_t group = begin; group < end; ++group) {
      const auto first = static_cast<std::size_t>(group * kArraysSideBySide);
      const int count = static_cast<int>(std::min<int64_t>(kArraysSideBySide, chunks - group * kArraysSideBySide));
      const bool one_type = std::all_of(chunk_is_float.begin() + first, chunk_is_float.begin() + first + count,
                                        [&](bool is_float) { return is_float == chunk_is_float[first]; });
      if (one_type) {
        sum_chunks(first, count);
      } else {
        for (int k = 0; k < count; ++k) sum_chunks(first + k, 1);
      }
    }
  });
  double total = 0;
  for (const double s : sums) total += s;
  return total;
}


torch::optim::AdamParamState& FusedAdam::state_of(const torch::Tensor& p, bool amsgrad) {
  auto& states = state();
  const auto key = state_key(p);
  auto found = states.find(key);
  if (found == states.end()) {
    auto fresh = std::make_unique<torch::optim::AdamParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    if (amsgrad) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    found = states.emplace(key, std::move(fresh)).first;
  }
  return static_cast<torch::optim::AdamParamState&>(*found->second);
}

bool FusedAdam::device_fusable() const {
  bool any = false;
  for (const auto& group : param_groups()) {
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!p.is_cuda() || p.layout() != torch::kStrided || p.grad().is_sparse() ||
          p.grad().scalar_type() != p.scalar_type() || p.grad().device() != p.device()) {
        return false;
      }
      any = true;
    }
  }
  return any;
}

void FusedAdam::prepare_device_step() {
  device_groups_.resize(param_groups().size());
  for (std::size_t g = 0; g < param_groups().size(); ++g) {
    const auto& group = param_groups()[g];
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    DeviceGroup& device = device_groups_[g];
    device.params.clear();
    device.grads.clear();
    device.exp_avgs.clear();
    device.exp_avg_sqs.clear();
    device.max_exp_avg_sqs.clear();
    device.steps.clear();
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      torch::optim::AdamParamState& state = state_of(p, options.amsgrad());
      DeviceCount& count = device.counts[state_key(p)];
      if (!count.value.defined()) count.value = torch::zeros({}, p.options().dtype(torch::kFloat));
      if (count.host != state.step()) count.value.fill_(static_cast<double>(state.step()));  // a loaded state
      state.step(state.step() + 1);
      count.host = state.step();  // the device's count gets there in launch_device_step
      device.params.push_back(p);
      device.grads.push_back(p.grad());
      device.exp_avgs.push_back(state.exp_avg());
      device.exp_avg_sqs.push_back(state.exp_avg_sq());
      if (options.amsgrad()) device.max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
      device.steps.push_back(count.value);
    }
    if (!device.params.empty()) {
      if (!device.learning_rate.defined()) {
        device.learning_rate = torch::empty({}, device.params[0].options().dtype(torch::kFloat));
      }
      device.learning_rate.fill_(options.lr());
    }
  }
}

void FusedAdam::cancel_device_step() {
  for (DeviceGroup& device : device_groups_) {
    for (const torch::Tensor& p : device.params) {
      // The host's count goes back; the device's then differs from it, and the next
      // prepare_device_step writes it anew.
      auto& counted = static_cast<torch::optim::AdamParamState&>(*state().at(state_key(p)));
      counted.step(counted.step() - 1);
    }
    device.params.clear();
  }
}

void FusedAdam::launch_device_step(const torch::Tensor& gradient_scale) {
  RECORD_FUNCTION("luong::FusedAdam::launch_device_step", std::vector<c10::IValue>());
  torch::NoGradGuard no_grad;
  std::optional<torch::Tensor> divisor;  // _fused_adam_ divides each gradient by it
  for (std::size_t g = 0; g < device_groups_.size(); ++g) {
    DeviceGroup& device = device_groups_[g];
    if (device.params.empty()) continue;
    if (gradient_scale.defined() && !divisor) {
      divisor = torch::reciprocal(gradient_scale.to(device.params[0].device(), torch::kFloat));
    }
    const auto& options = static_cast<const torch::optim::AdamOptions&>(param_groups()[g].options());
    torch::_foreach_add_(device.steps, 1.0);
    at::_fused_adam_(device.params, device.grads, device.exp_avgs, device.exp_avg_sqs, device.max_exp_avg_sqs,
                     device.steps, device.learning_rate, std::get<0>(options.betas()), std::get<1>(options.betas()),
                     options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false, divisor);
  }
}

namespace {

// A parameter in Adam's pass. All parameters' values make one index space that LibTorch's threads
// split evenly in one parallel region, so that each thread updates as many values however the
// parameters' sizes differ (a region per parameter ran every parameter under two grains, most of the
// notebook's, on one thread, and paid a region's start for each).
struct AdamParameter {
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;  // null without amsgrad
  bool is_float;
  Coefficients coefficients;
  int64_t offset, numel;  // its first value's index in the joint space, its count
};

void adam_values(const AdamParameter& p, int64_t begin, int64_t end) {
  if (p.is_float) {
    adam_range_float(static_cast<float*>(p.param), static_cast<const float*>(p.grad), static_cast<float*>(p.exp_avg),
                     static_cast<float*>(p.exp_avg_sq), static_cast<float*>(p.max_exp_avg_sq), begin, end, p.coefficients);
  } else {
    adam_range_double(static_cast<double*>(p.param), static_cast<const double*>(p.grad),
                      static_cast<double*>(p.exp_avg), static_cast<double*>(p.exp_avg_sq),
                      static_cast<double*>(p.max_exp_avg_sq), begin, end, p.coefficients);
  }
}

}  // namespace

void FusedAdam::fused_step(double gradient_scale) {
  RECORD_FUNCTION("luong::FusedAdam::fused_step", std::vector<c10::IValue>());
  torch::NoGradGuard no_grad;
  std::vector<AdamParameter> parameters;
  int64_t total = 0;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      torch::optim::AdamParamState& state = state_of(p, options.amsgrad());
      state.exp_avg(state.exp_avg().contiguous());  // no-ops for the states this class creates
      state.exp_avg_sq(state.exp_avg_sq().contiguous());
      if (options.amsgrad()) state.max_exp_avg_sq(state.max_exp_avg_sq().contiguous());
      state.step(state.step() + 1);
      const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
      const double correction1 = 1 - std::pow(beta1, state.step());
      const double correction2 = 1 - std::pow(beta2, state.step());
      const Coefficients c{gradient_scale, beta1, beta2, options.eps(), options.weight_decay(), options.lr() / correction1,
                           std::sqrt(correction2), options.amsgrad()};
      if (p.numel() == 0) continue;
      parameters.push_back({p.data_ptr(), p.grad().data_ptr(), state.exp_avg().data_ptr(), state.exp_avg_sq().data_ptr(),
                            options.amsgrad() ? state.max_exp_avg_sq().data_ptr() : nullptr,
                            p.scalar_type() == torch::kFloat, c, total, p.numel()});
      total += p.numel();
    }
  }
  at::parallel_for(0, total, 16384, [&](int64_t begin, int64_t end) {
    auto p = std::upper_bound(parameters.begin(), parameters.end(), begin,
                              [](int64_t index, const AdamParameter& q) { return index < q.offset; }) - 1;
    for (; p != parameters.end() && p->offset < end; ++p) {
      adam_values(*p, std::max(begin, p->offset) - p->offset, std::min(end, p->offset + p->numel) - p->offset);
    }
  });
}

}  // namespace luong::training
