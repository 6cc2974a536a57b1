#pragma once
// What the tests that run `luong` as a user would share: scratch directories per process, a command
// run to its end (or killed at a limit), the one-line refusal they expect, and a suite that trains
// one small run for all its tests to copy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "luong/util/atomic_file.h"
#include "run_files.h"
#include "subprocess.h"

namespace luong::test {

/// A fresh path under the temporary directory, per suite and process (ctest runs each test in a
/// process of its own, in parallel): removed if it exists, its parent created.
inline std::string scratch_path(const std::string& suite, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path path = fs::temp_directory_path() / suite / std::to_string(::getpid()) / name;
  luong::remove_tree(path.string());
  fs::create_directories(path.parent_path());
  return path.string();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Outcome {
  int status;  ///< exit status; -1 if it ran past the limit (and was killed)
  std::string output;
  double seconds;
};

/// `args` run to its end or killed after `limit`; its stderr in `output`, with its stdout unless
/// `stdout_path` names a file for it.
inline Outcome run_command(const std::string& args, const std::string& log, const std::string& stdin_path = "/dev/null",
                           const std::string& stdout_path = "", std::chrono::seconds limit = std::chrono::seconds(180),
                           const std::string& binary = LUONG_BINARY) {
  const auto start = std::chrono::steady_clock::now();
  Subprocess process(args, log, {}, stdin_path, stdout_path, binary);
  const int status = process.wait(limit);
  return {status, process.output(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

/// Exit status 2, `expected` on the last line (train prints its start line first), and none of
/// LibTorch's own text.
inline void expect_refused(const Outcome& outcome, const std::string& expected, const std::string& what) {
  EXPECT_EQ(outcome.status, 2) << what << "\n" << outcome.output;
  const std::string& text = outcome.output;
  const std::size_t start = text.size() < 2 ? std::string::npos : text.rfind('\n', text.size() - 2);
  EXPECT_NE(text.substr(start == std::string::npos ? 0 : start + 1).find(expected), std::string::npos)
      << what << "\n" << text;
  EXPECT_EQ(text.find("Exception raised"), std::string::npos) << what << "\n" << text;
}

/// A suite whose tests share one small run, trained once per process: `Suite` names the scratch
/// folder (`kFolder`) and the training flags (`training()`, without --out).
template <typename Suite>
class TrainedRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trained_ = scratch_path(Suite::kFolder, "trained");
    // Not ASSERT: gtest reports a fatal failure here as skipped tests, which ctest counts as skipped.
    const Outcome outcome = run_command(Suite::training() + " --out " + trained_, trained_ + ".log");
    setup_failure_ = outcome.status == 0 ? "" : "exit status " + std::to_string(outcome.status) + ": " + outcome.output;
  }
  void SetUp() override {
    if (!setup_failure_.empty()) FAIL() << "training the shared run failed: " << setup_failure_;
  }
  static void TearDownTestSuite() { luong::remove_tree(std::filesystem::path(trained_).parent_path().string()); }

 public:
  static std::string scratch(const std::string& name) { return scratch_path(Suite::kFolder, name); }
  /// A copy of the trained run, to be damaged.
  static std::string copy_of_trained(const std::string& name) {
    const std::string dir = scratch(name);
    std::filesystem::copy(trained_, dir, std::filesystem::copy_options::recursive);
    return dir;
  }
  static const std::string& trained() { return trained_; }

 private:
  static inline std::string trained_;
  static inline std::string setup_failure_;
};

}  // namespace luong::test
