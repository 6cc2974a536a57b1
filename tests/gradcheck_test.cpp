// Finite-difference gradient checks (double precision, relative tolerance 1e-6) of every attention
// variant, both decoders, the encoder and the full model loss.
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "luong/models/global_attention.h"
#include "luong/models/local_monotonic_attention.h"
#include "luong/models/predictive_alignment_attention.h"
#include "luong/models/seq2seq.h"

namespace luong::models {
namespace {

constexpr double kTolerance = 1e-6;

std::vector<std::pair<std::string, torch::Tensor>> named(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : module.named_parameters(true)) out.emplace_back(item.key(), item.value());
  return out;
}

void expect_close(const std::vector<test::GradientReport>& reports, const std::string& what) {
  ASSERT_FALSE(reports.empty());
  for (const auto& r : reports) {
    std::printf("  %-28s %-40s max|diff| %.3e  rel %.3e\n", what.c_str(), r.name.c_str(), r.max_abs_diff,
                r.max_rel_diff);
    EXPECT_LE(r.max_rel_diff, kTolerance) << what << " " << r.name;
  }
}

struct AttentionCase {
  std::string name;
  AttentionConfig config;
};

// Test names and failure messages show the case's name rather than its bytes.
void PrintTo(const AttentionCase& c, std::ostream* out) { *out << c.name; }

class AttentionGradientTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionGradientTest, MatchesFiniteDifferences) {
  torch::manual_seed(1);
  const int64_t batch = 3, length = 6, hidden = 4;
  auto attention = make_attention(GetParam().config, hidden);
  attention->to(torch::kDouble);
  torch::Tensor encoder_outputs = torch::randn({batch, length, hidden}, torch::kDouble).requires_grad_();
  torch::Tensor query = torch::randn({batch, hidden}, torch::kDouble).requires_grad_();
  const torch::Tensor lengths = torch::tensor({6, 4, 2}, torch::kLong);
  const torch::Tensor probe_w = torch::randn({batch, length}, torch::kDouble);
  const torch::Tensor probe_c = torch::randn({batch, hidden}, torch::kDouble);
  auto inputs = named(*attention);
  inputs.emplace_back("encoder_outputs", encoder_outputs);
  inputs.emplace_back("query", query);
  const auto loss = [&] {
    const AttentionOutput out = attention->forward(encoder_outputs, query, lengths, /*step=*/3);
    return (out.weights * probe_w).sum() + (out.context * probe_c).sum();
  };
  expect_close(test::check_gradients(inputs, loss), GetParam().name);
}

