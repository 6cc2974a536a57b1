// linear_cross_entropy against linear + cross_entropy through autograd, in double precision, with
// the vocabulary cut into 1, 2 and 3 slices (one per intra-op thread) and targets on slice edges.
#include <gtest/gtest.h>

#include "luong/models/linear_cross_entropy.h"

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

TEST_P(LinearCrossEntropyTest, MatchesAutogradInDouble) {
  torch::manual_seed(9);
  const int64_t N = 7, H = 5, V = 13;
  const torch::Tensor x0 = torch::randn({N, H}, torch::kDouble), w0 = torch::randn({V, H}, torch::kDouble) * 3;
  const torch::Tensor b0 = torch::randn({V}, torch::kDouble);
  const torch::Tensor targets = torch::tensor({0, 12, 6, 4, 9, 8, 0}, torch::kLong);  // edges of 2 and 3 slices
  const torch::Tensor weights = torch::rand({N}, torch::kDouble) + 0.5;                // per-row loss weights

  const auto run = [&](bool fused) {
    torch::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    const torch::Tensor losses =
        fused ? linear_cross_entropy(x, w, b, targets)
              : torch::nn::functional::cross_entropy(torch::nn::functional::linear(x, w, b), targets,
                                                     torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    (losses * weights).sum().backward();
    return std::vector<torch::Tensor>{losses.detach(), x.grad(), w.grad(), b.grad()};
  };
  const std::vector<torch::Tensor> fused = run(true), reference = run(false);
  const char* names[] = {"losses", "d x", "d weight", "d bias"};
  for (std::size_t i = 0; i < fused.size(); ++i) {
    const double diff = (fused[i] - reference[i]).abs().max().item<double>();
    const double scale = reference[i].abs().max().item<double>();
    std::printf("  %d thread(s) %-9s max|diff| %.3e (max %.3e)\n", GetParam(), names[i], diff, scale);
    EXPECT_LE(diff, 1e-14 * std::max(scale, 1.0)) << names[i];
  }
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
