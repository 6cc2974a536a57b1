// Training features: the learning-rate schedules, gradient accumulation, --max-time, and the
// averaged weights a run writes and translate reads back.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "luong/models/seq2seq.h"
#include "luong/run/run_directory.h"
#include "luong/training/schedule.h"
#include "luong/training/step_profile.h"
#include "luong/training/train_step.h"
#include "luong/util/atomic_file.h"
#include "luong/util/json.h"
#include "run_files.h"
#include "subprocess.h"

namespace luong {
namespace {

namespace fs = std::filesystem;

TEST(ScheduleTest, ThePapersSgdScheduleHalvesEveryEpochAfterTheFifth) {
  run::TrainConfig config;
  config.optimizer = run::OptimizerKind::kSgd;
  config.lr = 1.0;
  config.schedule = run::Schedule::kHalveAfter;
  config.decay_after = 5;
  training::TrainerState state;
  const double expected[] = {1, 1, 1, 1, 1, 0.5, 0.25, 0.125, 0.0625};
  for (int epoch = 1; epoch <= 9; ++epoch) EXPECT_EQ(training::learning_rate(config, epoch, state), expected[epoch - 1]);
  torch::nn::Linear layer(2, 2);
  const auto optimizer = training::make_optimizer(config, layer->parameters());
  ASSERT_NE(dynamic_cast<torch::optim::SGD*>(optimizer.get()), nullptr);
  training::set_learning_rate(*optimizer, 0.25);
  EXPECT_EQ(static_cast<torch::optim::SGDOptions&>(optimizer->param_groups()[0].options()).lr(), 0.25);
}

TEST(ScheduleTest, InverseSquareRootAndPlateau) {
  run::TrainConfig config;
  config.lr = 1e-3;
  config.schedule = run::Schedule::kInverseSqrt;
  config.warmup = 100;
  training::TrainerState state;
  state.optimizer_steps = 49;  // the 50th update: halfway through the warmup
  EXPECT_DOUBLE_EQ(training::learning_rate(config, 1, state), 0.5e-3);
  state.optimizer_steps = 399;  // the 400th: sqrt(100 / 400) = 1/2
  EXPECT_DOUBLE_EQ(training::learning_rate(config, 1, state), 0.5e-3);
  config.schedule = run::Schedule::kPlateau;
  training::TrainerState plateau;
  EXPECT_FALSE(training::update_plateau(plateau, 3.0, 2));
  EXPECT_FALSE(training::update_plateau(plateau, 2.5, 2));
  EXPECT_FALSE(training::update_plateau(plateau, 2.6, 2));
  EXPECT_TRUE(training::update_plateau(plateau, 2.7, 2));  // two epochs without a better loss
  EXPECT_DOUBLE_EQ(training::learning_rate(config, 4, plateau), 0.5e-3);
  EXPECT_FALSE(training::update_plateau(plateau, 2.4, 2));
}

TEST(LossAverageTest, StepWeightsGiveTheTokenAndTheNotebooksAverages) {
  // 3, 3, 2 and 1 tokens at the four steps
  EXPECT_EQ(models::step_weights({3, 3, 2, 1}, models::LossAverage::kToken), std::vector<double>(4, 1.0 / 9));
  EXPECT_EQ(models::step_weights({3, 3, 2, 1}, models::LossAverage::kStep),
            (std::vector<double>{1.0 / 12, 1.0 / 12, 1.0 / 8, 1.0 / 4}));
}

// The notebook's average, written out: each step's mean over its tokens, then the mean over the
// steps, from the per-token cross-entropy of the logits. loss() of a batch (the CPU's one pass over
// the rows), loss() of its tensors (counts read back from dec_tgt) and weighted_loss() with the
// batch's own step weights all give it, in double, to 1e-12.
TEST(LossAverageTest, TheNotebooksAverageOfEachStepThenTheSteps) {
  torch::manual_seed(4);
  models::Seq2Seq model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4));
  model->to(torch::kDouble);
  std::vector<data::EncodedPair> pairs = {{{4, 5, 2}, {4, 5, 6}, 1}, {{6, 2}, {6}, 2}, {{7, 2}, {3, 3, 7, 4}, 3}};
  const data::Batch batch = data::make_batch({&pairs[0], &pairs[1], &pairs[2]});
  const torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(batch.src, batch.src_lengths, batch.dec_in).logits;  // [B, T, V]
  const torch::Tensor cross_entropy = -logits.log_softmax(-1).gather(-1, batch.dec_tgt.unsqueeze(-1)).squeeze(-1);
  const int64_t steps = batch.dec_tgt.size(1);
  double expected = 0;
  for (int64_t t = 0; t < steps; ++t) {
    double sum = 0;
    int64_t tokens = 0;
    for (int64_t b = 0; b < batch.dec_tgt.size(0); ++b) {
      if (batch.dec_tgt[b][t].item<int64_t>() == 0) continue;
      sum += cross_entropy[b][t].item<double>();
      ++tokens;
    }
    expected += sum / static_cast<double>(tokens) / static_cast<double>(steps);
  }
  EXPECT_NEAR(model->loss(batch, models::LossAverage::kStep).loss.item<double>(), expected, 1e-12);
  EXPECT_NEAR(model->loss(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt, models::LossAverage::kStep)
                  .loss.item<double>(),
              expected, 1e-12);
  const std::vector<double> weights = models::step_weights(batch.tokens_at_step, models::LossAverage::kStep);
  EXPECT_NEAR(model->weighted_loss(batch, weights).loss.item<double>(), expected, 1e-12);
  // The token average: every token weighs the same.
  const double token_average = cross_entropy.masked_select(batch.dec_tgt.ne(0)).mean().item<double>();
  EXPECT_NEAR(model->loss(batch).loss.item<double>(), token_average, 1e-12);
  EXPECT_NEAR(model->weighted_loss(batch, models::step_weights(batch.tokens_at_step, models::LossAverage::kToken))
                  .loss.item<double>(),
              token_average, 1e-12);
}

