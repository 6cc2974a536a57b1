#include "luong/serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>

#include "luong/serve/api.h"
#include "luong/serve/batcher.h"
#include "luong/util/error.h"

namespace luong::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Set as a request is routed, read as it is answered: each request is handled on one thread.
thread_local Clock::time_point request_start;
thread_local std::size_t request_sentences = 0;
thread_local double request_seconds = 0;

const char* kJson = "application/json";

// httplib listens with a backlog of 5: a burst of new connections beyond it waits out SYN
// retransmissions (1 s, 3 s, 7 s...). The kernel caps this at net.core.somaxconn.
constexpr int kListenBacklog = 1024;

// An exception's first line, printable and bounded, for a 500's body.
std::string first_line_of(const std::string& what) { return printable(what.substr(0, what.find('\n')), 300); }

void answer(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

// The routes and the method each answers.
constexpr std::pair<const char*, const char*> kRoutes[] = {
    {"/translate", "POST"}, {"/translator/translate", "POST"}, {"/reload", "POST"},      {"/health", "GET"},
    {"/models", "GET"},     {"/metrics", "GET"},               {"/openapi.json", "GET"}};

// A known route, or "other": a hostile client's paths must not become metric labels.
std::string route_label(const std::string& path) {
  for (const auto& [route, method] : kRoutes) {
    if (path == route) return route;
  }
  return "other";
}

// The method a known route answers ("" for another path).
std::string allowed_method(const std::string& path) {
  for (const auto& [route, method] : kRoutes) {
    if (path == route) return method;
  }
  return "";
}

bool method_allowed(const std::string& allowed, const std::string& method) {
  return method == allowed || (allowed == "GET" && method == "HEAD");
}

void method_not_allowed(httplib::Response& res, const std::string& allowed) {
  res.set_header("Allow", allowed == "GET" ? "GET, HEAD" : allowed);
  answer(res, 405, error_json(405, "use " + allowed + " on this route"));
}

// httplib 0.11 reads a request's body only for POST, PUT, PATCH and DELETE (and, after a malformed
// request line, not even the headers): bytes left unread would be taken for the connection's next
// request, a desync for the client and a smuggled request behind a proxy.
bool leaves_bytes_unread(const httplib::Request& req) {
  if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE") return false;
  const std::string length = req.get_header_value("Content-Length");
  return req.has_header("Transfer-Encoding") || !(length.empty() || length == "0");
}

// httplib closes a connection only when its client asked to or when writing a response fails, so
// the body goes out through a provider that reports failure once the whole body is written. A HEAD
// answer has no body to write: it is answered as a GET, on a connection about to close. (A server
// stopping writes no provider's body: such an answer then ends after its headers.)
void close_after_answering(const httplib::Request& req, httplib::Response& res) {
  res.headers.erase("Keep-Alive");
  res.headers.erase("Connection");
  res.set_header("Connection", "close");
  if (res.body.empty()) return;
  if (req.method == "HEAD") const_cast<httplib::Request&>(req).method = "GET";
  auto body = std::make_shared<std::string>(std::move(res.body));
  res.body.clear();
  const std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");
  res.headers.erase("Content-Length");
  res.set_header("Content-Length", std::to_string(body->size()));
  res.set_content_provider(body->size(), type, [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
    sink.write(body->data() + offset, length);
    return false;
  });
}

const char* default_message(int status) {
  switch (status) {
    case 400: return "malformed request";
    case 404: return "no such route (see GET /openapi.json)";
    case 405: return "method not allowed on this route";
    case 413: return "request body larger than --max-body";
    default: return "request failed";
  }
}

}  // namespace

struct TranslationServer::Impl {
  Impl(const ServeOptions& serve_options, const evaluation::SearchOptions& search_defaults, ModelRegistry& registry)
      : options(serve_options),
        defaults(search_defaults),
        limits{static_cast<std::size_t>(serve_options.max_sentences), static_cast<std::size_t>(serve_options.max_chars)},
        models(registry),
        batcher({serve_options.max_batch_tokens, std::chrono::milliseconds(serve_options.queue_timeout_ms),
                 static_cast<std::size_t>(serve_options.max_queue)},
                metrics) {}

  void configure();
  void configure_connections();
  void configure_handlers();
  void configure_routes();
  void fail(httplib::Response& res, const ApiError& error);
  std::vector<evaluation::Translation> run(const std::shared_ptr<ServedModel>& model, const TranslateRequest& request);
  void translate(const httplib::Request& req, httplib::Response& res);
  void translate_opennmt(const httplib::Request& req, httplib::Response& res);
  void health(httplib::Response& res) const;
  void reload(httplib::Response& res);
  void count_request(const httplib::Request& req, const httplib::Response& res);
  void access_log(const httplib::Request& req, const httplib::Response& res);

  ServeOptions options;
  evaluation::SearchOptions defaults;
  RequestLimits limits;
  ModelRegistry& models;
  Metrics metrics;
  Batcher batcher;
  httplib::Server http;
  int listening_socket = -1;
  std::atomic<bool> stopping{false};
};

