#pragma once
// Where a training step's time goes, measured by LibTorch's profiler over a window of steps (luong
// train --profile-steps): every top-level operation of the training thread (the fused kernels'
// forward passes and backward nodes, the optimizer, gradient clipping, the module ops between them)
// with its time per step, as a table, and the window as a Chrome trace (chrome://tracing, Perfetto).
// On CUDA those times are the host's (kernels run asynchronously); the window waits for the device
// at both ends, so that its time per step includes the GPU's work, and a second table gives the
// GPU's own kernels and copies as CUPTI records them: whether a step waits for the host's launches
// or for the GPU is the difference between the two.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace luong::training {

/// One row of the table: an operation's name, its calls and its time per step.
struct ProfiledOperation {
  std::string name;
  std::int64_t calls = 0;
  double milliseconds_per_step = 0;
};

struct StepProfile {
  std::int64_t steps = 0;
  double milliseconds_per_step = 0;        ///< wall time of the window, per step
  std::vector<ProfiledOperation> operations;  ///< longest first; together they cover the window
  bool gpu = false;                           ///< the steps ran on a GPU: the two figures below
  std::vector<ProfiledOperation> gpu_work;    ///< the GPU's kernels and copies by name, longest first
  double gpu_busy_milliseconds_per_step = 0;  ///< time with a kernel or copy running, per step
};

/// Profiles the steps [first, first + count) of an epoch: before_step(i) before step i runs starts
/// the profiler at `first` and stops it at `first + count`; finish() after the epoch (or its
/// interruption) stops it if it still runs and returns what it measured (no steps if the window never
/// started). The trace goes to `trace_path` (temp file, then rename). `gpu`: the index of the CUDA
/// device the steps run on (-1: the current one), or none for the CPU.
class StepProfiler {
 public:
  StepProfiler(std::int64_t first, std::int64_t count, std::string trace_path, std::optional<std::int64_t> gpu);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void before_step(std::int64_t index);
  StepProfile finish();

 private:
  void stop();

  std::int64_t first_, count_;
  std::string trace_path_;
  std::optional<std::int64_t> gpu_;
  bool running_ = false;
  double started_ = 0;
  StepProfile profile_;
};

/// The table: one line per operation of 0.5% of the step or more, one for the rest; on a GPU, the
/// GPU's busy time and its longest kernels.
void print_step_profile(const StepProfile& profile, std::FILE* out);

}  // namespace luong::training
