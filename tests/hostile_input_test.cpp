// Hostile input, round two: every class of broken promise an adversarial user found, each as a test
// that the old binary failed. Every refusal is one `luong <command>: ...` line and exit status 2,
// with the run directory untouched.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "luong/util/atomic_file.h"
#include "luong/util/json.h"
#include "luong/util/threads.h"
#include "command_runs.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::snapshot;

std::string scratch(const std::string& name) { return test::scratch_path("luong_hostile_test", name); }
void write(const std::string& path, const std::string& bytes) { test::write_bytes(path, bytes); }

const std::string kSmall =
    "train --data builtin:numbers --train-size 128 --dev-size 16 --test-size 16 --hidden 16 --embed 8 --batch 32 "
    "--threads 1 ";

using test::Outcome;

Outcome run(const std::string& args, const std::string& log, const std::string& stdin_path = "/dev/null",
            const std::string& stdout_path = "") {
  return test::run_command(args, log, stdin_path, stdout_path);
}

// The checkpoint's manifest rewritten to vouch for `file` as it is now: what a forger must do to get
// past the checksums, so that the checks behind them are tested too.
void forge_manifest(const std::string& checkpoint, const std::string& file) {
  const std::string bytes = read_file(checkpoint + "/" + file);
  Json manifest = Json::parse(read_file(checkpoint + "/manifest.json"));
  manifest["files"][file]["bytes"] = bytes.size();
  manifest["files"][file]["crc32"] =
      ::crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
  write(checkpoint + "/manifest.json", manifest.dump(1));
}

class HostileInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new std::string(scratch("base"));
    other_seed_ = new std::string(scratch("other_seed"));
    other_size_ = new std::string(scratch("other_size"));
    // Not ASSERT here: gtest reports a fatal failure in SetUpTestSuite as skipped tests, and ctest then
    // counts them as skipped, not failed. SetUp fails each test instead.
    setup_failure_ = new std::string;
    for (const auto& [flags, dir] : {std::pair<std::string, std::string*>{"", base_}, {"--seed 5 ", other_seed_},
                                     {"--hidden 32 ", other_size_}}) {
      if (run(kSmall + "--epochs 1 " + flags + "--out " + *dir, *dir + ".log").status != 0) {
        *setup_failure_ += "training " + *dir + " failed: " + read_file(*dir + ".log");
      }
    }
  }
  void SetUp() override {
    if (!setup_failure_->empty()) FAIL() << *setup_failure_;
  }
  static void TearDownTestSuite() {
    luong::remove_tree(fs::path(*base_).parent_path());
    delete base_;
    delete other_seed_;
    delete other_size_;
    delete setup_failure_;
  }
  static std::string copy_of_base(const std::string& name) {
    const std::string dir = scratch(name);
    fs::copy(*base_, dir, fs::copy_options::recursive);
    return dir;
  }
  static std::string* base_;
  static std::string* other_seed_;
  static std::string* other_size_;
  static std::string* setup_failure_;
};
std::string* HostileInputTest::base_ = nullptr;
std::string* HostileInputTest::other_seed_ = nullptr;
std::string* HostileInputTest::other_size_ = nullptr;
std::string* HostileInputTest::setup_failure_ = nullptr;

void expect_one_line(const Outcome& outcome, const std::string& expected, const std::string& what) {
  EXPECT_EQ(outcome.status, 2) << what << "\n" << outcome.output;
  EXPECT_EQ(std::count(outcome.output.begin(), outcome.output.end(), '\n'), 1) << what << "\n" << outcome.output;
  EXPECT_NE(outcome.output.find(expected), std::string::npos) << what << "\n" << outcome.output;
  EXPECT_EQ(outcome.output.find('\033'), std::string::npos) << what;
}

// `luong train --resume` on a damaged run: refused, nothing in the run changed.
void expect_resume_refused(const std::string& dir, const std::string& expected, const std::string& what,
                           const std::string& flags = "") {
  const auto before = snapshot(dir);
  expect_one_line(run("train --resume --epochs 2 --threads 1 " + flags + " --out " + dir, dir + ".log"), expected, what);
  EXPECT_TRUE(snapshot(dir) == before) << what << ": the run directory changed";
}

