// The cloze head: the seed's corpus and initialisation, manual gradients against autograd, and the
// seed's training curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "luong/cloze/cloze_autograd.h"
#include "luong/cloze/cloze_head.h"
#include "luong/cloze/numpy_random.h"
#include "luong/cloze/udhr_corpus.h"

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
    for (const auto& diff : compare_gradients(params, sentence)) {
      EXPECT_LE(diff.max_rel, 1e-10) << diff.name << " on a sentence of " << sentence.size() << " tokens";
      std::printf("  %-4s max|diff| %.2e rel %.2e\n", diff.name, diff.max_abs, diff.max_rel);
    }
  }
}

TEST(ClozeTest, BatchedGradientEqualsTheSumOfSentenceGradients) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 3);
  ClozeParameters summed(params.dims);
  ClozeTransposes transposes;
  transposes.update(params);
  ClozeWorkspace ws(params.dims, 30);
  double loss = 0;
  for (const auto& ids : corpus.ids) {
    loss += cloze_forward_backward(params, transposes, ids.data(), static_cast<int>(ids.size()), summed, ws);
  }
  for (int threads : {1, 2, 3}) {
    ClozeBatch batch(params.dims, corpus.ids);
    ClozeParameters grads(params.dims);
    const double batch_loss = batch.forward_backward(params, grads, threads);
    EXPECT_NEAR(batch_loss, loss, 1e-12 * loss);
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < grads.data.size(); ++i) {
      worst = std::max(worst, std::abs(grads.data[i] - summed.data[i]));
      scale = std::max(scale, std::abs(summed.data[i]));
    }
    EXPECT_LE(worst / scale, 1e-12) << threads << " threads";
  }
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

TEST(ClozeTest, FullRunLearnsAndTheDisplayAttentionIsValid) {
  const ClozeCorpus corpus = make_cloze_corpus();
  ClozeParameters params(ClozeDims{});
  init_numpy(params, 0);
  const ClozeTrainResult result = train_cloze(params, corpus.ids, 4000, 2);
  EXPECT_EQ(result.loss_curve.size(), 201u);
  // The seed asserts a drop of 0.3. Past update ~140 the curve is chaotic: Adam at lr 0.02 has loss
  // spikes that amplify last-bit rounding differences, so the seed itself ends anywhere between
  // 1e-5 and 0.05 depending on the BLAS. What must hold: the drop, and a low loss late in training.
  EXPECT_LT(result.loss_curve.back().second, result.loss_curve.front().second - 0.3);
  double late_best = 1e9;
  for (const auto& [update, loss] : result.loss_curve) {
    if (update > 3000) late_best = std::min(late_best, loss);
  }
  EXPECT_LT(late_best, 0.05);
  const auto& display = corpus.ids[0];
  const int n = static_cast<int>(display.size());
  const std::vector<double> A = cloze_attention(params, display.data(), n);
  for (int q = 0; q < n; ++q) {
    double sum = 0;
    for (int k = 0; k < n; ++k) sum += A[static_cast<std::size_t>(q * n + k)];
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_EQ(A[static_cast<std::size_t>(q * n + q)], 0.0);
  }
}

}  // namespace
}  // namespace luong::cloze
