// FusedAdam against LibTorch's Adam: the same parameters and state after several steps (double
// precision), with and without amsgrad and weight decay, and checkpoints interchangeable.
#include <gtest/gtest.h>

#include <sstream>

#include "luong/training/fused_adam.h"
#include "luong/training/train_step.h"
#include "luong/util/path_counts.h"

namespace luong::training {
namespace {

std::vector<torch::Tensor> make_params(int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({300, 7}, torch::kDouble).requires_grad_(), torch::randn({40000}, torch::kDouble).requires_grad_(),
          torch::randn({5}, torch::kDouble).requires_grad_(), torch::randn({0}, torch::kDouble).requires_grad_()};
}

void set_gradients(std::vector<torch::Tensor>& params, int step) {
  torch::manual_seed(100 + step);
  for (auto& p : params) p.mutable_grad() = torch::randn_like(p) * (step % 2 ? 1e-3 : 10.0);
}

double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].numel() > 0) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

struct Case {
  std::string name;
  torch::optim::AdamOptions options;
};
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

class FusedAdamTest : public ::testing::TestWithParam<Case> {};

// On 1 and 3 threads: the threads split all parameters' values as one run (three cut it at 14,035
// and 28,070, inside the 40,000-value parameter; the third's share ends in the 5-value one), and an
// empty parameter takes no share.
TEST_P(FusedAdamTest, MatchesLibTorchAdam) {
  const int threads = torch::get_num_threads();
  for (const int t : {1, 3}) {
    torch::set_num_threads(t);
    std::vector<torch::Tensor> reference = make_params(1), fused = make_params(1);
    torch::optim::Adam adam(reference, GetParam().options);
    FusedAdam fused_adam(fused, GetParam().options);
    for (int step = 1; step <= 6; ++step) {
      set_gradients(reference, step);
      set_gradients(fused, step);
      adam.step();
      fused_adam.step();
      const double diff = max_difference(reference, fused);
      std::printf("  %d threads, step %d: max|param diff| %.3e\n", t, step, diff);
      EXPECT_LE(diff, 1e-14);
    }
    EXPECT_GT(max_difference(reference, make_params(1)), 1e-3);  // the parameters did move
  }
  torch::set_num_threads(threads);
}

// Clipping folded into the fused pass against LibTorch's clip_grad_norm_ followed by its Adam. On
// the fused path the gradients are left unscaled (the proof that the scaling happened inside the
// pass); with a non-contiguous gradient the step is Adam's own, after scaling them in place.
TEST_P(FusedAdamTest, StepScaledMatchesClipGradNormThenAdam) {
  for (const bool fusable : {true, false}) {
    SCOPED_TRACE(fusable ? "fused" : "fallback");
    std::vector<torch::Tensor> reference = make_params(3), fused = make_params(3);
    torch::optim::Adam adam(reference, GetParam().options);
    FusedAdam fused_adam(fused, GetParam().options);
    int clipped_steps = 0;
    for (int step = 1; step <= 6; ++step) {
      set_gradients(reference, step);
      set_gradients(fused, step);
      if (!fusable) fused[0].mutable_grad() = fused[0].grad().t().contiguous().t();  // same values, transposed strides
      const std::vector<torch::Tensor> before = {fused[0].grad().clone(), fused[1].grad().clone()};
      const double norm = torch::nn::utils::clip_grad_norm_(reference, 1.0);
      clipped_steps += norm > 1.0;
      adam.step();
      fused_adam.step_scaled(gradient_clip(fused, 1.0).coefficient);
      EXPECT_LE(max_difference(reference, fused), 1e-14) << "step " << step;
      const double unscaled = max_difference({fused[0].grad(), fused[1].grad()}, before);
      if (fusable || norm <= 1.0) {
        EXPECT_EQ(unscaled, 0.0) << "step " << step;
      } else {
        EXPECT_GT(unscaled, 1e-3) << "step " << step;
      }
    }
    EXPECT_EQ(clipped_steps, 3);  // the steps with gradients of scale 10; those of scale 1e-3 pass unclipped
  }
}