// 1. An optimizer state from another run: refused, never a segfault.
TEST_F(HostileInputTest, ForeignOptimizerStateIsRefused) {
  for (const std::string* other : {other_seed_, other_size_}) {
    const std::string dir = copy_of_base("foreign_" + fs::path(*other).filename().string());
    fs::copy_file(*other + "/checkpoint/optimizer.pt", dir + "/checkpoint/optimizer.pt",
                  fs::copy_options::overwrite_existing);
    expect_resume_refused(dir, "optimizer.pt: ", *other);
    expect_resume_refused(dir, "the manifest says", *other);
  }
  // With a forged manifest the shapes still give it away (another hidden size).
  const std::string dir = copy_of_base("foreign_forged");
  fs::copy_file(*other_size_ + "/checkpoint/optimizer.pt", dir + "/checkpoint/optimizer.pt",
                fs::copy_options::overwrite_existing);
  forge_manifest(dir + "/checkpoint", "optimizer.pt");
  expect_resume_refused(dir, "but the parameter is", "forged manifest, other hidden size");
}

// 2. Damaged optimizer state: bytes flipped, or a shape patched with the manifest forged.
TEST_F(HostileInputTest, DamagedOptimizerStateIsRefused) {
  {
    const std::string dir = copy_of_base("xor64");
    std::string bytes = read_file(dir + "/checkpoint/optimizer.pt");
    for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
    write(dir + "/checkpoint/optimizer.pt", bytes);
    expect_resume_refused(dir, "checksum differs", "64 bytes XORed");
    forge_manifest(dir + "/checkpoint", "optimizer.pt");
    expect_resume_refused(dir, "optimizer.pt", "64 bytes XORed, manifest forged");
  }
  {  // the optimizer of a run with a larger vocabulary, vouched for by a forged manifest
    const std::string big = scratch("bigger_vocab");
    ASSERT_EQ(run(kSmall + "--epochs 1 --train-size 512 --out " + big, big + ".log").status, 0);
    const std::string dir = copy_of_base("bigger_vocab_optimizer");
    fs::copy_file(big + "/checkpoint/optimizer.pt", dir + "/checkpoint/optimizer.pt", fs::copy_options::overwrite_existing);
    forge_manifest(dir + "/checkpoint", "optimizer.pt");
    expect_resume_refused(dir, "but the parameter is", "larger vocabulary");
  }
  {  // a missing optimizer file, another zip in its place
    const std::string dir = copy_of_base("missing_optimizer");
    fs::remove(dir + "/checkpoint/optimizer.pt");
    expect_resume_refused(dir, "checkpoint/optimizer.pt: missing", "missing optimizer.pt");
    fs::copy_file(dir + "/checkpoint/model.pt", dir + "/checkpoint/optimizer.pt");
    forge_manifest(dir + "/checkpoint", "optimizer.pt");
    expect_resume_refused(dir, "is not an optimizer entry", "model.pt as optimizer.pt");
  }
}

// 3. state.json is read against a schema.
TEST_F(HostileInputTest, TrainerStateIsCheckedAgainstItsSchema) {
  const struct {
    const char* key;
    Json value;
    const char* expected;
  } cases[] = {
      {"epoch", -5, "'epoch' -5 is outside [0, 1]"},
      {"epoch", Json::parse("1180591620717411303424"), "'epoch' must be an integer"},
      {"batches_done", 1000000000, "'batches_done' 1000000000 is outside [0, 3]"},
      {"batches_done", -1, "'batches_done' -1 is outside"},
      {"history", "x", "'history' must be a list"},
      {"partial_loss", "NaN", "'partial_loss' must be a number"},
  };
  int index = 0;
  for (const auto& c : cases) {
    const std::string dir = copy_of_base("state_" + std::to_string(index++));
    Json state = Json::parse(read_file(dir + "/checkpoint/state.json"));
    state[c.key] = c.value;
    write(dir + "/checkpoint/state.json", state.dump(1));
    forge_manifest(dir + "/checkpoint", "state.json");
    expect_resume_refused(dir, c.expected, std::string(c.key) + " = " + c.value.dump());
  }
}

