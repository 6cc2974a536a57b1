#include "luong/training/step_profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

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

profiler::ProfilerConfig cpu_profiler_config() {
  return profiler::ProfilerConfig(profiler::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                  /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false);
}

const std::set<torch::profiler::impl::ActivityType>& cpu_activities() {
  static const std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
  return activities;
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
  std::map<std::string, ProfiledOperation> by_name;
  std::uint64_t enclosing_end = 0;
  for (const auto* e : mine) {
    if (e->startNs() < enclosing_end) continue;
    enclosing_end = e->endNs();
    ProfiledOperation& op = by_name[readable(e->name())];
    ++op.calls;
    op.milliseconds_per_step += static_cast<double>(e->durationNs()) / 1e6 / static_cast<double>(steps);
  }
  std::vector<ProfiledOperation> out;
  for (auto& [name, op] : by_name) {
    op.name = name;
    out.push_back(std::move(op));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.milliseconds_per_step > b.milliseconds_per_step; });
  return out;
}

}  // namespace

StepProfiler::StepProfiler(std::int64_t first, std::int64_t count, std::string trace_path)
    : first_(first), count_(count), trace_path_(std::move(trace_path)) {}

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
    profiler::prepareProfiler(cpu_profiler_config(), cpu_activities());
    profiler::enableProfiler(cpu_profiler_config(), cpu_activities());
    running_ = true;
    started_ = now_seconds();
  }
  if (running_) ++profile_.steps;
}

void StepProfiler::stop() {
  const double seconds = now_seconds() - started_;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  running_ = false;
  profile_.milliseconds_per_step = 1000.0 * seconds / static_cast<double>(profile_.steps);
  profile_.operations = top_level_operations(result->events(), at::RecordFunction::currentThreadId(), profile_.steps);
  const std::string temporary = temporary_path_for(trace_path_);
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
  double rest = 0;
  std::int64_t rest_count = 0;
  for (const auto& op : profile.operations) {
    const double share = 100.0 * op.milliseconds_per_step / profile.milliseconds_per_step;
    if (share < 0.5) {
      rest += op.milliseconds_per_step;
      ++rest_count;
      continue;
    }
    std::fprintf(out, "  %5.1f%%  %8.2f ms  %6lld calls  %s\n", share, op.milliseconds_per_step,
                 static_cast<long long>(op.calls), op.name.c_str());
  }
  if (rest_count > 0) {
    std::fprintf(out, "  %5.1f%%  %8.2f ms  (%lld operations under 0.5%% each)\n",
                 100.0 * rest / profile.milliseconds_per_step, rest, static_cast<long long>(rest_count));
  }
}

}  // namespace luong::training
