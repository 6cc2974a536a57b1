#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "luong/cli/commands.h"
#include "luong/cli/option_flags.h"
#include "luong/run/runtime.h"
#include "luong/serve/server.h"
#include "luong/util/error.h"

namespace luong::cli {
namespace {

// SIGTERM and SIGINT stop the server (the requests in flight are answered first), SIGHUP reloads
// the models; they are blocked in every thread and taken here, off any handler's restrictions.
void handle_signals(const sigset_t& signals, serve::TranslationServer& server, const std::atomic<bool>& finished) {
  while (!finished) {
    const timespec tick{0, 100'000'000};
    const int signal = ::sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGHUP) {
      const Json outcome = server.reload();
      std::fprintf(stderr, "luong serve: SIGHUP: reloaded %s\n", dump_json(outcome).c_str());
    } else if (signal == SIGTERM || signal == SIGINT) {
      std::fprintf(stderr, "luong serve: %s: no new connections; answering the requests in flight\n",
                   signal == SIGTERM ? "SIGTERM" : "SIGINT");
      // Repeated: a stop that comes before the listener runs would be lost.
      while (!finished) {
        server.stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
}

std::vector<serve::ModelSpec> model_specs(const cxxopts::ParseResult& result) {
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  std::vector<serve::ModelSpec> specs;
  for (const std::string& text : result["model"].as<std::vector<std::string>>()) specs.push_back(serve::parse_model_spec(text));
  return specs;
}

}  // namespace

int serve_command(int argc, char** argv) {
  cxxopts::Options parser("luong serve",
                          "Serve trained models over HTTP/1.1 with JSON: POST /translate {\"src\": [...]} (see GET "
                          "/openapi.json). The search options below are a request's defaults; a request may set "
                          "its own within their ranges.");
  parser.add_options("model")("model", "run directory to serve, or NAME=RUN_DIR; several serve several models (a "
                                       "request names one; the first by default)",
                              cxxopts::value<std::vector<std::string>>());
  add_flags(parser, run::ModelOptions{});
  add_flags(parser, run::RuntimeOptions{});
  add_flags(parser, serve::ServeOptions{});
  add_flags(parser, evaluation::SearchOptions{});
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  run::RuntimeOptions runtime;
  run::ModelOptions weights;
  serve::ServeOptions options;
  evaluation::SearchOptions search;
  apply_flags(result, runtime);
  apply_flags(result, weights);
  apply_flags(result, options);
  apply_flags(result, search);
  if (search.nbest > search.beam) throw Error("--nbest " + std::to_string(search.nbest) + " needs --beam >= it");
  if (!search.dictionary.empty()) throw Error("--dictionary is not served: the server reads no file a request names");
  if (result.count("batch")) throw Error("--batch: the server forms its batches itself (--max-batch-tokens)");
  const std::vector<serve::ModelSpec> specs = model_specs(result);
  const run::Runtime applied = run::apply_runtime(runtime);

  sigset_t signals;
  sigemptyset(&signals);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts, so that all inherit it

  serve::ModelRegistry registry(specs, applied.device, weights.weights);
  serve::TranslationServer server(options, search, registry);
  const int port = server.bind();
  std::fprintf(stderr, "luong serve: listening on http://%s:%d/ (loading %zu model%s)\n", options.host.c_str(), port,
               specs.size(), specs.size() == 1 ? "" : "s");
  std::atomic<bool> finished{false};
  std::thread signal_thread([&] { handle_signals(signals, server, finished); });
  std::thread listener([&] {
    server.serve();
    finished = true;
  });
  int status = 0;
  try {
    server.load_models();
    std::fprintf(stderr, "luong serve: ready\n");
  } catch (...) {
    std::fprintf(stderr, "luong serve: %s\n", printable(describe_current_exception(), 2000).c_str());
    status = 2;
    while (!finished) {
      server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  listener.join();
  signal_thread.join();
  if (status == 0) std::fprintf(stderr, "luong serve: stopped\n");
  return status;
}

}  // namespace luong::cli