// Two batches accumulated make one update with the mean of their gradients.
TEST(AccumulationTest, OneUpdateWithTheMeanGradient) {
  torch::manual_seed(3);
  models::Seq2Seq model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4));
  model->to(torch::kDouble);
  std::vector<data::EncodedPair> pairs = {{{4, 5, 2}, {4, 5}, 1}, {{6, 2}, {6}, 2}};
  const std::vector<const data::EncodedPair*> first = {&pairs[0]}, second = {&pairs[1]};
  // The expected update: SGD at lr 1 with the mean of the two batches' gradients.
  std::vector<torch::Tensor> expected;
  for (const auto& p : model->parameters()) expected.push_back(p.detach().clone());
  for (const auto* rows : {&first, &second}) {
    model->zero_grad();
    model->loss(data::make_batch(*rows)).loss.backward();
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto& g = model->parameters()[i].grad();
      if (g.defined()) expected[i] -= 0.5 * g;
    }
  }
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(1.0));
  run::TrainConfig options;
  options.clip = 0;
  options.accumulate = 2;
  training::TrainStep step(*model, sgd, options, torch::kCPU);
  EXPECT_FALSE(step.run(first, false).applied);
  EXPECT_TRUE(step.run(second, false).applied);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_LE((model->parameters()[i] - expected[i]).abs().max().item<double>(), 1e-12) << i;
  }
}

TEST(ParamInitTest, EveryWeightUniformInTheRangeAndPaddingRowsZero) {
  torch::manual_seed(5);
  models::Seq2Seq model(models::Seq2SeqOptions(40, 30).embed_size(8).hidden_size(8).cell(models::CellKind::kLstm)
                            .bidirectional(true).attention({models::AttentionKind::kGlobal, models::ScoreKind::kGeneral}));
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
  model->initialize_uniform(0.05);
  int embeddings = 0;
  for (const auto& named : model->named_parameters()) {
    const torch::Tensor& w = named.value();
    EXPECT_LE(w.abs().max().item<double>(), 0.05) << named.key();
    if (named.key().find("embedding.weight") != std::string::npos) {
      ++embeddings;
      EXPECT_EQ(w[0].abs().max().item<double>(), 0.0) << named.key();
      // Everything else fills the range: LibTorch's N(0, 1) embeddings are long gone.
      EXPECT_GT(w.slice(0, 1).abs().max().item<double>(), 0.045) << named.key();
    }
  }
  EXPECT_EQ(embeddings, 2);
  // U(-a, a) has variance a^2 / 3: over every weight the sample variance is within a few percent.
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().flatten());
  const double variance = torch::cat(flat).var().item<double>();
  EXPECT_NEAR(variance, 0.05 * 0.05 / 3, 0.05 * 0.05 / 3 * 0.05);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < before.size(); ++i) changed += !torch::equal(before[i], model->parameters()[i]);
  EXPECT_EQ(changed, before.size());
}

std::string scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "luong_training_features_test" / std::to_string(::getpid()) / name;
  luong::remove_tree(dir);
  fs::create_directories(dir.parent_path());
  return dir.string();
}

const std::string kSmall =
    "train --data builtin:numbers --train-size 256 --dev-size 32 --test-size 32 --hidden 16 --embed 16 --batch 32 "
    "--threads 1 ";

