// Hostile input, round three, for whole runs: a resume that would silently change the experiment, a
// diverging last step, flag values misread, input whose buffering grew with the options. Each test
// failed on the binary before the fix (docs/RELIABILITY.md).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "luong/util/atomic_file.h"
#include "luong/util/json.h"
#include "command_runs.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::snapshot;

std::string scratch(const std::string& name) { return test::scratch_path("luong_hostile_runs_test", name); }
void write(const std::string& path, const std::string& bytes) { test::write_bytes(path, bytes); }

const std::string kTiny =
    "train --data builtin:numbers --dev-size 16 --test-size 16 --hidden 16 --embed 8 --batch 32 --threads 1 ";

using test::expect_refused;
using test::Outcome;

Outcome run(const std::string& args, const std::string& log, const std::string& stdin_path = "/dev/null",
            const std::string& stdout_path = "", const std::string& binary = LUONG_BINARY) {
  return test::run_command(args, log, stdin_path, stdout_path.empty() ? log + ".out" : stdout_path,
                           std::chrono::minutes(3), binary);
}

// A run of `args` for one epoch, and a copy of it for each case.
std::string trained(const std::string& name, const std::string& args) {
  const std::string dir = scratch(name);
  const Outcome outcome = run(args + "--epochs 1 --out " + dir, dir + ".log");
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  return dir;
}
std::string copy_of(const std::string& dir, const std::string& name) {
  const std::string copy = scratch(name);
  fs::copy(dir, copy, fs::copy_options::recursive);
  return copy;
}

// 1. config.json edited under a checkpoint, or the corpus replaced between runs: --resume would go on
// with another split (test pairs trained on). The checkpoint records what they were; a mismatch is
// refused by name.
TEST(HostileRunsTest, ResumeRefusesAnEditedConfigOrAChangedCorpus) {
  const std::string base = trained("base", kTiny + "--train-size 128 ");
  const std::string resume = "train --resume --epochs 2 --threads 1 --out ";
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{{"seed", 5}, {"train_size", 64}, {"max_len", 9}}) {
    const std::string dir = copy_of(base, "edited_" + key);
    Json config = Json::parse(read_file(dir + "/config.json"));
    const Json was = config[key];
    config[key] = value;
    write(dir + "/config.json", config.dump(2));
    const auto before = snapshot(dir);
    expect_refused(run(resume + dir, dir + ".log"),
                   "trained with " + key + " = " + was.dump() + ", but config.json now says " + value.dump(), key);
    EXPECT_TRUE(snapshot(dir) == before) << key;
  }
  // A corpus file of the run's own, changed in one pair after the first epoch.
  const std::string corpus = scratch("corpus.tsv");
  {
    std::ofstream out(corpus, std::ios::binary);
    std::mt19937 random(3);
    const char* words[] = {"one", "two", "three", "four", "five", "six"};
    const char* arabic[] = {"واحد", "اثنان", "ثلاثة", "أربعة", "خمسة", "ستة"};
    for (int line = 0; line < 400; ++line) {
      const int a = static_cast<int>(random() % 6), b = static_cast<int>(random() % 6);
      out << words[a] << ' ' << words[b] << '\t' << arabic[a] << ' ' << arabic[b] << '\n';
    }
  }
  const std::string from_file =
      trained("from_file", "train --data " + corpus + " --dev-size 16 --test-size 16 --train-size 128 --hidden 16 "
                                                      "--embed 8 --batch 32 --threads 1 ");
  const std::string unchanged = copy_of(from_file, "corpus_unchanged");
  EXPECT_EQ(run(resume + unchanged, unchanged + ".log").status, 0) << read_file(unchanged + ".log");
  std::string text = read_file(corpus);
  text.replace(text.find("one"), 3, "six");
  write(corpus, text);
  const auto before = snapshot(from_file);
  expect_refused(run(resume + from_file, from_file + ".log"), "the corpus is not the one the checkpoint was trained on",
                 "a changed corpus");
  EXPECT_TRUE(snapshot(from_file) == before);
}

// 2. The epoch's last optimizer step diverges (one batch an epoch; the last batch of an --accumulate
// group): the weights are not finite, so nothing is committed and the run ends with one line.
TEST(HostileRunsTest, ADivergingLastStepCommitsNothing) {
  for (const std::string& shape : {std::string("--train-size 32 "), std::string("--train-size 64 --accumulate 2 ")}) {
    const std::string dir = trained("diverging" + std::to_string(shape.size()), kTiny + shape);
    const auto before = snapshot(dir);
    expect_refused(run("train --resume --epochs 2 --lr 1e38 --clip 0 --threads 1 --out " + dir, dir + ".log"),
                   "weights are no longer finite after epoch 2", shape);
    EXPECT_TRUE(snapshot(dir) == before) << shape << ": the last good checkpoint and exports are kept";
    EXPECT_EQ(run("translate --threads 1 --model " + dir, dir + ".translate.log").status, 0);
  }
}

