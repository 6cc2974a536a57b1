#include "luong/training/step_profile.h"

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "luong/util/atomic_file.h"

namespace luong::training {
namespace {

namespace profiler = torch::autograd::profiler;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

profiler::ProfilerConfig profiler_config() {
  return profiler::ProfilerConfig(profiler::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                  /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false);
}

std::set<torch::profiler::impl::ActivityType> activities(bool gpu) {
  using torch::profiler::impl::ActivityType;
  std::set<ActivityType> out{ActivityType::CPU};
  if (gpu) out.insert(ActivityType::CUDA);
  return out;
}

// The autograd engine names a backward node "autograd::engine::evaluate_function: <node>", and a
// custom Function's node CppNode<its class>: the table shows "backward: <class>".
std::string readable(std::string name) {
  const std::string engine = "autograd::engine::evaluate_function: ";
  if (name.rfind(engine, 0) != 0) return name;
  name = name.substr(engine.size());
  const std::string node = "torch::autograd::CppNode<";
  if (name.rfind(node, 0) == 0) {
    name = name.substr(node.size(), name.size() - node.size() - 1);
    const std::size_t last = name.rfind("::");
    if (last != std::string::npos) name = name.substr(last + 2);
  }
  return "backward: " + name;
}

// Operations summed by name, longest first.
class OperationTotals {
 public:
  explicit OperationTotals(std::int64_t steps) : steps_(steps) {}
  void add(const std::string& name, std::uint64_t duration_ns) {
    ProfiledOperation& op = by_name_[name];
    ++op.calls;
    op.milliseconds_per_step += static_cast<double>(duration_ns) / 1e6 / static_cast<double>(steps_);
  }
  std::vector<ProfiledOperation> longest_first() {
    std::vector<ProfiledOperation> out;
    for (auto& [name, op] : by_name_) {
      op.name = name;
      out.push_back(std::move(op));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.milliseconds_per_step > b.milliseconds_per_step; });
    return out;
  }

 private:
  std::int64_t steps_;
  std::map<std::string, ProfiledOperation> by_name_;
};

// The operations of the training thread (this one) that no other operation of it encloses, summed
// by name.
std::vector<ProfiledOperation> top_level_operations(const std::vector<profiler::KinetoEvent>& events,
                                                    std::uint64_t thread, std::int64_t steps) {
  std::vector<const profiler::KinetoEvent*> mine;
  for (const auto& e : events) {
    if (e.startThreadId() == thread && e.deviceType() == c10::DeviceType::CPU) mine.push_back(&e);
  }
  std::sort(mine.begin(), mine.end(), [](const auto* a, const auto* b) {
    return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->durationNs() > b->durationNs();
  });
  OperationTotals totals(steps);
  std::uint64_t enclosing_end = 0;
  for (const auto* e : mine) {
    if (e->startNs() < enclosing_end) continue;
    enclosing_end = e->endNs();
    totals.add(readable(e->name()), e->durationNs());
  }
  return totals.longest_first();
}

// The GPU's kernels, copies and fills (CUPTI's records; not the annotations it mirrors from the
// host), summed by name, and the time during which any of them ran.
void add_gpu_work(const std::vector<profiler::KinetoEvent>& events, StepProfile& profile) {
  const auto is_gpu_work = [](const profiler::KinetoEvent& e) {
    using libkineto::ActivityType;
    const auto type = static_cast<ActivityType>(e.activityType());
    return type == ActivityType::CONCURRENT_KERNEL || type == ActivityType::GPU_MEMCPY ||
           type == ActivityType::GPU_MEMSET;
  };
  OperationTotals totals(profile.steps);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> intervals;
  for (const auto& e : events) {
    if (!is_gpu_work(e)) continue;
    totals.add(e.name(), e.durationNs());
    intervals.emplace_back(e.startNs(), e.endNs());
  }
  std::sort(intervals.begin(), intervals.end());
  std::uint64_t busy_ns = 0, covered_to = 0;
  for (const auto& [start, end] : intervals) {
    const std::uint64_t from = std::max(start, covered_to);
    if (end > from) busy_ns += end - from;
    covered_to = std::max(covered_to, end);
  }
  profile.gpu_work = totals.longest_first();
  profile.gpu_busy_milliseconds_per_step = static_cast<double>(busy_ns) / 1e6 / static_cast<double>(profile.steps);
}

// Rows of 0.5% of the step or more (`most` of them at most), their names cut at `width` (npos: no limit),
// then one row for the rest.
void print_rows(const std::vector<ProfiledOperation>& operations, double step_ms, std::size_t most, std::size_t width,
                std::FILE* out) {
  double rest = 0;
  std::int64_t rest_count = 0;
  std::size_t printed = 0;
  bool cut = false;  // rows of 0.5% or more left out
  for (const auto& op : operations) {
    const double share = 100.0 * op.milliseconds_per_step / step_ms;
    if (share < 0.5 || printed == most) {
      cut = cut || share >= 0.5;
      rest += op.milliseconds_per_step;
      ++rest_count;
      continue;
    }
    ++printed;
    const std::string name = op.name.size() > width ? op.name.substr(0, width - 3) + "..." : op.name;
    std::fprintf(out, "  %5.1f%%  %8.2f ms  %6lld calls  %s\n", share, op.milliseconds_per_step,
                 static_cast<long long>(op.calls), name.c_str());
  }
  if (rest_count > 0) {
    const char* format =
        cut ? "  %5.1f%%  %8.2f ms  (%lld more)\n" : "  %5.1f%%  %8.2f ms  (%lld operations under 0.5%% each)\n";
    std::fprintf(out, format, 100.0 * rest / step_ms, rest, static_cast<long long>(rest_count));
  }
}

}  // namespace

