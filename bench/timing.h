#pragma once
// How the C++ benchmarks time a call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace luong::bench {

/// Seconds a call of `run` takes: after `warmup` calls, the median of `repeats` timings, each the
/// mean over as many calls as fill `min_seconds`.
inline double median_seconds_per_call(const std::function<void()>& run, int warmup, int repeats, double min_seconds) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    int64_t calls = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      run();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < min_seconds);
    times.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace luong::bench
