// luong serve over real sockets with a real client (cpp-httplib's): an in-process server on a free
// port, and the `luong serve` process itself for signals and schemathesis.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "command_runs.h"
#include "luong/serve/server.h"
#include "luong/util/json.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;
using test::read_file;

struct ServeSuite {
  static constexpr const char* kFolder = "luong_serve_test";
  static std::string training() {
    return "train --data builtin:numbers --train-size 2000 --dev-size 100 --test-size 200 --hidden 32 --embed 16 "
           "--batch 32 --threads 1 --epochs 4";
  }
};
class ServeTest : public test::TrainedRunTest<ServeSuite> {};

serve::ServeOptions on_a_free_port(serve::ServeOptions options) {
  options.port = 0;
  return options;
}

// A TranslationServer on a free port of 127.0.0.1, serving on a thread of its own.
class InProcessServer {
 public:
  explicit InProcessServer(const std::string& run, serve::ServeOptions options = {}, evaluation::SearchOptions search = {},
                           bool load = true)
      : registry_({serve::parse_model_spec(run)}, torch::kCPU, run::WeightsChoice::kBest),
        server_(on_a_free_port(options), search, registry_) {
    port_ = server_.bind();
    thread_ = std::thread([this] {
      server_.serve();
      finished_ = true;
    });
    if (load) server_.load_models();
  }
  ~InProcessServer() {
    while (!finished_) {
      server_.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(120, 0);
    return client;
  }
  serve::TranslationServer& server() { return server_; }
  int port() const { return port_; }

 private:
  serve::ModelRegistry registry_;
  serve::TranslationServer server_;
  int port_ = 0;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

std::vector<std::string> test_sources(const std::string& run, std::size_t count) {
  std::vector<std::string> out;
  std::ifstream in(run + "/test.tsv");
  for (std::string line; out.size() < count && std::getline(in, line);) out.push_back(line.substr(0, line.find('\t')));
  return out;
}

// `luong translate` over `sources`, one line each.
std::vector<std::string> translate_command(const std::string& run, const std::vector<std::string>& sources,
                                           const std::string& flags) {
  const std::string input = test::scratch_path(ServeSuite::kFolder, "translate.in");
  std::string text;
  for (const auto& s : sources) text += s + "\n";
  test::write_bytes(input, text);
  const test::Outcome outcome = test::run_command("translate --threads 1 " + flags + " --model " + run, input + ".log", input,
                                                  input + ".out");
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  std::vector<std::string> lines;
  std::ifstream in(input + ".out");
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A TCP connection to 127.0.0.1:port, or -1.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

// Sends `bytes` on a new connection and reads until the server closes it ("<open>" appended when
// it is still open after `wait`).
std::string exchange(int port, const std::string& bytes, std::chrono::milliseconds wait) {
  const int fd = connect_to(port);
  if (fd < 0) return "<no connection>";
  timeval timeout{static_cast<time_t>(wait.count() / 1000), static_cast<suseconds_t>(wait.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string received;
  if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) != 0;) {
      if (n < 0) {
        received += "<open>";
        break;
      }
      received.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return received;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

Json post(httplib::Client& client, const std::string& path, const Json& body, int expected_status = 200) {
  const auto result = client.Post(path.c_str(), dump_json(body), "application/json");
  EXPECT_TRUE(result) << path << ": " << httplib::to_string(result.error());
  if (!result) return Json();
  EXPECT_EQ(result->status, expected_status) << path << " " << dump_json(body) << " -> " << result->body;
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  return Json::parse(result->body);
}

// 1. A request's translations are luong translate's, the OpenNMT-py route's too.
TEST_F(ServeTest, TranslationsEqualTheTranslateCommand) {
  const std::vector<std::string> sources = test_sources(trained(), 200);
  const std::vector<std::string> expected = translate_command(trained(), sources, "--beam 5");
  InProcessServer running(trained());
  httplib::Client client = running.client();
  const Json answer = post(client, "/translate", {{"src", sources}, {"beam", 5}});
  ASSERT_EQ(answer["translations"].size(), sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(answer["translations"][i]["tgt"].get<std::string>(), expected[i]) << sources[i];
    EXPECT_TRUE(answer["translations"][i]["score"].is_number());
  }
  EXPECT_EQ(answer["model"].get<std::string>(), fs::path(trained()).filename().string());
  const std::vector<std::string> greedy = translate_command(trained(), sources, "");
  Json opennmt = Json::array();
  for (std::size_t i = 0; i < 5; ++i) opennmt.push_back({{"src", sources[i]}, {"id", 100}});
  const Json onmt = post(client, "/translator/translate", opennmt);
  ASSERT_EQ(onmt.size(), 1u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(onmt[0][i]["tgt"].get<std::string>(), greedy[i]);
    EXPECT_EQ(onmt[0][i]["src"].get<std::string>(), sources[i]);
  }
  const Json nbest = post(client, "/translate", {{"src", {sources[0]}}, {"beam", 4}, {"nbest", 9}, {"alignment", true}});
  EXPECT_EQ(nbest["translations"][0]["nbest"].size(), 4u) << "nbest is cut to the beam";
  EXPECT_TRUE(std::regex_match(nbest["translations"][0]["alignment"].get<std::string>(), std::regex("(\\d+-\\d+( |$))*")));
}

// 2. Concurrent clients' sentences share batches (the metrics count fewer searches than sentences), and
// each request gets its own translations in its own order.
TEST_F(ServeTest, ConcurrentRequestsShareBatchesAndKeepTheirOrder) {
  const std::vector<std::string> sources = test_sources(trained(), 96);
  const std::vector<std::string> expected = translate_command(trained(), sources, "--beam 3");
  serve::ServeOptions options;
  options.queue_timeout_ms = 50;
  InProcessServer running(trained(), options);
  std::atomic<int> wrong{0}, answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client = running.client();
      for (int r = 0; r < 3; ++r) {
        const std::size_t first = static_cast<std::size_t>(c * 6 + r * 2);
        const Json answer = post(client, "/translate", {{"src", {sources[first], sources[first + 1]}}, {"beam", 3}});
        for (std::size_t k = 0; k < 2; ++k) {
          if (!answer.contains("translations") || answer["translations"][k]["tgt"] != expected[first + k]) ++wrong;
        }
        ++answered;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(answered, 48);
  EXPECT_EQ(wrong, 0);
  const std::uint64_t batches = running.server().metrics().batches(), sentences = running.server().metrics().sentences();
  std::printf("96 sentences from 16 clients in %llu batched searches\n", static_cast<unsigned long long>(batches));
  EXPECT_EQ(sentences, 96u);
  EXPECT_LT(batches, 48u) << "requests did not share batches";
}

// 3. Every limit and every malformed request: a JSON error with its status, never a crash or a hang.
TEST_F(ServeTest, EveryLimitAndMalformedRequestIsAJsonError) {
  serve::ServeOptions options;
  options.max_body = 4096;
  options.max_sentences = 4;
  options.max_chars = 20;
  options.max_queue = 3;
  options.timeout = 1;
  InProcessServer running(trained(), options);
  httplib::Client client = running.client();
  const struct {
    std::string body;
    int status;
    std::string message;
  } cases[] = {
      {std::string(5000, ' '), 413, "larger than --max-body"},
      {"{\"src\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 400, "more than 4 a request"},
      {"{\"src\": [\"" + std::string(21, 'x') + "\"]}", 400, "more than 20 characters"},
      {"{\"src\": [\"seven\"", 400, "invalid JSON"},
      {"{\"src\": [\"\xff\xfe\"]}", 400, "invalid JSON"},
      {"[\"seven\"]", 400, "must be a JSON object"},
      {"{\"src\": \"seven\"}", 400, "'src' is required"},
      {"{\"src\": [7]}", 400, "src[0] must be a string"},
      {"{\"src\": [\"seven\"], \"bogus\": 1}", 400, "unknown key 'bogus'"},
      {"{\"src\": [\"seven\"], \"beam\": 65}", 400, "'beam': 65 is outside [1, 64]"},
      {"{\"src\": [\"seven\"], \"alpha\": \"high\"}", 400, "'alpha': expected a number"},
      {"{\"src\": [\"seven\"], \"batch\": 8}", 400, "cannot be set per request"},
      {"{\"src\": [\"seven\"], \"dictionary\": \"/etc/passwd\"}", 400, "reads no file a request names"},
      {"{\"src\": [\"seven\"], \"model\": \"other\"}", 400, "no model named 'other'"},
      {"{\"src\": [\"one\", \"two\", \"three\", \"four\"]}", 429, "the queue is full"},
      {std::string(100, '[') + std::string(100, ']'), 400, "nested deeper than 64 levels"}};
  for (const auto& c : cases) {
    const auto result = client.Post("/translate", c.body, "application/json");
    ASSERT_TRUE(result) << c.message;
    EXPECT_EQ(result->status, c.status) << c.message << ": " << result->body;
    const Json error = Json::parse(result->body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << result->body;
    EXPECT_EQ(error["status"].get<int>(), c.status);
    EXPECT_NE(error["error"].get<std::string>().find(c.message), std::string::npos) << result->body;
  }
  const auto get = client.Get("/translate");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  const auto missing = client.Get("/nowhere");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["status"].get<int>(), 404);
  // A client that stalls mid-body and one that leaves mid-request: the server drops them and serves on.
  for (const bool stall : {true, false}) {
    const int fd = connect_to(running.port());
    ASSERT_GE(fd, 0);
    const std::string partial = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"src\"";
    ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL), static_cast<ssize_t>(partial.size()));
    if (stall) {
      char byte;
      const auto start = std::chrono::steady_clock::now();
      EXPECT_LE(::recv(fd, &byte, 1, 0), 1);  // the server answers or closes once --timeout has passed
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    }
    ::close(fd);
    post(client, "/translate", {{"src", {"seven"}}});
  }
  const std::string metrics = client.Get("/metrics")->body;
  for (const char* kind : {"too_large", "too_many", "too_long", "bad_json", "unknown_field", "bad_option", "queue_full"}) {
    EXPECT_NE(metrics.find("luong_errors_total{kind=\"" + std::string(kind) + "\"}"), std::string::npos) << kind;
  }
}

// 3b. A body the HTTP library does not read (a GET's, an OPTIONS', a HEAD's, or after a request line
// it refuses) ends the connection after its answer: the bytes after it, here a reload, are never
// taken for a request. Requests without such a body keep their connection.
TEST_F(ServeTest, ABodyTheServerDoesNotReadEndsTheConnection) {
  InProcessServer running(trained());
  const std::string smuggled = "POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  const std::string length = "Content-Length: " + std::to_string(smuggled.size()) + "\r\n\r\n";
  const struct {
    std::string request;
    std::string status;
  } cases[] = {{"GET /health HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 200"},
               {"GET /nowhere HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 404"},
               {"OPTIONS /translate HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 405"},
               {"HEAD /health HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 200"},
               {"TRACE /health HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 405"},
               {"QUERY /health HTTP/1.1\r\nHost: x\r\n" + length + smuggled, "HTTP/1.1 405"},
               {"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                    std::to_string(smuggled.size()) + "\r\n" + smuggled + "\r\n0\r\n\r\n",
                "HTTP/1.1 200"}};
  for (const auto& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    const std::string received = exchange(running.port(), c.request, std::chrono::milliseconds(4000));
    const std::string what = c.request.substr(0, c.request.find('\r')) + " -> " + received;
    EXPECT_EQ(received.rfind(c.status, 0), 0u) << what;
    EXPECT_EQ(count_of(received, "HTTP/1.1 "), 1u) << what;
    EXPECT_NE(received.find("Connection: close"), std::string::npos) << what;
    EXPECT_EQ(received.find("<open>"), std::string::npos) << what;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3)) << what;
  }
  httplib::Client client = running.client();
  const std::string metrics = client.Get("/metrics")->body;
  EXPECT_EQ(metrics.find("luong_requests_total{route=\"/reload\""), std::string::npos) << "a smuggled request ran";
  // Requests without such a body keep their connection (httplib 0.11 reads one request at a time:
  // each is sent once the answer before it has come).
  const int fd = connect_to(running.port());
  ASSERT_GE(fd, 0);
  const std::string health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int request = 0; request < 3; ++request) {
    ASSERT_EQ(::send(fd, health.data(), health.size(), MSG_NOSIGNAL), static_cast<ssize_t>(health.size()));
    std::string answer;
    char buffer[4096];
    for (ssize_t n; answer.find('}') == std::string::npos && (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << "request " << request << ": " << answer;
    EXPECT_EQ(answer.find("Connection: close"), std::string::npos) << answer;
  }
  ::close(fd);
}

// 4. /health says ready only once the models are loaded; /models, /metrics and /openapi.json.
TEST_F(ServeTest, HealthModelsMetricsAndTheApiDocument) {
  InProcessServer running(trained(), {}, {}, /*load=*/false);
  httplib::Client client = running.client();
  EXPECT_EQ(client.Get("/health")->status, 503);
  EXPECT_EQ(Json::parse(client.Get("/health")->body)["status"], "loading");
  post(client, "/translate", {{"src", {"seven"}}}, 503);
  running.server().load_models();
  EXPECT_EQ(client.Get("/health")->status, 200);
  const Json models = Json::parse(client.Get("/models")->body);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["run"].get<std::string>(), trained());
  const auto metrics = client.Get("/metrics");
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  for (const char* family : {"luong_requests_total", "luong_sentences_total", "luong_queue_depth",
                             "luong_batch_sentences_bucket{le=\"+Inf\"}", "luong_request_duration_seconds_count",
                             "luong_model_loads_total{outcome=\"ok\"} 1"}) {
    EXPECT_NE(metrics->body.find(family), std::string::npos) << family;
  }
  const Json api = Json::parse(client.Get("/openapi.json")->body);
  EXPECT_EQ(api["openapi"], "3.0.3");
  EXPECT_EQ(api["paths"].size(), 7u);
  const Json& beam = api["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["beam"];
  EXPECT_EQ(beam["maximum"].get<int>(), 64) << "the search options come from their table";
}

// 4b. A burst of connections is queued, not dropped (httplib alone listens with a backlog of 5), and a
// second server on a port already served is refused (httplib alone binds it with SO_REUSEPORT).
TEST_F(ServeTest, ListensWithADeepBacklogAndAloneOnItsPort) {
  InProcessServer running(trained(), {}, {}, /*load=*/false);
  serve::ModelRegistry registry({serve::parse_model_spec(trained())}, torch::kCPU, run::WeightsChoice::kBest);
  serve::ServeOptions same_port;
  same_port.port = running.port();
  serve::TranslationServer second(same_port, {}, registry);
  EXPECT_THROW(second.bind(), Error) << "a second server bound port " << running.port();
  const std::string listing = test::scratch_path(ServeSuite::kFolder, "ss.txt");
  if (std::system(("ss -Hltn 'sport = :" + std::to_string(running.port()) + "' > " + listing).c_str()) != 0) {
    GTEST_SKIP() << "ss (iproute2) is not installed";
  }
  if (read_file(listing).empty()) GTEST_SKIP() << "ss lists no sockets here (no inet_diag)";
  int state_queue = -1, backlog = -1;
  std::string state;
  std::istringstream(read_file(listing)) >> state >> state_queue >> backlog;
  int somaxconn = 4096;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  EXPECT_EQ(backlog, std::min(1024, somaxconn)) << read_file(listing);
}

// 5. Reloads while clients translate: none fails; a broken checkpoint keeps the old model serving.
TEST_F(ServeTest, ReloadUnderLoadFailsNoRequest) {
  const std::string run = copy_of_trained("reloaded");
  InProcessServer running(run);
  std::atomic<bool> done{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      httplib::Client client = running.client();
      while (!done) {
        const auto result = client.Post("/translate", "{\"src\": [\"seven hundred\", \"twelve\"], \"beam\": 2}", "application/json");
        (result && result->status == 200 ? ok : failed)++;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client admin = running.client();
  const auto first = admin.Post("/reload", "", "application/json");
  EXPECT_EQ(first->status, 200) << first->body;
  const std::string weights = read_file(run + "/best_model.pt");
  test::write_bytes(run + "/best_model.pt", weights.substr(0, weights.size() / 2));
  const auto broken = admin.Post("/reload", "", "application/json");
  EXPECT_EQ(broken->status, 500);
  EXPECT_NE(broken->body.find("corrupt or truncated"), std::string::npos) << broken->body;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  test::write_bytes(run + "/best_model.pt", weights);
  EXPECT_EQ(admin.Post("/reload", "", "application/json")->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  done = true;
  for (auto& client : clients) client.join();
  std::printf("%d requests answered during 3 reloads, %d failed\n", ok.load(), failed.load());
  EXPECT_GT(ok, 0);
  EXPECT_EQ(failed, 0);
}

// `luong serve` started on a free port: the port it printed, once it says it is ready.
struct ServeProcess {
  explicit ServeProcess(const std::string& run, const std::string& log, const std::string& flags = "")
      : process("serve --threads 1 --port 0 " + flags + " --model " + run, log), log_path(log) {
    const std::regex listening("listening on http://127\\.0\\.0\\.1:(\\d+)/");
    for (int i = 0; i < 3000; ++i) {
      std::smatch match;
      const std::string text = process.output();
      if (port == 0 && std::regex_search(text, match, listening)) port = std::stoi(match[1]);
      if (port != 0 && text.find("luong serve: ready") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "luong serve did not get ready: " << process.output();
  }
  test::Subprocess process;
  std::string log_path;
  int port = 0;
};

// 6. SIGTERM under load: no new connections; every request the server began is answered (the access
// log's count equals the clients'), none with an error, and the process exits 0.
TEST_F(ServeTest, SigtermUnderLoadAnswersEveryRequestItRead) {
  const std::string log = scratch("sigterm.log");
  ServeProcess serving(trained(), log);
  ASSERT_NE(serving.port, 0);
  std::atomic<int> answered{0}, errors{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      for (;;) {
        httplib::Client client("127.0.0.1", serving.port);  // a connection per request
        const auto result = client.Post("/translate", "{\"src\": [\"three thousand\"], \"beam\": 2}", "application/json");
        if (!result) return;  // refused: the server no longer accepts
        (result->status == 200 ? answered : errors)++;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  serving.process.signal(SIGTERM);
  EXPECT_EQ(serving.process.wait(std::chrono::seconds(30)), 0) << serving.process.output();
  for (auto& client : clients) client.join();
  const std::string output = serving.process.output();
  std::size_t logged = 0;
  for (std::size_t at = 0; (at = output.find("POST /translate 200", at)) != std::string::npos; ++at) ++logged;
  std::printf("%d requests answered before and during SIGTERM\n", answered.load());
  EXPECT_GT(answered, 0);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(logged, static_cast<std::size_t>(answered.load())) << output.substr(output.size() - 500);
  EXPECT_NE(output.find("luong serve: stopped"), std::string::npos);
}

// 7. SIGHUP reloads; schemathesis, from the API document, finds no server error.
TEST_F(ServeTest, SighupReloadsAndSchemathesisFindsNoServerError) {
  const std::string log = scratch("schemathesis.log");
  ServeProcess serving(trained(), log, "--max-sentences 8 --max-chars 200");
  ASSERT_NE(serving.port, 0);
  serving.process.signal(SIGHUP);
  for (int i = 0; i < 500 && serving.process.output().find("SIGHUP: reloaded") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(serving.process.output().find("SIGHUP: reloaded {\"reloaded\":[\""), std::string::npos);
  const std::string schemathesis = fs::path(test::python()).parent_path().string() + "/schemathesis";
  const test::Outcome outcome = test::run_command(
      "run http://127.0.0.1:" + std::to_string(serving.port) + "/openapi.json -n 25 --seed 1 -w 1 "
      "--generation-database none",
      log + ".schemathesis", "/dev/null", "", std::chrono::seconds(300), schemathesis);
  EXPECT_EQ(outcome.status, 0) << outcome.output.substr(outcome.output.size() > 4000 ? outcome.output.size() - 4000 : 0);
  serving.process.signal(SIGTERM);
  EXPECT_EQ(serving.process.wait(std::chrono::seconds(30)), 0);
}

}  // namespace
}  // namespace luong
