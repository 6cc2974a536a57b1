#include "luong/serve/batcher.h"

#include <algorithm>

#include "luong/util/error.h"

namespace luong::serve {
namespace {

// What a job's search is, as text: jobs share a batch only where the model and this are equal.
std::string search_key(const ServedModel* model, const evaluation::SearchOptions& search) {
  return std::to_string(reinterpret_cast<std::uintptr_t>(model)) + dump_json(options::to_json(search)) +
         (search.keep_attention ? "+attention" : "");
}

}  // namespace

Batcher::Batcher(BatcherOptions options, Metrics& metrics)
    : options_(options), metrics_(metrics), thread_([this] { run(); }) {}

Batcher::~Batcher() { stop(); }

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<Batcher::Futures> Batcher::submit(const std::shared_ptr<ServedModel>& model,
                                                const evaluation::SearchOptions& search,
                                                const std::vector<std::string>& sentences) {
  std::vector<Job> jobs(sentences.size());
  const std::string key = search_key(model.get(), search);
  Futures futures;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    Job& job = jobs[i];
    job.model = model;
    job.search = search;
    job.key = key;
    job.source = sentences[i];
    // The budget counts what the encoder reads: the source's tokens (cut where the translator cuts) and <eos>.
    job.tokens = std::min<std::int64_t>(static_cast<std::int64_t>(model->model.source_tokenizer->encode(job.source).size()),
                                        evaluation::kMaxSentenceTokens) + 1;
    futures.push_back(job.result.get_future());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() + jobs.size() > options_.max_queue) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    for (Job& job : jobs) {
      job.queued = now;
      queued_tokens_[job.key] += job.tokens;
      queue_.push_back(std::move(job));
    }
    metrics_.set_queue_depth(queue_.size());
  }
  changed_.notify_all();
  return futures;
}

// The oldest job's kind, once its batch is full or its time is up: the queued jobs of that kind, oldest
// first, up to the token budget (at least one).
std::vector<Batcher::Job> Batcher::next_batch(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  if (queue_.empty()) return {};
  const std::string key = queue_.front().key;
  const auto deadline = queue_.front().queued + options_.queue_timeout;
  changed_.wait_until(lock, deadline, [&] { return stopping_ || queued_tokens_[key] >= options_.max_batch_tokens; });
  std::vector<Job> batch;
  std::int64_t tokens = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->key != key || (!batch.empty() && tokens + it->tokens > options_.max_batch_tokens)) {
      ++it;
      continue;
    }
    tokens += it->tokens;
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  if ((queued_tokens_[key] -= tokens) == 0) queued_tokens_.erase(key);
  metrics_.set_queue_depth(queue_.size());
  return batch;
}

void Batcher::translate(std::vector<Job>& batch) {
  std::vector<std::string> sources;
  for (const Job& job : batch) sources.push_back(job.source);
  evaluation::SearchOptions search = batch.front().search;
  search.batch = static_cast<std::int64_t>(sources.size());  // one search, the budget already bounds it
  try {
    std::vector<evaluation::Translation> translations = batch.front().model->translator.translate(sources, search);
    std::size_t target_tokens = 0;
    for (const auto& t : translations) target_tokens += t.target_tokens.size();
    metrics_.batch(batch.size(), target_tokens);
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i].result.set_value(std::move(translations[i]));
  } catch (...) {
    for (Job& job : batch) job.result.set_exception(std::current_exception());
  }
}

void Batcher::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::vector<Job> batch = next_batch(lock);
    if (batch.empty()) {
      if (stopping_) return;
      continue;
    }
    lock.unlock();
    translate(batch);
    lock.lock();
  }
}

}  // namespace luong::serve
