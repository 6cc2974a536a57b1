// The cloze head: the seed's corpus and initialisation, manual gradients against autograd, and the
// seed's training curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <random>
#include <string>

#include "luong/cloze/cloze_autograd.h"
#include "luong/cloze/cloze_head.h"
#include "luong/cloze/cloze_kernels.h"
#include "luong/cloze/glibc_exp.h"
#include "luong/cloze/numpy_random.h"
#include "luong/cloze/udhr_corpus.h"
#include "test_paths.h"

namespace luong::cloze {
namespace {

TEST(ClozeTest, CorpusMatchesTheSeed) {
  const ClozeCorpus corpus = make_cloze_corpus();
  EXPECT_EQ(corpus.sentences.size(), 16u);
  EXPECT_EQ(corpus.vocabulary.size(), 98u);
  EXPECT_EQ(corpus.vocabulary.front(), "a");
  EXPECT_EQ(corpus.sentences[0], display_sentence());
  EXPECT_EQ(cloze_tokenize("Everyone has the right to life, liberty."),
            (std::vector<std::string>{"everyone", "has", "the", "right", "to", "life", "liberty"}));
}

// np.random.seed(0); np.random.randn(5) and 0.1 * np.random.randn(98, 24)[97, 23].
TEST(ClozeTest, NumpyRandnIsReproducedBitForBit) {
  NumpyRandom rng(0);
  const std::vector<double> expected = {1.764052345967664, 0.4001572083672233, 0.9787379841057392, 2.240893199201458,
                                        1.8675579901499675};
  for (double value : expected) EXPECT_EQ(rng.gauss(), value);
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 0);
  EXPECT_EQ(params.E()[97 * 24 + 23], -0.10783610908167798);
}

TEST(ClozeTest, ManualGradientsEqualAutogradToOneEMinus10) {
  ClozeParameters params(ClozeDims{});
  NumpyRandom rng(7);
  for (double& v : params.data) v = 0.5 * rng.gauss();
  const ClozeCorpus corpus = make_cloze_corpus();
  std::vector<std::vector<int>> sentences = corpus.ids;
  sentences.push_back({4, 4, 4, 9, 4});  // one token four times: the embedding scatter-add
  sentences.push_back({0, 97});         // shortest sentence
  for (const auto& sentence : sentences) {
    for (const auto kernels : {ClozeKernels::kReference, ClozeKernels::kNumpyExact}) {
      for (const auto& diff : compare_gradients(kernels, params, sentence)) {
        EXPECT_LE(diff.max_rel, 1e-10) << diff.name << " on a sentence of " << sentence.size() << " tokens";
        std::printf("  %-4s max|diff| %.2e rel %.2e\n", diff.name, diff.max_abs, diff.max_rel);
      }
    }
  }
}

// The readable reference layers and the numpy-exact kernels are the same function: their gradients
// agree to rounding on every corpus sentence.
TEST(ClozeTest, ReferenceLayersEqualTheNumpyExactKernels) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 11);
  int rounded_differently = 0;
  for (const auto& ids : corpus.ids) {
    ClozeParameters reference(params.dims), exact(params.dims);
    const int n = static_cast<int>(ids.size());
    const double a = cloze_forward_backward(ClozeKernels::kReference, params, ids.data(), n, reference);
    const double b = cloze_forward_backward(ClozeKernels::kNumpyExact, params, ids.data(), n, exact);
    EXPECT_NEAR(a, b, 1e-12 * std::abs(b));
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < exact.data.size(); ++i) {
      scale = std::max(scale, std::abs(exact.data[i]));
      worst = std::max(worst, std::abs(exact.data[i] - reference.data[i]));
    }
    EXPECT_LE(worst, 1e-12 * scale) << "sentence of " << n << " tokens";
    rounded_differently += reference.data != exact.data;
  }
  EXPECT_GT(rounded_differently, 0) << "the two paths round identically everywhere: is the reference really separate?";
}

// The batch runs sentences on threads into buffers of their own and sums them in sentence order,
// so it equals the seed's serial loop exactly, for any thread count.
TEST(ClozeTest, BatchedGradientEqualsTheSerialSumExactly) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 3);
  ClozeParameters summed(params.dims);
  ClozeTransposes transposes;
  transposes.update(params);
  ClozeWorkspace ws(params.dims, 30);
  double loss = 0;
  for (const auto& ids : corpus.ids) {
    loss += numpy_exact_forward_backward(params, transposes, ids.data(), static_cast<int>(ids.size()), summed, ws);
  }
  for (int threads : {1, 2, 3}) {
    ClozeBatch batch(params.dims, corpus.ids);
    ClozeParameters grads(params.dims);
    const double batch_loss = batch.forward_backward(params, grads, threads);
    EXPECT_EQ(batch_loss, loss) << threads << " threads";
    std::size_t differing = 0;
    for (std::size_t i = 0; i < grads.data.size(); ++i) differing += grads.data[i] != summed.data[i];
    EXPECT_EQ(differing, 0u) << threads << " threads, of " << grads.data.size();
  }
}

