// The seed notebook's modules, run by Python (tests/fixtures/notebook_parity.py), against ours with
// the same weights and inputs.
#include <gtest/gtest.h>

#include <map>

#include "luong/models/global_attention.h"
#include "luong/models/predictive_alignment_attention.h"
#include "luong/models/seq2seq.h"
#include "luong/models/state_dict.h"
#include "test_paths.h"

namespace luong::models {
namespace {

class NotebookParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& [name, tensor] : read_state_dict(test::fixture("notebook_parity.pt"), test::kStateDictBytes)) expected_[name] = tensor;
  }
  StateDict with_prefix(const std::string& prefix) {
    StateDict out;
    for (const auto& [name, tensor] : expected_) {
      if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), tensor);
    }
    return out;
  }
  std::map<std::string, torch::Tensor> expected_;
};

TEST_F(NotebookParityTest, DotAttentionMatchesTheNotebook) {
  GlobalAttention attention(GlobalAttentionOptions(8).score(ScoreKind::kDot).scale(true));
  const torch::Tensor enc = expected_["dot.encoder_outputs"];
  const AttentionOutput out = attention->forward(enc, expected_["dot.query"], torch::full({3}, 5, torch::kLong), 0);
  EXPECT_TRUE(torch::allclose(out.weights, expected_["dot.weights"], 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(out.context, expected_["dot.context"], 1e-5, 1e-6));
}

TEST_F(NotebookParityTest, UnscaledDotReproducesTheNumbersTheNotebookPrinted) {
  // The notebook's printed output of its DotAttention cell predates the 1/sqrt(H) line it later
  // added: the numbers are those of the unscaled dot score.
  GlobalAttention attention(GlobalAttentionOptions(8).score(ScoreKind::kDot).scale(false));
  const AttentionOutput out = attention->forward(expected_["dot.encoder_outputs"], expected_["dot.query"],
                                                 torch::full({3}, 5, torch::kLong), 0);
  EXPECT_NEAR(out.weights[0][0].item<float>(), 1.1674e-02, 5e-6);
  EXPECT_NEAR(out.weights[0][2].item<float>(), 9.8594e-01, 5e-5);
  EXPECT_NEAR(out.weights[1][1].item<float>(), 8.8998e-01, 5e-5);
  EXPECT_NEAR(out.weights[2][4].item<float>(), 5.8865e-01, 5e-5);
  EXPECT_NEAR(out.context[1][4].item<float>(), 1.7172, 5e-4);
  EXPECT_NEAR(out.context[2][7].item<float>(), -0.7556, 5e-4);
}

TEST_F(NotebookParityTest, RenormalizingLocalPMatchesTheNotebook) {
  PredictiveAlignmentAttention attention(
      PredictiveAlignmentAttentionOptions(8).window(2).score(ScoreKind::kDot).scale(false).renormalize(true));
  StateDict weights;
  for (const auto& [name, tensor] : with_prefix("local_p.")) {
    if (name.rfind("position_", 0) == 0) weights.emplace_back(name, tensor);
  }
  load_state_dict(*attention, weights, "notebook_parity.pt");
  const AttentionOutput out =
      attention->forward(expected_["dot.encoder_outputs"], expected_["dot.query"], torch::full({3}, 5, torch::kLong), 0);
  EXPECT_TRUE(torch::allclose(out.weights, expected_["local_p.weights"], 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(out.context, expected_["local_p.context"], 1e-5, 1e-6));
}

TEST_F(NotebookParityTest, WholeModelWithPythonWeightsGivesTheNotebooksLogits) {
  Seq2Seq model(Seq2SeqOptions(11, 13).embed_size(5).hidden_size(6).decoder(DecoderKind::kLuong));
  StateDict weights = with_prefix("model.encoder.");
  for (auto& [name, tensor] : weights) name = "encoder." + name;
  for (auto& [name, tensor] : with_prefix("model.decoder.")) weights.emplace_back("decoder." + name, tensor);
  load_state_dict(*model, weights, "notebook_parity.pt");
  torch::NoGradGuard no_grad;
  const Seq2SeqOutput out = model->forward(expected_["model.src"], expected_["model.lengths"], expected_["model.dec_in"]);
  EXPECT_TRUE(torch::allclose(out.logits, expected_["model.logits"], 1e-5, 1e-6))
      << (out.logits - expected_["model.logits"]).abs().max();
}

}  // namespace
}  // namespace luong::models
