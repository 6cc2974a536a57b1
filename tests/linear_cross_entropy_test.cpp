// linear_cross_entropy against linear + cross_entropy through autograd, in double precision, with
// the vocabulary cut into 1, 2 and 3 slices (one per intra-op thread) and targets on slice edges.
#include <gtest/gtest.h>

#include "luong/models/linear_cross_entropy.h"
#include "luong/models/matrix_products.h"

namespace luong::models {
namespace {

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
      const double diff = (fused[i] - reference[i]).abs().max().item<double>();
      const double scale = reference[i].abs().max().item<double>();
      std::printf("  V %5ld, %d thread(s) %-9s max|diff| %.3e (max %.3e)\n", static_cast<long>(V), GetParam(), names[i],
                  diff, scale);
      EXPECT_LE(diff, tolerance * std::max(scale, 1.0)) << names[i] << ", V " << V;
    }
  }
}

// In float32 the logits' product runs in panels (the bias starting its sums; one panel product per
// vocabulary slice): against the double reference and against the library's product.
TEST_P(LinearCrossEntropyTest, Float32PanelsMatchTheLibraryAndDouble) {
  if (panel_isa_here() == PanelIsa::kNone) GTEST_SKIP() << "this processor has no panel kernel";
  torch::manual_seed(10);
  const int64_t N = 37, H = 64, V = 101;
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
  const int64_t panels_before = panel_products_run();
  const std::vector<torch::Tensor> panels = run(torch::kFloat);
  const int64_t ran = panel_products_run() - panels_before;
  set_panel_products_enabled(before);
  const std::vector<torch::Tensor> reference = run(torch::kDouble);
  EXPECT_EQ(ran, std::min<int64_t>(GetParam(), V)) << "one panel product per vocabulary slice";
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const double scale = std::max(reference[i].abs().max().item<double>(), 1.0);
    EXPECT_LE((panels[i] - reference[i]).abs().max().item<double>(), 1e-5 * scale) << i;
    EXPECT_LE((panels[i] - library[i]).abs().max().item<double>(), 1e-5 * scale) << i;
  }
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
    const double diff = (first[i] - second[i]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-14 * std::max(first[i].abs().max().item<double>(), 1.0)) << names[i];
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
