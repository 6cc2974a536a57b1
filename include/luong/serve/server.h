#pragma once
// `luong serve`: trained models behind HTTP/1.1 and JSON (cpp-httplib, from Debian). POST
// /translate batches the sentences of concurrent requests into shared searches (Batcher); GET
// /health, /models, /metrics (Prometheus) and /openapi.json describe it; POST /reload swaps in each
// run's newest weights; OpenNMT-py's POST /translator/translate is answered in its server's shape.
// Every refusal is a JSON error with its status. One copy of each model serves every connection.
#include <memory>
#include <string>

#include "luong/evaluation/search.h"
#include "luong/serve/metrics.h"
#include "luong/serve/models.h"
#include "luong/util/options.h"

namespace luong::serve {

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_SERVE_OPTIONS(X)                                                                                    \
  X(std::string, host, "127.0.0.1", "host", "server", "address to listen on (0.0.0.0: every interface)",          \
    ::luong::options::kAnyValue, kMayChange)                                                                      \
  X(std::int64_t, port, 8080, "port", "server", "port to listen on (0: a free one, printed)",                     \
    ::luong::options::closed(0, 65535), kMayChange)                                                               \
  X(std::int64_t, http_threads, 32, "http-threads", "server",                                                     \
    "threads reading and answering connections (they wait on the searches, which run on --threads)",              \
    ::luong::options::closed(1, 1024), kMayChange)                                                                \
  X(std::int64_t, max_batch_tokens, 4096, "max-batch-tokens", "server",                                            \
    "source tokens one batched search gathers at most", ::luong::options::closed(1, 1 << 20), kMayChange)          \
  X(std::int64_t, queue_timeout_ms, 5, "queue-timeout-ms", "server",                                              \
    "milliseconds a sentence waits at most for its batch to fill", ::luong::options::closed(0, 60000), kMayChange) \
  X(std::int64_t, max_queue, 1024, "max-queue", "server",                                                          \
    "sentences waiting at most; a request that would pass it is answered 429 at once",                             \
    ::luong::options::closed(1, 1 << 20), kMayChange)                                                             \
  X(std::int64_t, max_body, 1 << 20, "max-body", "server", "bytes a request body may hold (413 past it)",         \
    ::luong::options::closed(1, 1 << 30), kMayChange)                                                             \
  X(std::int64_t, max_sentences, 256, "max-sentences", "server", "sentences a request may hold",                  \
    ::luong::options::closed(1, 1 << 20), kMayChange)                                                             \
  X(std::int64_t, max_chars, 4096, "max-chars", "server", "characters a sentence may hold (past 400 tokens it is cut)", \
    ::luong::options::closed(1, 1 << 20), kMayChange)                                                             \
  X(std::int64_t, timeout, 10, "timeout", "server", "seconds a connection may stall while reading or writing",    \
    ::luong::options::closed(1, 3600), kMayChange)

struct ServeOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_SERVE_OPTIONS)
};

class TranslationServer {
 public:
  /// `search`: the decoding options of a request that sets none. `models` outlives the server.
  TranslationServer(const ServeOptions& options, const evaluation::SearchOptions& search, ModelRegistry& models);
  ~TranslationServer();
  TranslationServer(const TranslationServer&) = delete;
  TranslationServer& operator=(const TranslationServer&) = delete;

  /// Binds options.host and options.port (0: any free port) and returns the port; luong::Error when
  /// it cannot.
  int bind();
  /// Answers requests until stop() (translation requests get 503 until the models are loaded), then
  /// returns once every request it began to read is answered.
  void serve();
  /// Stops accepting connections; safe from any thread (a signal-handling one).
  void stop();
  /// ModelRegistry::load, counted: until it returns, translation requests are answered 503.
  void load_models();
  /// ModelRegistry::reload, counted and logged.
  Json reload();
  const Metrics& metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luong::serve