AttentionConfig config(AttentionKind kind, ScoreKind score, bool renormalize = false) {
  AttentionConfig c;
  c.kind = kind;
  c.score = score;
  c.window = 2;
  c.renormalize = renormalize;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, AttentionGradientTest,
    ::testing::Values(AttentionCase{"global-dot", config(AttentionKind::kGlobal, ScoreKind::kDot)},
                      AttentionCase{"global-general", config(AttentionKind::kGlobal, ScoreKind::kGeneral)},
                      AttentionCase{"global-concat", config(AttentionKind::kGlobal, ScoreKind::kConcat)},
                      AttentionCase{"global-location", config(AttentionKind::kGlobal, ScoreKind::kLocation)},
                      AttentionCase{"local-m-location", config(AttentionKind::kLocalMonotonic, ScoreKind::kLocation)},
                      AttentionCase{"local-p-location", config(AttentionKind::kLocalPredictive, ScoreKind::kLocation)},
                      AttentionCase{"local-m-dot", config(AttentionKind::kLocalMonotonic, ScoreKind::kDot)},
                      AttentionCase{"local-m-general", config(AttentionKind::kLocalMonotonic, ScoreKind::kGeneral)},
                      AttentionCase{"local-m-concat", config(AttentionKind::kLocalMonotonic, ScoreKind::kConcat)},
                      AttentionCase{"local-p-dot", config(AttentionKind::kLocalPredictive, ScoreKind::kDot)},
                      AttentionCase{"local-p-general", config(AttentionKind::kLocalPredictive, ScoreKind::kGeneral)},
                      AttentionCase{"local-p-concat", config(AttentionKind::kLocalPredictive, ScoreKind::kConcat)},
                      AttentionCase{"local-p-renormalized",
                                    config(AttentionKind::kLocalPredictive, ScoreKind::kDot, true)}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) {
      std::string name = info.param.name;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(GradientCheckTest, PositionPredictorReceivesGradient) {
  torch::manual_seed(2);
  auto attention = std::make_shared<PredictiveAlignmentAttentionImpl>(PredictiveAlignmentAttentionOptions(4).window(2));
  attention->to(torch::kDouble);
  const torch::Tensor enc = torch::randn({2, 7, 4}, torch::kDouble);
  const torch::Tensor query = torch::randn({2, 4}, torch::kDouble);
  const AttentionOutput out = attention->forward(enc, query, torch::tensor({7, 5}, torch::kLong), 0);
  out.context.sum().backward();
  EXPECT_GT(attention->position_predictor->weight.grad().abs().sum().item<double>(), 1e-8);
  EXPECT_GT(attention->position_weights->weight.grad().abs().sum().item<double>(), 1e-8);
}

}  // namespace
void PrintTo(DecoderKind kind, std::ostream* out) { *out << options::enum_name(kind); }
namespace {

class ModelGradientTest : public ::testing::TestWithParam<DecoderKind> {};

TEST_P(ModelGradientTest, DecoderEncoderAndLossMatchFiniteDifferences) {
  torch::manual_seed(3);
  AttentionConfig attention;
  attention.kind = AttentionKind::kLocalPredictive;
  attention.score = ScoreKind::kGeneral;
  Seq2Seq model(Seq2SeqOptions(9, 8).embed_size(3).hidden_size(4).decoder(GetParam()).attention(attention));
  model->to(torch::kDouble);
  const torch::Tensor src = torch::tensor({{4, 5, 6, 2}, {7, 2, 0, 0}}, torch::kLong);
  const torch::Tensor lengths = torch::tensor({4, 2}, torch::kLong);
  const torch::Tensor dec_in = torch::tensor({{1, 4, 5}, {1, 6, 0}}, torch::kLong);
  const torch::Tensor dec_tgt = torch::tensor({{4, 5, 2}, {6, 2, 0}}, torch::kLong);
  const auto loss = [&] { return model->loss(src, lengths, dec_in, dec_tgt).loss; };
  expect_close(test::check_gradients(named(*model), loss), options::enum_name(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(BothDecoders, ModelGradientTest,
                         ::testing::Values(DecoderKind::kBahdanau, DecoderKind::kLuong),
                         [](const ::testing::TestParamInfo<DecoderKind>& info) { return std::string(options::enum_name(info.param)); });

// The paper's configuration: LSTM cells, two layers each side, with a bidirectional encoder.
TEST(GradientCheckTest, TwoLayerLstmModelWithBothDecoders) {
  for (const DecoderKind decoder : {DecoderKind::kLuong, DecoderKind::kBahdanau}) {
    torch::manual_seed(6);
    Seq2Seq model(Seq2SeqOptions(9, 8).embed_size(3).hidden_size(3).cell(CellKind::kLstm).layers(2).bidirectional(true).decoder(decoder));
    model->to(torch::kDouble);
    const torch::Tensor src = torch::tensor({{4, 5, 6, 2}, {7, 2, 0, 0}}, torch::kLong);
    const torch::Tensor lengths = torch::tensor({4, 2}, torch::kLong);
    const torch::Tensor dec_in = torch::tensor({{1, 4, 5}, {1, 6, 0}}, torch::kLong);
    const torch::Tensor dec_tgt = torch::tensor({{4, 5, 2}, {6, 2, 0}}, torch::kLong);
    const auto loss = [&] { return model->loss(src, lengths, dec_in, dec_tgt, {LossAverage::kToken, 0.1}).loss; };
    expect_close(test::check_gradients(named(*model), loss), std::string("lstm-2layer-") + options::enum_name(decoder));
  }
}

TEST(GradientCheckTest, BidirectionalTwoLayerEncoder) {
  torch::manual_seed(4);
  Encoder encoder(EncoderOptions(7, 3).layers(2).bidirectional(true));
  encoder->to(torch::kDouble);
  const torch::Tensor src = torch::tensor({{4, 5, 2}, {6, 2, 0}}, torch::kLong);
  const torch::Tensor lengths = torch::tensor({3, 2}, torch::kLong);
  const torch::Tensor probe_o = torch::randn({2, 3, 3}, torch::kDouble);
  const torch::Tensor probe_h = torch::randn({2, 2, 3}, torch::kDouble);
  const auto loss = [&] {
    const EncoderOutput out = encoder(src, lengths);
    return (out.outputs * probe_o).sum() + (out.state.hidden * probe_h).sum();
  };
  expect_close(test::check_gradients(named(*encoder), loss), "encoder-bi-2layer");
}

}  // namespace
}  // namespace luong::models
