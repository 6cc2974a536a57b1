// linear_cross_entropy against linear + cross_entropy through autograd, in double precision, with
// the vocabulary cut into 1, 2 and 3 slices (one per intra-op thread) and targets on slice edges.
#include <gtest/gtest.h>

#include "luong/models/linear_cross_entropy.h"
#include "luong/models/matrix_products.h"
#include "luong/util/large_block_cache.h"
#include "luong/util/path_counts.h"

namespace luong::models {
namespace {

double largest_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// What a tolerance scales with: the largest magnitude in `expected`, at least 1.
double tolerance_scale(const torch::Tensor& expected) { return std::max(expected.abs().max().item<double>(), 1.0); }

class LinearCrossEntropyTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    threads_before_ = torch::get_num_threads();
    torch::set_num_threads(GetParam());
  }
  void TearDown() override { torch::set_num_threads(threads_before_); }

 private:
  int threads_before_ = 1;
};

// Two shapes: a small one with targets on the slices' edges (to 1e-14 of the largest value), and a
// wide vocabulary with label smoothing (to 1e-12: sums of 30,011 terms in another order; 1.6e-13
// measured).
TEST_P(LinearCrossEntropyTest, MatchesAutogradInDouble) {
  struct Shape {
    int64_t N, H, V;
    double smoothing, tolerance;
  };
  for (const Shape shape : {Shape{7, 5, 13, 0.0, 1e-14}, Shape{21, 6, 30011, 0.1, 1e-12}}) {
    const auto [N, H, V, smoothing, tolerance] = shape;
    torch::manual_seed(9);
    const torch::Tensor x0 = torch::randn({N, H}, torch::kDouble), w0 = torch::randn({V, H}, torch::kDouble) * 3;
    const torch::Tensor b0 = torch::randn({V}, torch::kDouble);
    const torch::Tensor targets = N == 7 ? torch::tensor({0, 12, 6, 4, 9, 8, 0}, torch::kLong)  // edges of 2 and 3 slices
                                         : torch::randint(V, {N}, torch::kLong);
    const torch::Tensor weights = torch::rand({N}, torch::kDouble) + 0.5;  // per-row loss weights

    const auto run = [&](bool fused) {
      torch::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      const torch::Tensor losses =
          fused ? linear_cross_entropy(x, w, b, targets, smoothing)
                : torch::nn::functional::cross_entropy(
                      torch::nn::functional::linear(x, w, b), targets,
                      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(smoothing));
      (losses * weights).sum().backward();
      return std::vector<torch::Tensor>{losses.detach(), x.grad(), w.grad(), b.grad()};
    };
    const std::vector<torch::Tensor> fused = run(true), reference = run(false);
    const char* names[] = {"losses", "d x", "d weight", "d bias"};
    for (std::size_t i = 0; i < fused.size(); ++i) {
      const double diff = largest_difference(fused[i], reference[i]);
      const double scale = reference[i].abs().max().item<double>();
      std::printf("  V %5ld, %d thread(s) %-9s max|diff| %.3e (max %.3e)\n", static_cast<long>(V), GetParam(), names[i],
                  diff, scale);
      EXPECT_LE(diff, tolerance * tolerance_scale(reference[i])) << names[i] << ", V " << V;
    }
  }
}

