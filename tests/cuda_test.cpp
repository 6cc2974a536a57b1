// The same model on the GPU and the CPU: forward passes of every attention variant and both
// decoders, one training step's gradients, greedy translations, an epoch's loss, checkpoints that
// cross devices, and data-parallel training with NCCL and with Gloo over CUDA tensors. Every test is
// skipped, with the reason printed, where no CUDA device is visible (scripts/gpu-check.sh runs them
// on a GPU machine).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "luong/data_pipeline/batching.h"
#include "luong/evaluation/search.h"
#include "luong/models/seq2seq.h"
#include "luong/models/state_dict.h"
#include "luong/training/cuda_graph_step.h"
#include "luong/training/data_parallel.h"
#include "luong/training/fused_adam.h"
#include "luong/training/train_step.h"
#include "luong/util/atomic_file.h"
#include "run_files.h"
#include "subprocess.h"

namespace luong {
namespace {

namespace fs = std::filesystem;
using models::AttentionConfig;
using models::AttentionKind;
using models::DecoderKind;
using models::ScoreKind;

#define LUONG_REQUIRE_CUDA()                                                        \
  do {                                                                              \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device is visible"; \
  } while (0)

struct Variant {
  AttentionKind kind;
  ScoreKind score;
  DecoderKind decoder;
  std::string name() const {
    return std::string(options::enum_name(kind)) + "_" + options::enum_name(score) + "_" + options::enum_name(decoder);
  }
};

void PrintTo(const Variant& v, std::ostream* out) { *out << v.name(); }

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (auto kind : {AttentionKind::kGlobal, AttentionKind::kLocalMonotonic, AttentionKind::kLocalPredictive}) {
    for (auto score : {ScoreKind::kDot, ScoreKind::kGeneral, ScoreKind::kConcat}) {
      for (auto decoder : {DecoderKind::kLuong, DecoderKind::kBahdanau}) out.push_back({kind, score, decoder});
    }
  }
  return out;
}

models::Seq2Seq make_model(const Variant& v, torch::ScalarType dtype) {
  torch::manual_seed(17);
  AttentionConfig attention;
  attention.kind = v.kind;
  attention.score = v.score;
  attention.window = 2;
  models::Seq2Seq model(models::Seq2SeqOptions(40, 30).embed_size(12).hidden_size(16).decoder(v.decoder).attention(attention));
  model->to(dtype);
  return model;
}

// Sixteen rows of mixed source and target lengths.
data::Batch random_batch(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<data::EncodedPair> pairs(16);
  for (auto& p : pairs) {
    const int source = 1 + static_cast<int>(rng() % 9), target = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < source; ++i) p.source.push_back(4 + static_cast<int64_t>(rng() % 36));
    p.source.push_back(2);
    for (int i = 0; i < target; ++i) p.target.push_back(4 + static_cast<int64_t>(rng() % 26));
  }
  std::vector<const data::EncodedPair*> rows;
  for (const auto& p : pairs) rows.push_back(&p);
  return data::make_batch(rows);
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kCPU, torch::kDouble), y = b.to(torch::kCPU, torch::kDouble);
  return (x - y).norm().item<double>() / std::max(y.norm().item<double>(), 1e-300);
}

// For its scope, the CUDA backend's float32 products and recurrences in IEEE float32: by LibTorch's
// default, cuDNN's recurrent kernels round their products' inputs to TF32 (a 10-bit mantissa), off
// from the CPU by about 1e-3, and differently for different shapes.
class Ieee32Scope {
 public:
  Ieee32Scope() {
    for (auto op : {at::Float32Op::RNN, at::Float32Op::MATMUL, at::Float32Op::CONV}) {
      saved_.emplace_back(op, at::globalContext().float32Precision(at::Float32Backend::CUDA, op));
      at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, op, at::Float32Precision::IEEE);
    }
  }
  ~Ieee32Scope() {
    for (const auto& [op, precision] : saved_) at::globalContext().setFloat32Precision(at::Float32Backend::CUDA, op, precision);
  }
  Ieee32Scope(const Ieee32Scope&) = delete;
  Ieee32Scope& operator=(const Ieee32Scope&) = delete;

 private:
  std::vector<std::pair<at::Float32Op, at::Float32Precision>> saved_;
};