// 4. Two trainings into one --out started together: one runs, the other is told who holds it.
TEST_F(HostileInputTest, TwoTrainingsIntoOneDirectoryCannotMix) {
  for (int trial = 0; trial < 3; ++trial) {
    const std::string dir = scratch("race_" + std::to_string(trial));
    test::Subprocess a(kSmall + "--epochs 2 --out " + dir, dir + ".a.log");
    test::Subprocess b(kSmall + "--epochs 2 --seed 9 --out " + dir, dir + ".b.log");
    const int status_a = a.wait(), status_b = b.wait();
    const std::string output = a.output() + b.output();
    EXPECT_EQ(std::min(status_a, status_b), 0) << output;
    EXPECT_EQ(std::max(status_a, status_b), 2) << output;
    const bool lost_to_lock = output.find("in use by process") != std::string::npos;
    const bool lost_to_run = output.find("already holds a run") != std::string::npos;
    EXPECT_TRUE(lost_to_lock || lost_to_run) << output;
    // The directory is one run's: resuming it works.
    EXPECT_EQ(run("train --resume --epochs 3 --threads 1 --out " + dir, dir + ".resume.log").status, 0)
        << read_file(dir + ".resume.log");
  }
}

// 5. Memory stays bounded: a huge beam, a corpus without newlines, stdin without newlines.
TEST_F(HostileInputTest, MemoryIsBounded) {
  const std::string dir = scratch("memory");
  fs::create_directories(dir);
  expect_one_line(run("translate --beam 100000000 --model " + *base_, dir + "/beam.log"), "--beam 100000000 is outside [1, 64]",
                  "beam");
  expect_one_line(run(kSmall + "--data /dev/zero --out " + dir + "/zero", dir + "/zero.log"), "line longer than 1 MiB",
                  "/dev/zero corpus");
  // 20 MiB without a newline, then two ordinary lines: three outputs, the first empty, one warning.
  {
    std::ofstream input(dir + "/long.txt", std::ios::binary);
    const std::string block(1 << 20, '\0');
    for (int i = 0; i < 20; ++i) input << block;
    input << "\nseven\ntwelve\n";
  }
  const Outcome long_line = run("translate --threads 1 --model " + *base_, dir + "/long.log", dir + "/long.txt",
                                dir + "/long.out");
  EXPECT_EQ(long_line.status, 0) << long_line.output;
  EXPECT_NE(long_line.output.find("longer than 1 MiB"), std::string::npos) << long_line.output;
  const std::string out = read_file(dir + "/long.out");
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
  EXPECT_EQ(out.front(), '\n');
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  EXPECT_LT(usage.ru_maxrss, test::kBoundedPeakKiB);
}

// 6. Thread counts and tolerances are checked, on the command line and in config.json alike.
TEST_F(HostileInputTest, ThreadCountsAndTolerancesAreChecked) {
  const std::string dir = scratch("threads");
  fs::create_directories(dir);
  expect_one_line(run("translate --threads 100000 --model " + *base_, dir + "/a.log"), "--threads 100000 is outside [0, 1024]",
                  "threads");
  expect_one_line(run("cloze --threads -3", dir + "/b.log"), "--threads -3 is outside", "cloze threads");
  expect_one_line(run("gradcheck --tolerance -1", dir + "/c.log"), "--tolerance -1 is outside", "tolerance");
  const std::string config = dir + "/config.json";
  write(config, "{\"data\": \"builtin:numbers\", \"threads\": -1}");
  expect_one_line(run("train --config " + config + " --out " + dir + "/run", dir + "/d.log"),
                  "key 'threads': -1 is outside [0, 1024]", "config threads");
  const std::string above = std::to_string(available_cores() + 1);
  const Outcome many = run("translate --threads " + above + " --model " + *base_, dir + "/e.log");
  EXPECT_EQ(many.status, 0) << many.output;
  EXPECT_NE(many.output.find("warning: --threads " + above + " is more than the"), std::string::npos) << many.output;
}