INSTANTIATE_TEST_SUITE_P(Options, FusedAdamTest,
                         ::testing::Values(Case{"defaults", torch::optim::AdamOptions(1e-2)},
                                           Case{"amsgrad_weight_decay",
                                                torch::optim::AdamOptions(3e-3).amsgrad(true).weight_decay(0.01).eps(1e-6)}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// FusedAdam's device step (LibTorch's multi-tensor _fused_adam_, the step counts and learning rate
// in tensors, clipping's coefficient as a divisor: what CUDA graphs replay) against LibTorch's Adam
// on gradients scaled first, in double: 1e-9 of the parameters, since _fused_adam_ holds the
// learning rate and the divisor in float32, 6e-8 off the double values. A step prepared, then
// cancelled (a capture that failed) leaves the host's and the device's counts as if it had never
// been prepared. On a GPU through step_scaled, as training takes it; on the CPU (LibTorch's
// _fused_adam_ has a CPU kernel) through the two halves.
void device_step_matches_adam(const torch::Device& device) {
  torch::manual_seed(4);
  const auto tensors = torch::TensorOptions().dtype(torch::kDouble).device(device);
  std::vector<torch::Tensor> mine, theirs;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{7, 5}, {5}, {3, 4, 2}}) {
    const torch::Tensor start = torch::randn(shape, tensors);
    mine.push_back(start.clone().requires_grad_());
    theirs.push_back(start.clone().requires_grad_());
  }
  const auto options = torch::optim::AdamOptions(3e-3).weight_decay(0.02);
  training::FusedAdam fused(mine, options);
  torch::optim::Adam plain(theirs, options);
  for (int step = 0; step < 4; ++step) {
    const torch::Tensor scale = torch::full({}, 0.25 + 0.2 * step, tensors);
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const torch::Tensor g = torch::randn(mine[k].sizes(), tensors);
      mine[k].mutable_grad() = g.clone();
      theirs[k].mutable_grad() = g.clone();
    }
    if (step == 1) {
      fused.prepare_device_step();
      fused.cancel_device_step();
    }
    if (device.is_cuda()) {
      ASSERT_TRUE(fused.device_fusable());
      fused.step_scaled(scale);
    } else {
      fused.prepare_device_step();
      fused.launch_device_step(scale);
    }
    training::scale_gradients(theirs, scale);
    plain.step();
  }
  for (std::size_t k = 0; k < mine.size(); ++k) {
    EXPECT_LE((mine[k] - theirs[k]).abs().max().item<double>(), 1e-9 * theirs[k].abs().max().item<double>()) << k;
    const auto& state = static_cast<torch::optim::AdamParamState&>(*fused.state().at(mine[k].unsafeGetTensorImpl()));
    EXPECT_EQ(state.step(), 4);  // the host's count, which checkpoints save
  }
}

TEST(FusedAdamDeviceStepTest, HalvesMatchAdamAndACancelledStepLeavesNoTrace) { device_step_matches_adam(torch::kCPU); }

TEST(CudaFusedAdamTest, DeviceStepMatchesLibTorchsAdam) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device is visible";
  device_step_matches_adam(torch::kCUDA);
}

// gradient_clip's one pass over the gradients against LibTorch's clip_grad_norm_ (float and double,
// a gradient longer than one chunk, an undefined gradient), the same bits on 1 and 3 threads; a
// non-contiguous gradient leaves the pass (nullopt) and gradient_clip takes LibTorch's norms.
TEST(GradientNormTest, OnePassEqualsClipGradNorm) {
  for (const torch::ScalarType dtype : {torch::kFloat, torch::kDouble}) {
    torch::manual_seed(12);
    std::vector<torch::Tensor> params = {torch::randn({300, 7}, dtype), torch::randn({200001}, dtype),
                                         torch::randn({5}, dtype), torch::randn({3}, dtype)};
    for (std::size_t i = 0; i < 3; ++i) params[i].mutable_grad() = torch::randn_like(params[i]) * 0.01;
    const int threads = torch::get_num_threads();
    torch::set_num_threads(1);
    const std::optional<double> one = gradient_squares_sum(params);
    torch::set_num_threads(3);
    const std::optional<double> three = gradient_squares_sum(params);
    torch::set_num_threads(threads);
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(*one, *three);
    const GradientClip clip = gradient_clip(params, 1.0);
    EXPECT_EQ(clip.norm.scalar_type(), dtype);
    EXPECT_EQ(clip.norm.item<double>(), static_cast<double>(torch::tensor(std::sqrt(*one), dtype).item<double>()));
    std::vector<torch::Tensor> copies;
    for (const torch::Tensor& p : params) {
      copies.push_back(p.detach().clone());
      if (p.grad().defined()) copies.back().mutable_grad() = p.grad().clone();
    }
    const double reference = torch::nn::utils::clip_grad_norm_(copies, 1.0);
    EXPECT_NEAR(clip.norm.item<double>(), reference, (dtype == torch::kFloat ? 1e-6 : 1e-13) * reference);
    EXPECT_NEAR(clip.coefficient.item<double>(), std::min(1.0, 1.0 / (reference + 1e-6)), 1e-6);
    params[0].mutable_grad() = params[0].grad().t().contiguous().t();  // same values, transposed strides
    EXPECT_FALSE(gradient_squares_sum(params).has_value());
    EXPECT_NEAR(gradient_clip(params, 1.0).norm.item<double>(), reference,
                (dtype == torch::kFloat ? 1e-6 : 1e-13) * reference);
  }
}

