// Side tasks (util/side_tasks.h): work handed out and deferred inside a backward pass runs exactly
// once, on the side threads where they are free, errors come back to the caller, and a training
// step that overlaps its backward pass so computes what the step without side threads computes.
#include "luong/util/side_tasks.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "luong/data_pipeline/batching.h"
#include "luong/models/linear_cross_entropy.h"
#include "luong/models/seq2seq.h"
#include "luong/training/train_step.h"
#include "luong/util/path_counts.h"

namespace luong {
namespace {

// At least two intra-op threads for the test's duration (the suite runs with OMP_NUM_THREADS=2).
class TwoThreads {
 public:
  TwoThreads() : before_(at::get_num_threads()) {
    if (before_ < 2) at::set_num_threads(2);
  }
  ~TwoThreads() {
    if (before_ < 2) at::set_num_threads(before_);
  }

 private:
  int before_;
};

TEST(SideTasksTest, HandedOutTasksRunOnceEachAndASideThreadTakesThem) {
  const TwoThreads threads;
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> runs(7);
  std::atomic<bool> second_started{false};
  std::thread::id second_thread;
  const int64_t side_before = path_counts::read(path_counts::Path::kSideTasks);
  EXPECT_FALSE(side_tasks_active());
  run_with_side_tasks(2, [&] {
    EXPECT_TRUE(side_tasks_active());
    EXPECT_EQ(task_threads(), 2);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    run_tasks(2, [&](int64_t i) {
      ++runs[static_cast<std::size_t>(i)];
      if (i == 1) {
        second_thread = std::this_thread::get_id();
        second_started = true;
        return;
      }
      // Task 0 runs here; it waits (10 s at most) for task 1 to start, which only a side thread can do.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!second_started && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    run_tasks(5, [&](int64_t i) { ++runs[static_cast<std::size_t>(2 + i)]; });
  });
  EXPECT_FALSE(side_tasks_active());
  for (const std::atomic<int>& count : runs) EXPECT_EQ(count.load(), 1);
  ASSERT_TRUE(second_started.load());
  EXPECT_NE(second_thread, caller);
  EXPECT_GE(path_counts::read(path_counts::Path::kSideTasks) - side_before, 1);
}

TEST(SideTasksTest, DeferredTasksRunBeforeTheReturnAndTheirThensInOrderOnTheCaller) {
  const TwoThreads threads;
  EXPECT_FALSE(defer_tasks(1, [](int64_t) {}, [] {}));  // nothing to defer to outside run_with_side_tasks
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> first_pieces{0}, second_pieces{0}, handed_out{0};
  std::vector<int> thens;
  run_with_side_tasks(2, [&] {
    EXPECT_TRUE(defer_tasks(
        6, [&](int64_t) { ++first_pieces; },
        [&] {
          EXPECT_EQ(std::this_thread::get_id(), caller);
          EXPECT_EQ(first_pieces.load(), 6);
          thens.push_back(1);
        }));
    EXPECT_TRUE(defer_tasks(3, [&](int64_t) { ++second_pieces; }, [&] { thens.push_back(2); }));
    run_tasks(4, [&](int64_t) { ++handed_out; });  // ahead of the deferred pieces
    EXPECT_EQ(handed_out.load(), 4);
    EXPECT_TRUE(thens.empty());  // the thens wait for run_with_side_tasks's return
  });
  EXPECT_EQ(first_pieces.load(), 6);
  EXPECT_EQ(second_pieces.load(), 3);
  EXPECT_EQ(thens, (std::vector<int>{1, 2}));
}

TEST(SideTasksTest, ErrorsReachTheCallerAndTheTeamStops) {
  const TwoThreads threads;
  std::atomic<int> ran{0};
  EXPECT_THROW(run_with_side_tasks(2,
                                   [&] {
                                     run_tasks(3, [&](int64_t i) {
                                       ++ran;
                                       if (i == 2) throw std::runtime_error("task 2 failed");
                                     });
                                   }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 3);  // every task ran, the failure came back after them
  bool then_ran = false;
  try {
    run_with_side_tasks(2, [&] {
      defer_tasks(
          2, [](int64_t i) {
            if (i == 1) throw std::invalid_argument("piece 1 failed");
          },
          [&] { then_ran = true; });
    });
    ADD_FAILURE() << "the deferred piece's error was swallowed";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "piece 1 failed");
  }
  EXPECT_FALSE(then_ran);
  EXPECT_FALSE(side_tasks_active());
}

TEST(SideTasksTest, OutsideTheyRunOnTheIntraOpThreadsInTheCallersGradMode) {
  const TwoThreads threads;
  EXPECT_EQ(task_threads(), at::get_num_threads());
  std::vector<std::atomic<int>> grad_enabled(4);
  {
    const torch::NoGradGuard no_grad;
    run_tasks(4, [&](int64_t i) { grad_enabled[static_cast<std::size_t>(i)] = torch::GradMode::is_enabled() ? 1 : 0; });
  }
  for (const std::atomic<int>& enabled : grad_enabled) EXPECT_EQ(enabled.load(), 0);
  run_with_side_tasks(1, [] { EXPECT_FALSE(side_tasks_active()); });  // one thread: main runs alone
}

// Twenty sentence pairs of 1-9 tokens: two blocks of rows at two threads.
std::vector<data::EncodedPair> varied_pairs() {
  std::vector<data::EncodedPair> pairs;
  for (int i = 0; i < 20; ++i) {
    data::EncodedPair pair;
    for (int t = 0; t < 1 + (i * 7) % 9; ++t) pair.source.push_back(4 + (i * 5 + t * 3) % 25);
    pair.source.push_back(2);  // <eos>
    for (int t = 0; t < 1 + (i * 4) % 8; ++t) pair.target.push_back(4 + (i * 3 + t * 7) % 33);
    pair.line = static_cast<std::size_t>(i);
    pairs.push_back(pair);
  }
  return pairs;
}

// Two accumulated batches and their update, with and without side threads, in double: the output
// layer's weight gradient, deferred to the side threads, lands in .grad as autograd would put it
// (onto the embedding path's gradient where the weights are tied, onto the first batch's where
// batches accumulate).
TEST(OverlappedBackwardTest, AStepWithSideThreadsComputesWhatTheStepWithoutThemDoes) {
  const TwoThreads threads;
  const std::vector<data::EncodedPair> pairs = varied_pairs();
  std::vector<const data::EncodedPair*> first, second;
  for (std::size_t i = 0; i < pairs.size(); ++i) (i < 16 ? first : second).push_back(&pairs[i]);
  for (const bool tied : {false, true}) {
    std::vector<std::vector<torch::Tensor>> trained;
    std::vector<double> losses;
    for (const bool overlap : {false, true}) {
      torch::manual_seed(11);
      models::Seq2Seq model(models::Seq2SeqOptions(30, 40).embed_size(16).hidden_size(16).tie_embeddings(tied));
      model->to(torch::kDouble);
      torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.5));  // (Adam would magnify rounding)
      run::TrainConfig options;
      options.accumulate = 2;
      options.overlap_below_hidden = overlap ? 1024 : 0;
      training::TrainStep step(*model, sgd, options, torch::kCPU);
      ASSERT_EQ(step.overlaps_backward(), overlap);
      if (overlap) {  // LibTorch's modules hand nothing out: their backward keeps every thread
        model->set_fused(false);
        EXPECT_FALSE(step.overlaps_backward());
        model->set_fused(true);
      }
      const int64_t deferred_before = path_counts::read(path_counts::Path::kDeferredWeightGradients);
      const training::TrainStep::Result a = step.run(first, false);
      const training::TrainStep::Result b = step.run(second, false);
      ASSERT_TRUE(b.applied);
      losses.push_back(a.loss.item<double>() + b.loss.item<double>());
      // (which thread took the pieces depends on the machine's load; SideTasksTest.HandedOutTasks...
      // shows that a side thread takes them)
      EXPECT_EQ(path_counts::read(path_counts::Path::kDeferredWeightGradients) - deferred_before, overlap ? 2 : 0) << tied;
      std::vector<torch::Tensor> parameters;
      for (const torch::Tensor& p : model->parameters()) parameters.push_back(p.detach().clone());
      trained.push_back(parameters);
    }
    EXPECT_NEAR(losses[0], losses[1], 1e-12) << tied;
    ASSERT_EQ(trained[0].size(), trained[1].size());
    for (std::size_t i = 0; i < trained[0].size(); ++i) {
      EXPECT_LE((trained[0][i] - trained[1][i]).abs().max().item<double>(), 1e-12) << "tied " << tied << ", parameter "
                                                                                   << i;
    }
  }
}

}  // namespace
}  // namespace luong