// numpy_matmul's documented order (OpenBLAS's dgemm as numpy calls it), written out one output at
// a time, against the vectorised kernel, over shapes with every kind of remainder.
TEST(ClozeTest, MatmulRoundsInOpenBlasOrder) {
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0, 1);
  int shapes = 0;
  for (int n : {1, 2, 3, 7, 12, 13, 20}) {
    for (int k : {1, 3, 8, 13, 24, 98}) {
      for (int m : {1, 4, 6, 11, 24, 37, 98}) {
        std::vector<double> a(static_cast<std::size_t>(n * k)), b(static_cast<std::size_t>(k * m));
        for (auto* v : {&a, &b}) {
          for (double& x : *v) x = normal(rng);
        }
        std::vector<double> out(static_cast<std::size_t>(n * m));
        numpy_matmul(out.data(), a.data(), b.data(), n, k, m);
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < m; ++j) {
            double expected;
            if (n % 2 == 1 && i == n - 1 && j < m - m % 4) {  // OpenBLAS's 1-wide tail
              double s[4] = {0, 0, 0, 0};
              for (int kk = 0; kk < k; ++kk) {
                double& chain = kk < k - k % 8 ? s[kk % 4] : s[0];
                chain = std::fma(a[static_cast<std::size_t>(i * k + kk)], b[static_cast<std::size_t>(kk * m + j)], chain);
              }
              expected = (s[0] + s[1]) + (s[2] + s[3]);
            } else {
              expected = 0.0;
              for (int kk = 0; kk < k; ++kk) {
                expected = std::fma(a[static_cast<std::size_t>(i * k + kk)], b[static_cast<std::size_t>(kk * m + j)], expected);
              }
            }
            ASSERT_EQ(out[static_cast<std::size_t>(i * m + j)], expected) << n << "x" << k << "x" << m << " at " << i << "," << j;
          }
        }
        ++shapes;
      }
    }
  }
  EXPECT_EQ(shapes, 7 * 6 * 7);
}

TEST(ClozeTest, LossFormulaIsTheSeeds) {
  const double P[4] = {0.25, 0.75, 0.5, 0.5};
  const int targets[2] = {1, 0};
  EXPECT_DOUBLE_EQ(cross_entropy_forward(P, targets, 2, 2), -std::log(0.75 + 1e-12) - std::log(0.5 + 1e-12));
}

// attention_loss.csv of ../shared/reference/cloze_seed.py: updates 1, 20, 40, 60.
TEST(ClozeTest, FirstUpdatesReproduceTheSeedsCurve) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 0);
  const ClozeTrainResult result = train_cloze(params, corpus.ids, 60, 2);
  ASSERT_EQ(result.loss_curve.size(), 4u);
  const double expected[4] = {4.584554, 3.145811, 1.583525, 0.658661};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(result.loss_curve[static_cast<std::size_t>(i)].second, expected[i], 1e-5);
}

TEST(ClozeTest, ThreadCountDoesNotChangeTheResult) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters one(ClozeDims{}), two(ClozeDims{});
  init_numpy(one, 0);
  init_numpy(two, 0);
  train_cloze(one, corpus.ids, 50, 1);
  train_cloze(two, corpus.ids, 50, 2);
  EXPECT_EQ(one.data, two.data);
}

// The seed's whole curve to 17 digits (tests/fixtures/cloze_seed_curve.py). The training is chaotic:
// a last-bit difference anywhere grows until the run ends in another minimum (0.013 or 0.033
// instead of 3.4e-5), so only arithmetic identical to numpy's reproduces the seed's final loss.
TEST(ClozeTest, FullRunFollowsTheSeedBitForBit) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 0);
  const ClozeTrainResult result = train_cloze(params, corpus.ids, 4000, 2);
  ASSERT_EQ(result.loss_curve.size(), 201u);
  EXPECT_LT(result.loss_curve.back().second, result.loss_curve.front().second - 0.3);  // the seed's own assert

  const auto& display = corpus.ids[0];
  const int n = static_cast<int>(display.size());
  const std::vector<double> A = cloze_attention(params, display.data(), n);
  for (int q = 0; q < n; ++q) {
    double sum = 0;
    for (int k = 0; k < n; ++k) sum += A[static_cast<std::size_t>(q * n + k)];
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_EQ(A[static_cast<std::size_t>(q * n + q)], 0.0);
  }

  if (!glibc_exp_uses_fma()) GTEST_SKIP() << "the seed's numbers were made where glibc's exp is its FMA variant";
  std::ifstream file(luong::test::fixture("cloze_seed_curve.csv"));
  ASSERT_TRUE(file) << "missing fixture";
  std::vector<std::pair<int, double>> seed;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#' || line[0] == 'i') continue;  // the provenance comment, the header
    const auto comma = line.find(',');
    seed.emplace_back(std::stoi(line.substr(0, comma)), std::strtod(line.c_str() + comma + 1, nullptr));
  }
  ASSERT_EQ(seed.size(), result.loss_curve.size());
  int differing = 0;
  for (std::size_t i = 0; i < seed.size(); ++i) {
    EXPECT_EQ(result.loss_curve[i].first, seed[i].first);
    if (result.loss_curve[i].second != seed[i].second && differing++ == 0) {
      ADD_FAILURE() << "first difference at update " << seed[i].first << ": luong " << std::setprecision(17)
                    << result.loss_curve[i].second << ", seed " << seed[i].second;
    }
  }
  EXPECT_EQ(differing, 0) << "of " << seed.size() << " points";
  EXPECT_LT(result.loss_curve.back().second, 1e-3);
  std::printf("final loss %.6g (seed %.6g), %d of %zu points differ\n", result.loss_curve.back().second,
              seed.back().second, differing, seed.size());
}

}  // namespace
}  // namespace luong::cloze