// The paper's recipe on a small scale: LSTM, two layers, dropout, SGD with its schedule, source
// reversal; and the peers': label smoothing, tied embeddings, checkpoint averages and an EMA, which
// translate and evaluate read back with --weights.
TEST(TrainingFeaturesTest, PapersAndPeersFeaturesTrainAndLoad) {
  const std::string dir = scratch("recipe");
  test::Subprocess train(kSmall + "--epochs 3 --cell lstm --layers 2 --dropout 0.2 --optimizer sgd --lr 1 "
                                  "--schedule halve-after --decay-after 1 --clip 5 --reverse-source --label-smoothing 0.1 "
                                  "--tie-embeddings --average-last 2 --ema 0.99 --attention location --param-init 0.1 --out " + dir,
                         dir + ".log");
  ASSERT_EQ(train.wait(), 0) << train.output();
  for (const char* file : {"averaged_model.pt", "ema_model.pt", "epochs/model.2.pt", "epochs/model.3.pt", "checkpoint/ema.pt"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + file)) << file;
  }
  EXPECT_FALSE(fs::exists(dir + "/epochs/model.1.pt"));  // only the last two are kept
  for (const char* weights : {"best", "last", "averaged", "ema"}) {
    test::Subprocess evaluate(std::string("evaluate --threads 1 --weights ") + weights + " --model " + dir, dir + ".eval.log");
    ASSERT_EQ(evaluate.wait(), 0) << evaluate.output();
    const std::string output = evaluate.output();
    EXPECT_NE(output.find(weights == std::string("best") ? "best_model.pt" : weights == std::string("last") ? "/model.pt"
                          : weights == std::string("averaged") ? "averaged_model.pt" : "ema_model.pt"),
              std::string::npos)
        << output;
  }
  // Two models (the run twice) translate as an ensemble; evaluate says how many.
  test::Subprocess ensemble("evaluate --threads 1 --model " + dir + " --model " + dir, dir + ".ensemble.log");
  ASSERT_EQ(ensemble.wait(), 0) << ensemble.output();
  EXPECT_NE(ensemble.output().find("\"models\":2"), std::string::npos);
  // Resuming continues the schedule and the average from the checkpoint.
  test::Subprocess resume("train --resume --epochs 4 --threads 1 --out " + dir, dir + ".resume.log");
  ASSERT_EQ(resume.wait(), 0) << resume.output();
  EXPECT_FALSE(fs::exists(dir + "/epochs/model.2.pt"));
  EXPECT_TRUE(fs::exists(dir + "/epochs/model.4.pt"));
}

// --param-init reaches the model that training starts from: after one SGD epoch at lr 1e-6 every
// weight is still within the range, where LibTorch's N(0, 1) embeddings are far outside it.
TEST(TrainingFeaturesTest, ParamInitIsWhatTrainingStartsFrom) {
  const auto largest_weight = [](const std::string& dir, const std::string& which) {
    const run::TrainedModel trained = run::load_trained_model(dir, torch::kCPU, run::WeightsChoice::kLast);
    double largest = 0;
    for (const auto& named : trained.model->named_parameters()) {
      if (which.empty() || named.key().find(which) != std::string::npos) {
        largest = std::max(largest, named.value().abs().max().item<double>());
      }
    }
    return largest;
  };
  for (const bool uniform : {true, false}) {
    const std::string dir = scratch(uniform ? "param-init" : "default-init");
    test::Subprocess train(kSmall + "--epochs 1 --optimizer sgd --lr 1e-6 --clip 0 " +
                               (uniform ? "--param-init 0.01 " : "") + "--out " + dir,
                           dir + ".log");
    ASSERT_EQ(train.wait(), 0) << train.output();
    if (uniform) {
      EXPECT_LE(largest_weight(dir, ""), 0.0101);
      EXPECT_GT(largest_weight(dir, "embedding"), 0.009);
    } else {
      EXPECT_GT(largest_weight(dir, "embedding"), 1.0);
    }
  }
}

// The epochs' (train loss, dev loss) from a run's loss.csv.
std::vector<std::pair<double, double>> epoch_losses(const std::string& dir) {
  std::istringstream in(test::read_file(dir + "/loss.csv"));
  std::vector<std::pair<double, double>> losses;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string epoch, train, dev;
    std::getline(fields, epoch, ',');
    std::getline(fields, train, ',');
    std::getline(fields, dev, ',');
    losses.emplace_back(std::stod(train), std::stod(dev));
  }
  return losses;
}

