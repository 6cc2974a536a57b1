#pragma once
// The server's counters, gauges and histograms, written in Prometheus' text exposition format
// (version 0.0.4) for GET /metrics. Thread-safe: every handler thread and the batcher update them.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace luong::serve {

/// Cumulative buckets as Prometheus keeps them: counts of observations <= each upper bound, their sum
/// and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  /// `name`_bucket{le="..."}, `name`_sum and `name`_count lines.
  std::string exposition(const std::string& name) const;
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not yet cumulative
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  /// One finished request: its route, HTTP status, sentences and seconds.
  void request(const std::string& route, int status, std::size_t sentences, double seconds);
  /// One error answered, by kind (bad_json, too_large, queue_full, ...).
  void error(const std::string& kind);
  /// One batched search: its sentences and the target tokens it produced.
  void batch(std::size_t sentences, std::size_t target_tokens);
  void set_queue_depth(std::size_t sentences);
  void model_load(bool ok);

  /// The whole exposition, every family with its HELP and TYPE lines.
  std::string exposition() const;

  /// For tests and the load benchmark: searches run and sentences translated so far.
  std::uint64_t batches() const;
  std::uint64_t sentences() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (route, status) -> count
  std::map<std::string, std::uint64_t> errors_;
  std::uint64_t sentences_ = 0, target_tokens_ = 0, loads_ = 0, failed_loads_ = 0;
  std::size_t queue_depth_ = 0;
  Histogram batch_sentences_;
  Histogram latency_;
};

}  // namespace luong::serve