// 3. A flag's value is read whole or refused: `--flag=false` means false; numbers with trailing text,
// two numbers, hexadecimal, inf and nan are errors.
TEST(HostileRunsTest, FlagValuesAreParsedWhole) {
  const std::string dir = scratch("flags");
  const Outcome plain = run(kTiny + "--train-size 64 --epochs 1 --reverse=false --bidirectional=false --no-shuffle=false "
                                    "--out " + dir, dir + ".log");
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Json config = Json::parse(read_file(dir + "/config.json"));
  EXPECT_FALSE(config["reverse"].get<bool>());
  EXPECT_FALSE(config["bidirectional"].get<bool>());
  EXPECT_TRUE(config["shuffle"].get<bool>());
  expect_refused(run(kTiny + "--train-size 64 --epochs 2 --resume=false --out " + dir, dir + ".resume.log"),
                 "already holds a run", "--resume=false starts afresh");
  write(dir + ".in", "seven\n");
  const Outcome quiet = run("translate --threads 1 --stats=false --model " + dir, dir + ".stats.log", dir + ".in");
  EXPECT_EQ(quiet.status, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("sentences/s"), std::string::npos) << quiet.output;
  const std::vector<std::pair<std::string, std::string>> malformed = {
      {"--lr 2e-3x", "--lr: '2e-3x' is not a number"},
      {"--clip 5volts", "--clip: '5volts' is not a number"},
      {"--dropout 0.3,0.4", "--dropout: '0.3,0.4' is not a number"},
      {"--dropout 0x1p-3", "--dropout: '0x1p-3' is not a number"},
      {"--lr nan", "--lr: 'nan' is not a finite number"},
      {"--lr inf", "--lr: 'inf' is not a finite number"},
      {"--hidden 12.5", "--hidden: '12.5' is not an integer"},
      {"--hidden 0x10", "--hidden: '0x10' is not an integer"},
      {"--epochs 99999999999999999999", "--epochs: '99999999999999999999' is out of range"},
      {"--reverse=maybe", "maybe"}};
  for (const auto& [flag, expected] : malformed) {
    const std::string out = scratch("malformed");
    expect_refused(run(kTiny + "--train-size 64 " + flag + " --out " + out, out + ".log"), expected, flag);
    EXPECT_FALSE(fs::exists(out)) << flag;
  }
}

// 4. Buffers are bounded by bytes, not only lines: 300 input lines of 0.9 MiB once filled 16 batches
// of them at once (over 400 MB); now translate runs in less than 280 MB of data segment. evaluate
// cuts a pair of 20,000 words a side to the translator's limit instead of attending over all of it.
TEST(HostileRunsTest, LongLinesAreBufferedByBytes) {
  const std::string dir = trained("long_lines", kTiny + "--train-size 128 ");
  const std::string input = scratch("long.txt");
  {
    std::ofstream out(input, std::ios::binary);
    std::mt19937 random(1);
    const char* words[] = {"seven ", "twelve ", "three ", "one ", "nine "};
    for (int line = 0; line < 300; ++line) {
      std::string text;
      while (text.size() < 900000) text += words[random() % 5];
      out << text << '\n';
    }
  }
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's shadow memory counts against the data limit; the peak is checked below instead.
  const Outcome limited = run("translate --threads 1 --model " + dir, dir + ".log", input, dir + ".out");
#else
  const Outcome limited = run("--data=293601280 " + std::string(LUONG_BINARY) + " translate --threads 1 --model " + dir,
                              dir + ".log", input, dir + ".out", "/usr/bin/prlimit");
#endif
  EXPECT_EQ(limited.status, 0) << limited.output;
  const std::string out = read_file(dir + ".out");
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 300);
  fs::remove(input);

  const std::string pairs = scratch("long_pair.tsv");
  {
    std::ofstream tsv(pairs, std::ios::binary);
    for (int i = 0; i < 20000; ++i) tsv << (i % 2 ? "seven " : "twelve ");
    tsv << '\t';
    for (int i = 0; i < 20000; ++i) tsv << (i % 2 ? "سبعة " : "اثنا ");
    tsv << "\nseven\tسبعة\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const Outcome evaluated = run("evaluate --threads 1 --data " + pairs + " --model " + dir, dir + ".evaluate.log");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(evaluated.status, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find("1 pair longer than 400 tokens a side was cut there"), std::string::npos)
      << evaluated.output;
  EXPECT_LT(seconds, 60.0);
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  EXPECT_LT(usage.ru_maxrss, test::kBoundedPeakKiB);
}

}  // namespace
}  // namespace luong