void TranslationServer::Impl::fail(httplib::Response& res, const ApiError& error) {
  metrics.error(error.kind);
  answer(res, error.status, error_json(error.status, error.what()));
}

// The request's sentences through the batcher; each future brings its sentence's translation.
std::vector<evaluation::Translation> TranslationServer::Impl::run(const std::shared_ptr<ServedModel>& model,
                                                                  const TranslateRequest& request) {
  std::optional<Batcher::Futures> futures = batcher.submit(model, request.search, request.sources);
  if (!futures) {
    throw ApiError(stopping ? 503 : 429, stopping ? "stopping" : "queue_full",
                   stopping ? "the server is stopping" : "the queue is full (--max-queue); try again shortly");
  }
  std::vector<evaluation::Translation> out;
  try {
    for (auto& future : *futures) out.push_back(future.get());
  } catch (const std::exception& e) {
    throw ApiError(500, "search_failed", "the search failed: " + first_line_of(e.what()));
  }
  return out;
}

void TranslationServer::Impl::translate(const httplib::Request& req, httplib::Response& res) {
  const auto start = Clock::now();
  try {
    if (!models.loaded()) throw ApiError(503, "loading", "the models are still loading");
    const TranslateRequest request = parse_translate_request(req.body, defaults, limits);
    const std::shared_ptr<ServedModel> model = models.find(request.model);
    if (model == nullptr) throw ApiError(400, "bad_model", "no model named '" + printable(request.model) + "' (GET /models)");
    request_sentences = request.sources.size();
    const std::vector<evaluation::Translation> translations = run(model, request);
    Json list = Json::array();
    for (const auto& t : translations) list.push_back(translation_json(t, request, model->model.config.reverse_source));
    const double milliseconds = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    answer(res, 200, {{"translations", list}, {"model", model->spec.name}, {"elapsed_ms", milliseconds}});
  } catch (const ApiError& error) {
    fail(res, error);
  }
}

void TranslationServer::Impl::translate_opennmt(const httplib::Request& req, httplib::Response& res) {
  try {
    if (!models.loaded()) throw ApiError(503, "loading", "the models are still loading");
    const std::vector<OpenNmtInput> groups = parse_opennmt_request(req.body, defaults, limits);
    std::size_t inputs = 0;
    for (const OpenNmtInput& group : groups) inputs += group.positions.size();
    // One list per n-best rank, each with an answer per input in its order (OpenNMT-py's server).
    Json best = Json::array();
    for (std::size_t i = 0; i < inputs; ++i) best.push_back(Json::object());
    for (const OpenNmtInput& group : groups) {
      const std::shared_ptr<ServedModel> model = models.at(group.model_id);
      request_sentences += group.request.sources.size();
      const std::vector<evaluation::Translation> translations = run(model, group.request);
      for (std::size_t i = 0; i < translations.size(); ++i) {
        best[group.positions[i]] = {{"src", group.request.sources[i]},
                                    {"tgt", translations[i].text},
                                    {"n_best", 1},
                                    {"pred_score", translations[i].nbest.empty() ? 0.0 : translations[i].hypothesis.score}};
      }
    }
    answer(res, 200, Json::array({best}));
  } catch (const ApiError& error) {
    fail(res, error);
  }
}

void TranslationServer::Impl::health(httplib::Response& res) const {
  if (stopping) return answer(res, 503, {{"status", "stopping"}});
  if (!models.loaded()) return answer(res, 503, {{"status", "loading"}});
  Json names = Json::array();
  for (const auto& model : models.all()) names.push_back(model->spec.name);
  answer(res, 200, {{"status", "ready"}, {"models", names}});
}

void TranslationServer::Impl::reload(httplib::Response& res) {
  if (!models.loaded()) return fail(res, ApiError(503, "loading", "the models are still loading"));
  const Json outcome = models.reload();
  for (std::size_t i = 0; i < outcome["reloaded"].size(); ++i) metrics.model_load(true);
  for (const auto& failed : outcome["failed"].items()) {
    metrics.model_load(false);
    std::fprintf(stderr, "luong serve: reloading %s failed, its old weights still serve: %s\n", failed.key().c_str(),
                 printable(failed.value().get<std::string>(), 2000).c_str());
  }
  answer(res, outcome["failed"].empty() ? 200 : 500, outcome);
}

// Counted before the response is written (httplib's post-routing handler runs for every response,
// errors included), so a client that has its answer finds it in /metrics.
void TranslationServer::Impl::count_request(const httplib::Request& req, const httplib::Response& res) {
  // A request httplib refused before routing never set its start.
  const bool routed = request_start != Clock::time_point{};
  request_seconds = routed ? std::chrono::duration<double>(Clock::now() - request_start).count() : 0.0;
  request_start = Clock::time_point{};
  metrics.request(route_label(req.path), res.status, request_sentences, request_seconds);
}

void TranslationServer::Impl::access_log(const httplib::Request& req, const httplib::Response& res) {
  std::fprintf(stderr, "luong serve: %s %s %d %zu %.1f ms\n", printable(req.method, 16).c_str(),
               printable(req.path, 120).c_str(), res.status, request_sentences, 1000 * request_seconds);
  request_sentences = 0;
}