// In float32 the logits' product runs in panels, the bias starting its sums: linear_cross_entropy
// [N, H] x [H, V] against the double reference and against the library's product (panels off), each
// value within 1e-5 of the largest; returns the panel products that ran.
int64_t check_float32_panels(int64_t N, int64_t H, int64_t V) {
  torch::manual_seed(10);
  const torch::Tensor x0 = torch::randn({N, H}, torch::kDouble), w0 = torch::randn({V, H}, torch::kDouble) * 0.3;
  const torch::Tensor b0 = torch::randn({V}, torch::kDouble);
  const torch::Tensor targets = torch::randint(V, {N}, torch::kLong);
  const auto run = [&](torch::ScalarType dtype) {
    torch::Tensor x = x0.to(dtype).requires_grad_(), w = w0.to(dtype).requires_grad_(), b = b0.to(dtype).requires_grad_();
    const torch::Tensor losses = linear_cross_entropy(x, w, b, targets, 0.1);
    losses.sum().backward();
    return std::vector<torch::Tensor>{losses.detach().to(torch::kDouble), x.grad().to(torch::kDouble),
                                      w.grad().to(torch::kDouble), b.grad().to(torch::kDouble)};
  };
  const bool before = panel_products_enabled();
  set_panel_products_enabled(false);
  const std::vector<torch::Tensor> library = run(torch::kFloat);
  set_panel_products_enabled(true);
  const int64_t panels_before = path_counts::read(path_counts::Path::kPanelProducts);
  const std::vector<torch::Tensor> panels = run(torch::kFloat);
  const int64_t ran = path_counts::read(path_counts::Path::kPanelProducts) - panels_before;
  set_panel_products_enabled(before);
  const std::vector<torch::Tensor> reference = run(torch::kDouble);
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const double scale = tolerance_scale(reference[i]);
    EXPECT_LE(largest_difference(panels[i], reference[i]), 1e-5 * scale) << i;
    EXPECT_LE(largest_difference(panels[i], library[i]), 1e-5 * scale) << i;
  }
  return ran;
}