// The float32 halves compare the GPU with the CPU in IEEE float32.
class CudaVariantTest : public ::testing::TestWithParam<Variant> {
 private:
  Ieee32Scope ieee32_;
};

TEST_P(CudaVariantTest, ForwardMatchesTheCpu) {
  LUONG_REQUIRE_CUDA();
  for (const auto& [dtype, tolerance] : {std::pair{torch::kFloat, 1e-4}, std::pair{torch::kDouble, 1e-10}}) {
    models::Seq2Seq cpu = make_model(GetParam(), dtype), gpu = make_model(GetParam(), dtype);
    gpu->to(torch::kCUDA);
    const data::Batch batch = random_batch(1);
    const data::Batch on_gpu = batch.to(torch::kCUDA);
    torch::NoGradGuard no_grad;
    const auto a = cpu->forward(batch.src, batch.src_lengths, batch.dec_in);
    const auto b = gpu->forward(on_gpu.src, on_gpu.src_lengths, on_gpu.dec_in);
    EXPECT_LE(relative_difference(b.logits, a.logits), tolerance) << GetParam().name();
    EXPECT_LE(relative_difference(b.attention, a.attention), tolerance) << GetParam().name();
  }
}

TEST_P(CudaVariantTest, OneTrainingStepsGradientsMatchTheCpu) {
  LUONG_REQUIRE_CUDA();
  for (const auto& [dtype, tolerance] : {std::pair{torch::kFloat, 1e-4}, std::pair{torch::kDouble, 1e-10}}) {
    models::Seq2Seq cpu = make_model(GetParam(), dtype), gpu = make_model(GetParam(), dtype);
    gpu->to(torch::kCUDA);
    const data::Batch batch = random_batch(2);
    cpu->loss(batch).loss.backward();
    gpu->loss(batch.to(torch::kCUDA)).loss.backward();
    const auto cpu_parameters = cpu->named_parameters(), gpu_parameters = gpu->named_parameters();
    for (const auto& p : cpu_parameters) {
      const torch::Tensor& g = gpu_parameters[p.key()].grad();
      ASSERT_TRUE(g.defined()) << p.key();
      EXPECT_LE(relative_difference(g, p.value().grad()), tolerance) << GetParam().name() << " " << p.key();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, CudaVariantTest, ::testing::ValuesIn(all_variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           std::string name = info.param.name();
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

std::string scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "luong_cuda_test" / std::to_string(::getpid()) / name;
  luong::remove_tree(dir);
  fs::create_directories(dir.parent_path());
  return dir.string();
}

int run(const std::string& args, const std::string& log, std::string* output = nullptr) {
  test::Subprocess process(args, log);
  const int status = process.wait(std::chrono::minutes(5));
  if (output != nullptr) *output = process.output();
  return status;
}

const std::string kSmall =
    "train --data builtin:numbers --train-size 512 --dev-size 64 --test-size 64 --hidden 32 --embed 16 --batch 32 "
    "--threads 2 --deterministic ";

std::vector<double> train_losses(const std::string& dir) {
  std::istringstream in(test::read_file(dir + "/loss.csv"));
  std::string line;
  std::getline(in, line);
  std::vector<double> losses;
  while (std::getline(in, line)) losses.push_back(std::stod(line.substr(line.find(',') + 1)));
  return losses;
}

TEST(CudaTrainingTest, OneEpochsLossMatchesTheCpu) {
  LUONG_REQUIRE_CUDA();
  const std::string cpu = scratch("epoch_cpu"), gpu = scratch("epoch_gpu");
  ASSERT_EQ(run(kSmall + "--epochs 1 --device cpu --out " + cpu, cpu + ".log"), 0) << test::read_file(cpu + ".log");
  ASSERT_EQ(run(kSmall + "--epochs 1 --device cuda --out " + gpu, gpu + ".log"), 0) << test::read_file(gpu + ".log");
  const auto a = train_losses(cpu), b = train_losses(gpu);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NEAR(a[0], b[0], 1e-3);
}

// --precision bf16 on the GPU (LibTorch's CUDA autocast: cuDNN's recurrences and cuBLAS's products in
// bf16) trains as the CPU's float32 does: each of 3 epochs' train loss within 2%.
TEST(CudaTrainingTest, Bf16EpochsTrackTheCpusFloat32) {
  LUONG_REQUIRE_CUDA();
  const std::string cpu = scratch("bf16_cpu"), gpu = scratch("bf16_gpu");
  ASSERT_EQ(run(kSmall + "--epochs 3 --device cpu --out " + cpu, cpu + ".log"), 0) << test::read_file(cpu + ".log");
  ASSERT_EQ(run(kSmall + "--epochs 3 --device cuda --precision bf16 --out " + gpu, gpu + ".log"), 0)
      << test::read_file(gpu + ".log");
  const auto a = train_losses(cpu), b = train_losses(gpu);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (std::size_t e = 0; e < a.size(); ++e) EXPECT_NEAR(b[e], a[e], 0.02 * a[e]) << "epoch " << e + 1;
}

TEST(CudaTrainingTest, GreedyTranslationsOfTheTestSplitMatchTheCpu) {
  LUONG_REQUIRE_CUDA();
  const std::string dir = scratch("greedy");
  ASSERT_EQ(run(kSmall + "--epochs 2 --dtype float64 --out " + dir, dir + ".log"), 0) << test::read_file(dir + ".log");
  std::string sources;
  std::istringstream test_split(test::read_file(dir + "/test.tsv"));
  for (std::string line; std::getline(test_split, line);) sources += line.substr(0, line.find('\t')) + "\n";
  std::ofstream(dir + "/sources.txt") << sources;
  for (const char* device : {"cpu", "cuda"}) {
    test::Subprocess translate("translate --threads 2 --device " + std::string(device) + " --model " + dir,
                               dir + "." + device + ".log", {}, dir + "/sources.txt", dir + "/" + device + ".txt");
    ASSERT_EQ(translate.wait(), 0) << translate.output();
  }
  EXPECT_EQ(test::read_file(dir + "/cpu.txt"), test::read_file(dir + "/cuda.txt"));
}

// A checkpoint written on the GPU resumes on the CPU, and the other way round; both end where an
// uninterrupted run on the CPU ends, up to float32 rounding.
TEST(CudaTrainingTest, CheckpointsCrossDevices) {
  LUONG_REQUIRE_CUDA();
  const std::string straight = scratch("straight");
  ASSERT_EQ(run(kSmall + "--epochs 2 --device cpu --out " + straight, straight + ".log"), 0);
  for (const auto& [first, second] : {std::pair{"cuda", "cpu"}, std::pair{"cpu", "cuda"}}) {
    const std::string dir = scratch(std::string(first) + "_then_" + second);
    ASSERT_EQ(run(kSmall + "--epochs 1 --device " + first + " --out " + dir, dir + ".1.log"), 0)
        << test::read_file(dir + ".1.log");
    ASSERT_EQ(run("train --resume --epochs 2 --device " + std::string(second) + " --out " + dir, dir + ".2.log"), 0)
        << test::read_file(dir + ".2.log");
    const auto a = train_losses(straight), b = train_losses(dir);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_NEAR(a[1], b[1], 1e-3) << first << " then " << second;
  }
}

std::vector<data::EncodedPair> random_pairs(std::uint64_t seed, int count, int longest) {
  std::mt19937_64 rng(seed);
  std::vector<data::EncodedPair> pairs(static_cast<std::size_t>(count));
  for (auto& p : pairs) {
    const int source = 1 + static_cast<int>(rng() % longest), target = 1 + static_cast<int>(rng() % longest);
    for (int i = 0; i < source; ++i) p.source.push_back(4 + static_cast<int64_t>(rng() % 36));
    p.source.push_back(2);
    for (int i = 0; i < target; ++i) p.target.push_back(4 + static_cast<int64_t>(rng() % 26));
  }
  return pairs;
}

// Training steps replayed from CUDA graphs against the same steps launched eagerly: 14 batches of
// three padded shapes (so that the graph path runs eager warm-up steps, captures and replays), a
// bidirectional 2-layer GRU encoder, both loss averages. The losses of every step and the weights
// after them agree to float32 rounding (the graphs' padding only adds zeros to sums), and the
// counts prove the replays ran.
TEST(CudaGraphTest, StepsMatchEagerStepsAndReplay) {
  LUONG_REQUIRE_CUDA();
  const Ieee32Scope ieee32;  // the two paths' recurrences differ in shape, so would TF32's rounding
  std::vector<std::vector<data::EncodedPair>> pairs;
  std::vector<std::vector<const data::EncodedPair*>> batches;
  for (int k = 0; k < 14; ++k) {  // sentences of up to 6, 12 and 20 tokens: lengths padded to 8, 16 and 24
    pairs.push_back(random_pairs(9 + k, 16, std::vector<int>{6, 12, 20}[k % 3]));
    batches.emplace_back();
    for (const auto& pair : pairs.back()) batches.back().push_back(&pair);
  }
  for (const models::LossAverage average : {models::LossAverage::kToken, models::LossAverage::kStep}) {
    std::vector<std::vector<double>> losses(2);
    std::vector<std::vector<torch::Tensor>> weights(2);
    const training::CudaGraphCounts before = training::cuda_graph_counts();
    for (const bool graphs : {false, true}) {
      torch::manual_seed(23);
      models::Seq2Seq model(models::Seq2SeqOptions(40, 30).embed_size(12).hidden_size(16).layers(2).bidirectional(true));
      model->to(torch::kCUDA);
      training::FusedAdam adam(model->parameters(), torch::optim::AdamOptions(3e-3));
      run::TrainConfig options;
      options.loss_average = average;
      options.clip = 0.5;
      options.cuda_graphs = graphs;
      training::TrainStep step(*model, adam, options, torch::kCUDA);
      ASSERT_EQ(step.uses_cuda_graphs(), graphs);
      for (const auto& rows : batches) losses[graphs].push_back(step.run(rows, false).loss.item<double>());
      for (const torch::Tensor& p : model->parameters()) weights[graphs].push_back(p.detach().clone());
    }
    const training::CudaGraphCounts after = training::cuda_graph_counts();
    EXPECT_EQ(after.eager - before.eager, 3);
    EXPECT_GE(after.captured - before.captured, 3);
    EXPECT_GE(after.replayed - before.replayed, 9);
    for (std::size_t k = 0; k < losses[0].size(); ++k) {
      EXPECT_NEAR(losses[1][k], losses[0][k], 1e-4 * std::abs(losses[0][k])) << "step " << k + 1;
    }
    for (std::size_t k = 0; k < weights[0].size(); ++k) {
      EXPECT_LE(relative_difference(weights[1][k], weights[0][k]), 1e-4) << "parameter " << k;
    }
  }
}

// The command line trains with CUDA graphs by default (outside --deterministic) and ends where
// --no-cuda-graphs does: each epoch's loss within 1% (both runs keep LibTorch's TF32 recurrences,
// whose rounding differs with the graphs' padded shapes; StepsMatchEagerStepsAndReplay is the exact
// comparison).
TEST(CudaGraphTest, TrainingWithGraphsEndsWhereEagerTrainingEnds) {
  LUONG_REQUIRE_CUDA();
  const std::string graphs = scratch("graphs"), eager = scratch("no_graphs");
  const std::string args =
      "train --data builtin:numbers --train-size 512 --dev-size 64 --test-size 64 --hidden 32 --embed 16 --batch 32 "
      "--threads 2 --dropout 0 --epochs 2 --device cuda ";
  ASSERT_EQ(run(args + "--out " + graphs, graphs + ".log"), 0) << test::read_file(graphs + ".log");
  ASSERT_EQ(run(args + "--no-cuda-graphs --out " + eager, eager + ".log"), 0) << test::read_file(eager + ".log");
  EXPECT_EQ(test::read_file(graphs + ".log").find("CUDA graphs off"), std::string::npos);
  const auto a = train_losses(eager), b = train_losses(graphs);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (std::size_t e = 0; e < a.size(); ++e) EXPECT_NEAR(b[e], a[e], 1e-2 * a[e]) << "epoch " << e + 1;
}

// --profile-steps on a GPU (CUDA graphs on, as by default): the window waits for the device at both
// ends, and CUPTI's records give the GPU's table after the host's: kernels in every step, replays'
// included, and the GPU busy for no longer than the step.
TEST(CudaProfileTest, ProfileStepsGivesTheGpusKernels) {
  LUONG_REQUIRE_CUDA();
  const std::string dir = scratch("profile");
  ASSERT_EQ(run("train --data builtin:numbers --train-size 512 --dev-size 64 --test-size 64 --hidden 32 --embed 16 "
                "--batch 32 --threads 2 --epochs 1 --device cuda --profile-steps 4 --out " + dir,
                dir + ".log"),
            0)
      << test::read_file(dir + ".log");
  const std::string log = test::read_file(dir + ".log");
  const std::size_t gpu = log.find("profile: the GPU: ");
  ASSERT_NE(gpu, std::string::npos) << log;
  double launches = 0, busy = 0, step = 0;
  const char* format = "profile: the GPU: %lf kernels and copies a step, busy %lf ms of the step's %lf";
  ASSERT_EQ(std::sscanf(log.c_str() + gpu, format, &launches, &busy, &step), 3)
      << log;
  EXPECT_GT(launches, 10) << log;
  EXPECT_GT(busy, 0) << log;
  EXPECT_LE(busy, 1.05 * step) << log;
}

// NCCL with a single rank: the all-reduce is the identity and the scalars come back unchanged.
TEST(CudaDataParallelTest, NcclWithOneRank) {
  LUONG_REQUIRE_CUDA();
  training::DistributedOptions options;
  options.world_size = 1;
  options.rank = 0;
  options.master_port = 29611;
  options.dist_backend = training::DistBackend::kNccl;
  training::DataParallel parallel(options, torch::kCUDA);
  torch::Tensor p = torch::randn({5, 3}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  p.mutable_grad() = torch::randn({5, 3}, torch::kCUDA);
  const torch::Tensor before = p.grad().clone();
  const torch::Tensor totals = parallel.sum_gradients({p}, torch::tensor({2.5, 1.0}, torch::kFloat64));
  EXPECT_TRUE(torch::equal(p.grad(), before));
  EXPECT_EQ(totals.device().type(), torch::kCUDA);
  EXPECT_EQ(totals[0].item<double>(), 2.5);
}

// Two ranks on one GPU (NCCL refuses two ranks per device; Gloo moves CUDA tensors through the
// host): the result equals one process's training to float32 rounding.
TEST(CudaDataParallelTest, GlooOverCudaTensorsWithTwoRanksOnOneGpu) {
  LUONG_REQUIRE_CUDA();
  const std::string single = scratch("dp_single"), pair = scratch("dp_pair");
  ASSERT_EQ(run(kSmall + "--epochs 1 --device cuda --out " + single, single + ".log"), 0);
  const int port = 29000 + static_cast<int>(::getpid() % 1000);
  std::vector<std::unique_ptr<test::Subprocess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<test::Subprocess>(
        kSmall + "--epochs 1 --device cuda --dist-backend gloo --dist-timeout 60 --world-size 2 --rank " +
            std::to_string(rank) + " --master-port " + std::to_string(port) + " --out " + pair,
        pair + ".rank" + std::to_string(rank) + ".log"));
  }
  for (auto& rank : ranks) ASSERT_EQ(rank->wait(std::chrono::minutes(5)), 0) << rank->output();
  EXPECT_NEAR(train_losses(single)[0], train_losses(pair)[0], 1e-3);
}

}  // namespace
}  // namespace luong
