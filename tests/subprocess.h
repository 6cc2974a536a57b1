#pragma once
// `luong` running in the background: the tests that signal, kill or pair up processes.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace luong::test {

class Subprocess {
 public:
  /// Starts `binary` (luong itself unless said) with the whitespace-separated `args`; stdout and stderr go to `log`
  /// (stdout alone to `stdout_path` when given), stdin comes from `stdin_path`, and `environment`
  /// ("NAME=value" entries) is added to the test's own.
  Subprocess(const std::string& args, std::string log, const std::vector<std::string>& environment = {},
             const std::string& stdin_path = "/dev/null", const std::string& stdout_path = "",
             const std::string& binary = LUONG_BINARY)
      : Subprocess(split(args), std::move(log), environment, stdin_path, stdout_path, binary) {}

  /// As above with the arguments as they are (they may hold spaces and newlines).
  Subprocess(const std::vector<std::string>& args, std::string log, const std::vector<std::string>& environment,
             const std::string& stdin_path, const std::string& stdout_path, const std::string& binary = LUONG_BINARY)
      : log_(std::move(log)) {
    std::vector<std::string> words = {binary};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (stdout_path.empty()) {
      posix_spawn_file_actions_adddup2(&actions, 2, 1);
    } else {
      posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
    std::vector<std::string> variables = environment;
    for (char** variable = environ; *variable != nullptr; ++variable) variables.emplace_back(*variable);
    std::vector<char*> envp;
    for (auto& v : variables) envp.push_back(v.data());
    envp.push_back(nullptr);
    const int failed = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (failed != 0) throw std::runtime_error("cannot start " + binary);
  }
  ~Subprocess() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  void signal(int number) { ::kill(pid_, number); }

  /// Waits up to `limit` for the process to end; returns its exit status, 128 + signal if a
  /// signal ended it, or -1 if it is still running at the deadline.
  int wait(std::chrono::milliseconds limit = std::chrono::minutes(5)) {
    if (reaped_) return status_;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      ::usleep(10000);
    }
  }

  static std::vector<std::string> split(const std::string& args) {
    std::vector<std::string> words;
    std::istringstream in(args);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
  }

  /// Everything the process has written so far.
  std::string output() const {
    std::ifstream in(log_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

}  // namespace luong::test