// --precision bf16 converges as float32 does on a small corpus: the same seed and batches, every
// epoch's train and dev loss within 1% of float32's, and both well below the first epoch's.
TEST(TrainingFeaturesTest, Bf16ConvergesLikeFloat32) {
  std::vector<std::vector<std::pair<double, double>>> runs;
  for (const char* precision : {"float32", "bf16"}) {
    const std::string dir = scratch(std::string("precision-") + precision);
    test::Subprocess train(kSmall + "--epochs 8 --hidden 32 --embed 32 --lr 0.005 --precision " + precision +
                               " --out " + dir,
                           dir + ".log");
    ASSERT_EQ(train.wait(), 0) << train.output();
    runs.push_back(epoch_losses(dir));
  }
  const auto& float32 = runs[0];
  const auto& bf16 = runs[1];
  ASSERT_EQ(float32.size(), 8u);
  ASSERT_EQ(bf16.size(), 8u);
  for (std::size_t e = 0; e < float32.size(); ++e) {
    std::printf("  epoch %zu: train %.4f / %.4f, dev %.4f / %.4f (float32 / bf16)\n", e + 1, float32[e].first,
                bf16[e].first, float32[e].second, bf16[e].second);
    EXPECT_NEAR(bf16[e].first, float32[e].first, 0.01 * float32[e].first) << "epoch " << e + 1;
    EXPECT_NEAR(bf16[e].second, float32[e].second, 0.01 * float32[e].second) << "epoch " << e + 1;
  }
  EXPECT_NE(float32.back().first, bf16.back().first);  // bf16 did change the arithmetic
  EXPECT_LT(bf16.back().second, 0.6 * bf16.front().second);
  EXPECT_LT(float32.back().second, 0.6 * float32.front().second);
}

TEST(TrainingFeaturesTest, MaxTimeStopsBetweenEpochs) {
  const std::string dir = scratch("max_time");
  test::Subprocess train(kSmall + "--train-size 2000 --epochs 1000 --max-time 3 --out " + dir, dir + ".log");
  ASSERT_EQ(train.wait(std::chrono::minutes(2)), 0) << train.output();
  EXPECT_NE(train.output().find("another would end past --max-time 3 s"), std::string::npos) << train.output();
  const Json state = Json::parse(test::read_file(dir + "/checkpoint/state.json"));
  EXPECT_GE(state["epoch"].get<int>(), 1);
  EXPECT_LT(state["epoch"].get<int>(), 1000);
}

// What print_step_profile writes.
std::string printed(const training::StepProfile& profile) {
  char* text = nullptr;
  std::size_t size = 0;
  std::FILE* out = open_memstream(&text, &size);
  training::print_step_profile(profile, out);
  std::fclose(out);
  std::string result(text, size);
  std::free(text);
  return result;
}

// --profile-steps on a GPU: after the host's table, the GPU's busy time against the step's and its
// longest kernels, 12 rows at most, long (template) names cut; a window in which CUPTI recorded
// nothing says so. (CudaProfileTest runs the whole thing on a GPU.)
TEST(StepProfileTest, OnAGpuItPrintsTheBusyTimeAndTheLongestKernels) {
  training::StepProfile profile;
  profile.steps = 4;
  profile.milliseconds_per_step = 5.0;
  profile.operations = {{"luong::FusedAdam::fused_step", 4, 0.2}, {"aten::copy_", 8, 0.01}};
  EXPECT_EQ(printed(profile).find("the GPU"), std::string::npos) << "the CPU's profile has one table";
  profile.gpu = true;
  EXPECT_NE(printed(profile).find("profile: the GPU: no kernel or copy was recorded"), std::string::npos);
  for (int k = 0; k < 14; ++k) {
    profile.gpu_work.push_back({"kernel_" + std::to_string(k), 8, 0.2 - 0.01 * k});
  }
  profile.gpu_work[0].name = "void at::native::elementwise_kernel<128, 4>" + std::string(200, 'x');
  profile.gpu_work.push_back({"tiny", 4, 0.001});
  profile.gpu_busy_milliseconds_per_step = 2.5;
  const std::string text = printed(profile);
  EXPECT_NE(text.find("profile: the GPU: 29.0 kernels and copies a step, busy 2.50 ms of the step's 5.00 (50%); "
                      "the longest:\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    4.0%      0.20 ms       8 calls  void at::native::elementwise_kernel<128, 4>xxx"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string(60, 'x') + "...\n"), std::string::npos) << "the name cut at 110 characters";
  EXPECT_EQ(text.find(std::string(110, 'x')), std::string::npos);
  EXPECT_NE(text.find("  kernel_11\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("  kernel_12\n"), std::string::npos) << "12 rows at most";
  // The rest: kernels 12 and 13 (0.08 + 0.07 ms) and "tiny" (0.001 ms).
  EXPECT_NE(text.find("    3.0%      0.15 ms  (3 more)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    0.2%      0.01 ms  (1 operations under 0.5% each)\n"), std::string::npos)
      << "the host's table keeps its wording\n"
      << text;
}

}  // namespace
}  // namespace luong