StepProfiler::StepProfiler(std::int64_t first, std::int64_t count, std::string trace_path,
                           std::optional<std::int64_t> gpu)
    : first_(first), count_(count), trace_path_(std::move(trace_path)), gpu_(gpu) {}

StepProfiler::~StepProfiler() {
  if (!running_) return;
  try {
    profiler::disableProfiler();  // an exception left the window early: nothing to report
  } catch (...) {
  }
}

void StepProfiler::before_step(std::int64_t index) {
  if (running_ && index == first_ + count_) stop();
  if (index == first_ && count_ > 0 && !running_ && profile_.steps == 0) {
    // Kineto logs an error line when a CUDA build of LibTorch finds no GPU; the user's level wins.
    ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
    const auto recorded = activities(gpu_.has_value());
    profiler::prepareProfiler(profiler_config(), recorded);
    if (gpu_) torch::cuda::synchronize(*gpu_);  // the window starts with nothing of earlier steps queued
    profiler::enableProfiler(profiler_config(), recorded);
    running_ = true;
    started_ = now_seconds();
  }
  if (running_) ++profile_.steps;
}

void StepProfiler::stop() {
  if (gpu_) torch::cuda::synchronize(*gpu_);  // the window's steps done on the device too
  const double seconds = now_seconds() - started_;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  running_ = false;
  profile_.milliseconds_per_step = 1000.0 * seconds / static_cast<double>(profile_.steps);
  profile_.operations = top_level_operations(result->events(), at::RecordFunction::currentThreadId(), profile_.steps);
  profile_.gpu = gpu_.has_value();
  if (profile_.gpu) add_gpu_work(result->events(), profile_);
  check_own_path(trace_path_);
  const std::string temporary = create_temporary_for(trace_path_);  // LibTorch opens it by name
  result->save(temporary);
  commit_file(temporary, trace_path_);
}

StepProfile StepProfiler::finish() {
  if (running_) stop();
  return profile_;
}

void print_step_profile(const StepProfile& profile, std::FILE* out) {
  std::fprintf(out, "profile: %lld steps, %.1f ms a step (LibTorch's profiler on); the training thread's operations:\n",
               static_cast<long long>(profile.steps), profile.milliseconds_per_step);
  print_rows(profile.operations, profile.milliseconds_per_step, std::string::npos, std::string::npos, out);
  if (!profile.gpu) return;
  if (profile.gpu_work.empty()) {
    std::fprintf(out, "profile: the GPU: no kernel or copy was recorded (the profiler's CUPTI saw none)\n");
    return;
  }
  std::int64_t launches = 0;
  for (const auto& op : profile.gpu_work) launches += op.calls;
  const double step_ms = profile.milliseconds_per_step, busy_ms = profile.gpu_busy_milliseconds_per_step;
  std::fprintf(out, "profile: the GPU: %.1f kernels and copies a step, busy %.2f ms of the step's %.2f (%.0f%%); "
               "the longest:\n",
               static_cast<double>(launches) / static_cast<double>(profile.steps), busy_ms, step_ms,
               100.0 * busy_ms / step_ms);
  print_rows(profile.gpu_work, profile.milliseconds_per_step, 12, 110, out);
}

}  // namespace luong::training