void TranslationServer::Impl::configure() {
  configure_connections();
  configure_handlers();
  configure_routes();
}

void TranslationServer::Impl::configure_connections() {
  const std::size_t threads = static_cast<std::size_t>(options.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(static_cast<std::size_t>(options.max_body));
  http.set_read_timeout(static_cast<time_t>(options.timeout), 0);
  http.set_write_timeout(static_cast<time_t>(options.timeout), 0);
  http.set_keep_alive_max_count(1000);
  // Instead of httplib's SO_REUSEPORT, which lets a second server bind a port already served and
  // take half its connections: SO_REUSEADDR binds past connections in TIME_WAIT only.
  http.set_socket_options([this](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening_socket = sock;
  });
  http.set_tcp_nodelay(true);  // a response's headers and body go out at once, not a delayed ACK apart
}

// What runs around every route: timing and counting, the access log, httplib's refusals, exceptions.
void TranslationServer::Impl::configure_handlers() {
  http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    request_start = Clock::now();
    request_sentences = 0;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    count_request(req, res);
    if (leaves_bytes_unread(req)) close_after_answering(req, res);
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) { access_log(req, res); });
  // httplib's own refusals (404, 413, a malformed request line) get a JSON body like ours, and end
  // the connection: what follows a request httplib could not read cannot be trusted as a request.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // httplib refuses a method it does not know (TRACE, QUERY: no path parsed, only the target) or a
    // PUT without a body before routing.
    const std::string allowed = allowed_method(req.path.empty() ? req.target.substr(0, req.target.find('?')) : req.path);
    if (res.status == 400 && !allowed.empty() && !method_allowed(allowed, req.method)) {
      metrics.error("bad_method");
      method_not_allowed(res, allowed);
    } else {
      metrics.error(res.status == 413 ? "too_large" : res.status == 404 ? "not_found" : "bad_request");
      answer(res, res.status, error_json(res.status, default_message(res.status)));
    }
    close_after_answering(req, res);
  });
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    metrics.error("internal");
    answer(res, 500, error_json(500, first_line_of(what)));
  });
}

void TranslationServer::Impl::configure_routes() {
  // Every other method on a known route: 405, answered by a route handler so that its body is read
  // first (answered before routing, the unread body would be taken for the connection's next request).
  for (const auto& [route, method] : kRoutes) {
    const std::string allowed = method;
    const auto refuse = [this, allowed](const httplib::Request&, httplib::Response& res) {
      metrics.error("bad_method");
      method_not_allowed(res, allowed);
    };
    if (allowed != "GET") http.Get(route, refuse);
    if (allowed != "POST") http.Post(route, refuse);
    http.Put(route, refuse);
    http.Patch(route, refuse);
    http.Delete(route, refuse);
    http.Options(route, refuse);
  }
  http.Post("/translate", [this](const httplib::Request& req, httplib::Response& res) { translate(req, res); });
  http.Post("/translator/translate", [this](const httplib::Request& req, httplib::Response& res) { translate_opennmt(req, res); });
  http.Post("/reload", [this](const httplib::Request&, httplib::Response& res) { reload(res); });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  http.Get("/models", [this](const httplib::Request&, httplib::Response& res) {
    Json list = Json::array();
    for (const auto& model : models.all()) list.push_back(model->describe());
    answer(res, 200, list);
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(metrics.exposition(), "text/plain; version=0.0.4");
  });
  http.Get("/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    std::vector<std::string> names;
    for (const auto& model : models.all()) names.push_back(model->spec.name);
    answer(res, 200, openapi_document(defaults, limits, names));
  });
}

TranslationServer::TranslationServer(const ServeOptions& options, const evaluation::SearchOptions& search,
                                     ModelRegistry& models)
    : impl_(std::make_unique<Impl>(options, search, models)) {
  impl_->configure();
}

TranslationServer::~TranslationServer() {
  stop();
  impl_->batcher.stop();
}

int TranslationServer::bind() {
  const ServeOptions& options = impl_->options;
  const int port = options.port == 0 ? impl_->http.bind_to_any_port(options.host)
                                     : (impl_->http.bind_to_port(options.host, static_cast<int>(options.port))
                                            ? static_cast<int>(options.port)
                                            : -1);
  if (port < 0) {
    throw Error("cannot listen on " + printable(options.host) + ":" + std::to_string(options.port) +
                " (in use, or not an address of this machine)");
  }
  ::listen(impl_->listening_socket, kListenBacklog);  // a listening socket takes a new backlog
  return port;
}

void TranslationServer::serve() { impl_->http.listen_after_bind(); }

void TranslationServer::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

void TranslationServer::load_models() {
  try {
    impl_->models.load();
  } catch (...) {
    impl_->metrics.model_load(false);
    throw;
  }
  impl_->metrics.model_load(true);
}

Json TranslationServer::reload() {
  httplib::Response res;
  impl_->reload(res);
  return Json::parse(res.body);
}

const Metrics& TranslationServer::metrics() const { return impl_->metrics; }

}  // namespace luong::serve
