#include "luong/serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace luong::serve {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

void family(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  sum_ += value;
  ++count_;
}

std::string Histogram::exposition(const std::string& name) const {
  std::string out;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
  return out;
}

Metrics::Metrics()
    : batch_sentences_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
      latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}) {}

void Metrics::request(const std::string& route, int status, std::size_t sentences, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route, status}];
  if (route == "/translate" || route == "/translator/translate") {
    if (status == 200) sentences_ += sentences;
    latency_.observe(seconds);
  }
}

void Metrics::error(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++errors_[kind];
}

void Metrics::batch(std::size_t sentences, std::size_t target_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_sentences_.observe(static_cast<double>(sentences));
  target_tokens_ += target_tokens;
}

void Metrics::set_queue_depth(std::size_t sentences) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_depth_ = sentences;
}

void Metrics::model_load(bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++(ok ? loads_ : failed_loads_);
}

std::uint64_t Metrics::batches() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_sentences_.count();
}

std::uint64_t Metrics::sentences() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sentences_;
}

std::string Metrics::exposition() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  family(out, "luong_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const auto& [key, count] : requests_) {
    out += "luong_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(count) + "\n";
  }
  family(out, "luong_errors_total", "counter", "Requests refused or failed, by kind.");
  for (const auto& [kind, count] : errors_) out += "luong_errors_total{kind=\"" + kind + "\"} " + std::to_string(count) + "\n";
  family(out, "luong_sentences_total", "counter", "Sentences translated for successful requests.");
  out += "luong_sentences_total " + std::to_string(sentences_) + "\n";
  family(out, "luong_target_tokens_total", "counter", "Target tokens produced by the searches.");
  out += "luong_target_tokens_total " + std::to_string(target_tokens_) + "\n";
  family(out, "luong_queue_depth", "gauge", "Sentences waiting for a batch.");
  out += "luong_queue_depth " + std::to_string(queue_depth_) + "\n";
  family(out, "luong_model_loads_total", "counter", "Model loads (start and reloads), by outcome.");
  out += "luong_model_loads_total{outcome=\"ok\"} " + std::to_string(loads_) + "\n";
  out += "luong_model_loads_total{outcome=\"failed\"} " + std::to_string(failed_loads_) + "\n";
  family(out, "luong_batch_sentences", "histogram", "Sentences per batched search.");
  out += batch_sentences_.exposition("luong_batch_sentences");
  family(out, "luong_request_duration_seconds", "histogram", "Latency of translation requests, received to answered.");
  out += latency_.exposition("luong_request_duration_seconds");
  return out;
}

}  // namespace luong::serve