TEST_P(LinearCrossEntropyTest, Float32PanelsMatchTheLibraryAndDouble) {
  if (panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "this processor has no panel kernel";
  EXPECT_EQ(check_float32_panels(37, 64, 101), std::min<int64_t>(GetParam(), 101)) << "one panel product a slice";
}

// Logits that outgrow the caches beside a narrow layer's weights are computed and exponentiated
// block by block of rows (300 rows of 1,000-3,000 columns: 3 to 8 blocks a slice, the last ragged).
TEST_P(LinearCrossEntropyTest, LogitsInRowBlocksMatchTheLibraryAndDouble) {
  if (panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "this processor has no panel kernel";
  EXPECT_GE(check_float32_panels(300, 64, 3000), 3 * GetParam()) << "several row blocks a slice";
}

// A slice's logits of 32 MiB or more (4,400 rows of 2,000 columns: 35 MB) come from the blocks the
// CPU allocator keeps (luong/util/large_block_cache.h), as in training: one still held by a graph
// not yet backwarded is never handed out, the losses and gradients are LibTorch's (float32, within
// 1e-5 of the largest), and a later call reuses a kept block for every slice and gives the same bits.
TEST_P(LinearCrossEntropyTest, LargeLogitsReuseTheAllocatorsKeptBlocksOnceFree) {
  const LargeBlockCache& cache = install_large_block_cache();
  const int64_t N = 4400, H = 8, V = 2000 * GetParam();
  const auto inputs = [&](uint64_t seed) {
    torch::manual_seed(seed);
    return std::vector<torch::Tensor>{torch::randn({N, H}), torch::randn({V, H}) * 0.3, torch::randn({V}),
                                      torch::randint(V, {N}, torch::kLong)};
  };
  const auto gradients = [](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                            const torch::Tensor& losses) {
    losses.sum().backward();
    return std::vector<torch::Tensor>{losses.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto leaves = [](const std::vector<torch::Tensor>& in) {
    return std::vector<torch::Tensor>{in[0].clone().requires_grad_(), in[1].clone().requires_grad_(),
                                      in[2].clone().requires_grad_()};
  };
  const auto library = [&](const std::vector<torch::Tensor>& in) {
    const std::vector<torch::Tensor> p = leaves(in);
    const torch::Tensor losses = torch::nn::functional::cross_entropy(
        torch::nn::functional::linear(p[0], p[1], p[2]), in[3],
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    return gradients(p[0], p[1], p[2], losses);
  };
  const std::vector<torch::Tensor> a = inputs(21), b = inputs(22);
  std::vector<torch::Tensor> fused_a, fused_b;
  {  // Two graphs alive at once: the second call may not take the first one's blocks.
    const std::vector<torch::Tensor> pa = leaves(a), pb = leaves(b);
    const torch::Tensor losses_a = linear_cross_entropy(pa[0], pa[1], pa[2], a[3]);
    const torch::Tensor losses_b = linear_cross_entropy(pb[0], pb[1], pb[2], b[3]);
    fused_a = gradients(pa[0], pa[1], pa[2], losses_a);
    fused_b = gradients(pb[0], pb[1], pb[2], losses_b);
  }  // (a graph holds its logits until it goes)
  const std::vector<torch::Tensor> expected_a = library(a), expected_b = library(b);
  for (std::size_t i = 0; i < fused_a.size(); ++i) {
    EXPECT_LE(largest_difference(fused_a[i], expected_a[i]), 1e-5 * tolerance_scale(expected_a[i])) << i;
    EXPECT_LE(largest_difference(fused_b[i], expected_b[i]), 1e-5 * tolerance_scale(expected_b[i])) << i;
  }
  // Both graphs are gone: the same call again reuses a kept block for every slice.
  const LargeBlockCacheStats before = cache.stats();
  const std::vector<torch::Tensor> pc = leaves(a);
  const std::vector<torch::Tensor> again =
      gradients(pc[0], pc[1], pc[2], linear_cross_entropy(pc[0], pc[1], pc[2], a[3]));
  const LargeBlockCacheStats after = cache.stats();
  EXPECT_EQ(after.reused - before.reused, GetParam());
  EXPECT_EQ(after.allocated - before.allocated, 0);
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_TRUE(torch::equal(again[i], fused_a[i])) << i;
}

// The backward forms the gradient in the forward's buffers: a retained graph's second backward finds
// it formed and gives the same gradients; a forward without grad gives the same losses.
TEST_P(LinearCrossEntropyTest, SecondBackwardAndNoGradForwardAgree) {
  torch::manual_seed(11);
  const int64_t N = 19, H = 6, V = 97;
  const torch::Tensor x = torch::randn({N, H}, torch::kDouble).requires_grad_();
  const torch::Tensor w = torch::randn({V, H}, torch::kDouble).requires_grad_();
  const torch::Tensor b = torch::randn({V}, torch::kDouble).requires_grad_();
  const torch::Tensor targets = torch::randint(V, {N}, torch::kLong);
  const torch::Tensor weights = torch::rand({N}, torch::kDouble) + 0.5;
  const torch::Tensor losses = linear_cross_entropy(x, w, b, targets, 0.1);
  (losses * weights).sum().backward({}, /*retain_graph=*/true);
  const std::vector<torch::Tensor> first = {x.grad().clone(), w.grad().clone(), b.grad().clone()};
  for (const torch::Tensor& p : {x, w, b}) p.mutable_grad().zero_();
  (losses * weights).sum().backward();
  const std::vector<torch::Tensor> second = {x.grad(), w.grad(), b.grad()};
  const char* names[] = {"d x", "d weight", "d bias"};
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_LE(largest_difference(first[i], second[i]), 1e-14 * tolerance_scale(first[i])) << names[i];
    EXPECT_GT(first[i].abs().max().item<double>(), 0.0) << names[i];
  }
  torch::Tensor without_grad;
  {
    torch::NoGradGuard no_grad;
    without_grad = linear_cross_entropy(x, w, b, targets, 0.1);
  }
  EXPECT_FALSE(without_grad.requires_grad());
  EXPECT_TRUE(torch::equal(without_grad, losses.detach()));
}

INSTANTIATE_TEST_SUITE_P(Threads, LinearCrossEntropyTest, ::testing::Values(1, 2, 3));

TEST(LinearCrossEntropyErrorsTest, RejectsTargetsOutsideTheVocabulary) {
  const torch::Tensor x = torch::randn({2, 3}), w = torch::randn({4, 3}), b = torch::zeros({4});
  EXPECT_THROW(linear_cross_entropy(x, w, b, torch::tensor({1, 4}, torch::kLong)), c10::Error);
  EXPECT_THROW(linear_cross_entropy(x, w, b, torch::tensor({-1, 0}, torch::kLong)), c10::Error);
  EXPECT_EQ(linear_cross_entropy(x.narrow(0, 0, 0), w, b, torch::zeros({0}, torch::kLong)).numel(), 0);
}

}  // namespace
}  // namespace luong::models