// Four chunks summed side by side (four streams for the prefetchers) give each chunk's sum to the
// bit as summed alone: four gradients of one chunk each, the last shorter than the others and not a
// multiple of 32 values, against the same gradients one call each; then a float chunk among double
// ones, which leaves its group to the one-by-one path.
TEST(GradientNormTest, ChunksSideBySideSumAsEachAlone) {
  for (const torch::ScalarType dtype : {torch::kFloat, torch::kDouble}) {
    torch::manual_seed(13);
    std::vector<torch::Tensor> params = {torch::zeros({65536}, dtype), torch::zeros({256, 256}, dtype),
                                         torch::zeros({65536}, dtype), torch::zeros({1007}, dtype)};
    for (torch::Tensor& p : params) p.mutable_grad() = torch::randn_like(p) * 0.37;
    const int64_t before = path_counts::read(path_counts::Path::kGradientChunksSideBySide);
    const std::optional<double> together = gradient_squares_sum(params);
    EXPECT_EQ(path_counts::read(path_counts::Path::kGradientChunksSideBySide) - before, 4);
    double alone = 0;
    for (const torch::Tensor& p : params) alone += *gradient_squares_sum({p});
    ASSERT_TRUE(together.has_value());
    EXPECT_EQ(*together, alone);
    const double exact = [&] {
      double sum = 0;
      for (const torch::Tensor& p : params) sum += p.grad().to(torch::kDouble).square().sum().item<double>();
      return sum;
    }();
    EXPECT_NEAR(*together, exact, 1e-12 * exact);
  }
  std::vector<torch::Tensor> mixed = {torch::zeros({100}, torch::kDouble), torch::zeros({100}, torch::kFloat),
                                      torch::zeros({100}, torch::kDouble), torch::zeros({100}, torch::kDouble)};
  for (torch::Tensor& p : mixed) p.mutable_grad() = torch::full_like(p, 0.5);
  const int64_t before = path_counts::read(path_counts::Path::kGradientChunksSideBySide);
  EXPECT_EQ(*gradient_squares_sum(mixed), 100.0);
  EXPECT_EQ(path_counts::read(path_counts::Path::kGradientChunksSideBySide), before);
}

TEST(FusedAdamCheckpointTest, StateLoadsIntoAdamAndBack) {
  std::vector<torch::Tensor> a = make_params(2), b = make_params(2);
  FusedAdam fused(a, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam plain(b, torch::optim::AdamOptions(1e-2));
  for (int step = 1; step <= 3; ++step) {
    set_gradients(a, step);
    set_gradients(b, step);
    fused.step();
    plain.step();
  }
  // Swap the optimisers' states through archives: each continues from the other's state.
  const auto saved = [](torch::optim::Optimizer& optimizer) {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    std::stringstream bytes;
    archive.save_to(bytes);
    return bytes.str();
  };
  const auto load = [](torch::optim::Optimizer& optimizer, const std::string& bytes) {
    std::stringstream in(bytes);
    torch::serialize::InputArchive archive;
    archive.load_from(in);
    optimizer.load(archive);
  };
  const std::string fused_state = saved(fused), plain_state = saved(plain);
  torch::optim::Adam plain_from_fused(b, torch::optim::AdamOptions(1e-2));
  FusedAdam fused_from_plain(a, torch::optim::AdamOptions(1e-2));
  load(plain_from_fused, fused_state);
  load(fused_from_plain, plain_state);
  set_gradients(a, 4);
  set_gradients(b, 4);
  fused_from_plain.step();
  plain_from_fused.step();
  EXPECT_LE(max_difference(a, b), 1e-14);
}

}  // namespace
}  // namespace luong::training
