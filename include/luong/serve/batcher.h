#pragma once
// Request batching: the sentences of concurrent requests that ask one model for the same search are
// gathered into one batched search, longest first up to a token budget, waiting at most a queue
// timeout for a batch to fill (Marian's --queue-timeout, CTranslate2's buffer_timeout). One thread
// runs the searches, on LibTorch's intra-op threads; each sentence's translation comes back through
// its own future, so a request's sentences return in order whatever batches they rode in.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "luong/serve/metrics.h"
#include "luong/serve/models.h"

namespace luong::serve {

/// From ServeOptions (server.h), where their defaults and ranges are declared.
struct BatcherOptions {
  std::int64_t max_batch_tokens = 0;  ///< source tokens a batch gathers at most (one sentence may exceed it)
  std::chrono::milliseconds queue_timeout{0};
  std::size_t max_queue = 0;  ///< sentences waiting at most
};

class Batcher {
 public:
  Batcher(BatcherOptions options, Metrics& metrics);
  ~Batcher();  ///< finishes what is queued, then ends its thread
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  using Futures = std::vector<std::future<evaluation::Translation>>;
  /// Queues `sentences` (all or none) for `model` with `search`; nullopt when the queue cannot take
  /// them all (the caller answers 429). One future per sentence, in order.
  std::optional<Futures> submit(const std::shared_ptr<ServedModel>& model, const evaluation::SearchOptions& search,
                                const std::vector<std::string>& sentences);

  /// Runs the queued sentences and ends the thread; later submits are refused.
  void stop();

 private:
  struct Job {
    std::shared_ptr<ServedModel> model;
    evaluation::SearchOptions search;
    std::string key;  // the model and the search: what may share a batch
    std::string source;
    std::int64_t tokens = 0;
    std::chrono::steady_clock::time_point queued;
    std::promise<evaluation::Translation> result;
  };
  void run();
  std::vector<Job> next_batch(std::unique_lock<std::mutex>& lock);
  void translate(std::vector<Job>& batch);

  BatcherOptions options_;
  Metrics& metrics_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::map<std::string, std::int64_t> queued_tokens_;  // by key
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace luong::serve