// 7. Write errors are failures.
TEST_F(HostileInputTest, WriteErrorsAreReported) {
  const std::string dir = scratch("full");
  fs::create_directories(dir);
  write(dir + "/in.txt", "seven\n");
  expect_one_line(run("translate --threads 1 --model " + *base_, dir + "/a.log", dir + "/in.txt", "/dev/full"),
                  "stdout: write error", "translate >/dev/full");
  expect_one_line(run("trace --threads 1 --sentence seven --csv /dev/full --model " + *base_, dir + "/b.log", "/dev/null",
                      dir + "/b.out"),
                  "/dev/full: write failed", "trace --csv /dev/full");
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

// 8. LibTorch's own words never reach the user raw.
TEST_F(HostileInputTest, AllocationFailuresAndDtypeMismatchesAreOneLine) {
  const std::string dir = scratch("alloc");
  fs::create_directories(dir);
  expect_one_line(run(kSmall + "--epochs 1 --hidden 65536 --out " + dir + "/huge", dir + "/a.log"), "out of memory",
                  "--hidden 65536");
  const std::string run_dir = copy_of_base("float64_config");
  Json config = Json::parse(read_file(run_dir + "/config.json"));
  config["dtype"] = "float64";
  write(run_dir + "/config.json", config.dump(2));
  expect_resume_refused(run_dir, "checkpoint/model.pt", "float64 config.json over a float32 checkpoint");
}

// 9. Input echoed in messages is escaped: one line, no terminal escapes.
TEST_F(HostileInputTest, EchoedInputIsEscaped) {
  const std::string dir = scratch("echo");
  fs::create_directories(dir);
  const std::vector<std::vector<std::string>> cases = {
      {"train", "--data", "no\nsuch\033[31mfile", "--out", dir + "/a"},
      {"train", "--data", "builtin:numbers", "--attention", "do\nt\033[1m", "--out", dir + "/b"},
      {"evaluate", "--model", "/no/\033[2Jrun\nhere"}};
  for (const auto& args : cases) {
    test::Subprocess process(args, dir + "/x.log", {}, "/dev/null", "");
    const Outcome outcome{process.wait(), process.output(), 0};
    EXPECT_EQ(outcome.status, 2) << outcome.output;
    EXPECT_EQ(std::count(outcome.output.begin(), outcome.output.end(), '\n'), 1) << outcome.output;
    EXPECT_EQ(outcome.output.find('\033'), std::string::npos) << outcome.output;
  }
}

// 10. A run goes only into a missing or empty directory or one that holds a run.
TEST_F(HostileInputTest, OutMustBeEmptyOrARun) {
  const std::string dir = scratch("not_a_run");
  fs::create_directories(dir);
  write(dir + "/precious.txt", "do not touch\n");
  const auto before = snapshot(dir);
  expect_one_line(run(kSmall + "--epochs 1 --out " + dir, dir + ".log"), "not empty and not a luong run directory",
                  "--out non-empty");
  EXPECT_TRUE(snapshot(dir) == before);
  expect_one_line(run(kSmall + "--epochs 1 --out /", dir + ".root.log"), "/: not empty and not a luong run directory",
                  "--out /");
}

// 11. The smaller things.
TEST_F(HostileInputTest, SmallerThings) {
  const std::string dir = scratch("small");
  fs::create_directories(dir);
  expect_one_line(run("trace --sentence \xff\xfe --model " + *base_, dir + "/a.log"), "--sentence: invalid UTF-8",
                  "trace invalid UTF-8");
  expect_one_line(run(kSmall + "--epochs 0 --out " + dir + "/zero", dir + "/b.log"), "--epochs 0 is outside [1, ",
                  "--epochs 0");
  const Outcome small = run("train --data builtin:numbers --train-size 9990 --test-size 300 --dev-size 300 --hidden 8 "
                            "--embed 4 --epochs 1 --threads 1 --out " + dir + "/small",
                            dir + "/c.log");
  EXPECT_EQ(small.status, 0) << small.output;
  EXPECT_NE(small.output.find("warning: only"), std::string::npos) << small.output;
  const std::string resumed = copy_of_base("resume_flags");
  for (const std::string& flag : {std::string("--data builtin:numbers2"), std::string("--batch 16"),
                                  std::string("--seed 3"), std::string("--train-size 64"), std::string("--max-len 5")}) {
    expect_resume_refused(resumed, "--resume cannot change --" + flag.substr(2, flag.find(' ') - 2), flag, flag);
  }
  // --lr may change, and config.json records it with the epoch it took effect after.
  ASSERT_EQ(run("train --resume --epochs 2 --lr 0.0005 --threads 1 --out " + resumed, resumed + ".lr.log").status, 0)
      << read_file(resumed + ".lr.log");
  const Json config = Json::parse(read_file(resumed + "/config.json"));
  EXPECT_EQ(config["lr"].get<double>(), 0.0005);
  ASSERT_EQ(config["resumed"].size(), 1u);
  EXPECT_EQ(config["resumed"][0]["after_epoch"].get<int>(), 1);
  EXPECT_EQ(std::stod(config["resumed"][0]["changes"]["lr"][1].get<std::string>()), 0.0005);
}

}  // namespace
}  // namespace luong
