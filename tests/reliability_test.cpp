// Overnight runs must survive bad files and killed processes: corrupt and mismatched checkpoints,
// SIGKILL at every step of a save, a diverging loss, and 10,000 hostile lines through translate.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <vector>

#include "luong/models/state_dict.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/json.h"
#include "command_runs.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) { return test::scratch_path("luong_reliability_test", name); }

using test::read_file;
using test::same_weights;

void write(const std::string& path, const std::string& bytes) { test::write_bytes(path, bytes); }

const std::string kSmall =
    "train --data builtin:numbers --train-size 256 --dev-size 32 --test-size 32 --hidden 24 --embed 12 --batch 32 "
    "--threads 1 ";

int run(const std::string& args, const std::string& log) {
  test::Subprocess process(args, log);
  return process.wait();
}

// `luong ARGS` killed by SIGKILL at its `point`-th save point (tests/crash_helper.cpp).
int run_killed_at(int point, const std::string& args, const std::string& log) {
  test::Subprocess process(std::to_string(point) + " " + args, log, {}, "/dev/null", "", LUONG_CRASH_HELPER);
  return process.wait();
}

using test::snapshot;


struct ReliabilitySuite {
  static constexpr const char* kFolder = "luong_reliability_test";
  static std::string training() { return kSmall + "--epochs 1"; }
};
class ReliabilityTest : public test::TrainedRunTest<ReliabilitySuite> {};

// One `luong: ...` line and exit status 2, with the run directory byte for byte unchanged.
void expect_clean_refusal(const std::string& args, const std::string& dir, const std::string& expected) {
  const auto before = snapshot(dir);
  const std::string log = dir + ".log";
  test::Subprocess process(args, log);
  const int status = process.wait();
  const std::string output = process.output();
  EXPECT_EQ(status, 2) << args << "\n" << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << args << "\n" << output;
  EXPECT_NE(output.find(expected), std::string::npos) << args << "\n" << output;
  EXPECT_TRUE(snapshot(dir) == before) << "the run directory changed: " << args;
}

// The checkpoints' and scratch directories' removal (remove_tree, not std::filesystem::remove_all:
// util/atomic_file.h says why).
TEST(RemoveTreeTest, RemovesANestedTreeButNotWhatItsLinksPointTo) {
  const fs::path root = scratch("remove_tree"), outside = scratch("remove_tree_outside");
  fs::create_directories(root / "a" / "b" / "c");
  fs::create_directories(outside);
  write((root / "a" / "one").string(), "1");
  write((root / "a" / "b" / "c" / "two").string(), "22");
  write((outside / "kept").string(), "333");
  fs::create_directory_symlink(outside, root / "a" / "b" / "link");
  EXPECT_FALSE(remove_tree(root.string()));
  EXPECT_FALSE(fs::exists(root));
  EXPECT_EQ(read_file((outside / "kept").string()), "333");
  EXPECT_FALSE(remove_tree(root.string())) << "a missing path is no error";
  write((outside / "file").string(), "4");
  EXPECT_FALSE(remove_tree((outside / "file").string()));
  EXPECT_FALSE(fs::exists(outside / "file"));
  EXPECT_TRUE(fs::exists(outside / "kept"));
}

TEST(RemoveTreeTest, ReportsWhatItCannotReach) {
  const fs::path root = scratch("remove_tree_file");
  fs::create_directories(root);
  write((root / "file").string(), "1");
  const std::error_code error = remove_tree((root / "file" / "below").string());
  EXPECT_EQ(error, std::errc::not_a_directory) << error.message();
  EXPECT_TRUE(fs::exists(root / "file"));
}

// The checkpoints' and models' reader: every byte of a regular file (empty, and one of 3 MB whose
// size is not a multiple of any buffer), of one whose size the kernel does not report
// (/proc/self/status says 0), nothing where it is missing, and a one-line error for a directory.
TEST(ReadWholeFileTest, ReadsEveryByteAndRefusesADirectory) {
  const fs::path root = scratch("read_whole_file");
  constexpr std::uint64_t kBound = std::uint64_t{16} << 20;
  fs::create_directories(root);
  std::string large(3 * 1024 * 1024 + 17, '\0');
  std::mt19937 random(5);
  for (char& c : large) c = static_cast<char>(random());
  write((root / "large").string(), large);
  write((root / "empty").string(), "");
  const std::optional<std::vector<char>> large_read = read_whole_file((root / "large").string(), kBound, "a test file");
  ASSERT_TRUE(large_read.has_value());
  EXPECT_EQ(std::string(large_read->begin(), large_read->end()), large);
  const std::optional<std::vector<char>> empty_read = read_whole_file((root / "empty").string(), kBound, "a test file");
  ASSERT_TRUE(empty_read.has_value());
  EXPECT_TRUE(empty_read->empty());
  const std::optional<std::vector<char>> status = read_whole_file("/proc/self/status", kBound, "a test file");
  ASSERT_TRUE(status.has_value());
  const std::string status_text(status->begin(), status->end());
  EXPECT_EQ(status_text.rfind("Name:", 0), 0u) << status_text.substr(0, 40);
  EXPECT_NE(status_text.find("VmRSS:"), std::string::npos) << "the whole of a file whose size reads as 0";
  EXPECT_FALSE(read_whole_file((root / "missing").string(), kBound, "a test file").has_value());
  try {
    read_whole_file(root.string(), kBound, "a test file");
    ADD_FAILURE() << "a directory was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read (a directory, not a regular file)"), std::string::npos) << e.what();
  }
}

TEST_F(ReliabilityTest, CorruptTruncatedOrMismatchedCheckpointsAreRefused) {
  {
    const std::string dir = copy_of_trained("truncated");
    for (const char* file : {"model.pt", "best_model.pt"}) {
      const std::string bytes = read_file(dir + "/" + file);
      write(dir + "/" + file, bytes.substr(0, bytes.size() / 2));
    }
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "corrupt or truncated checkpoint");
    expect_clean_refusal("translate --threads 1 --model " + dir, dir, "corrupt or truncated checkpoint");
  }
  {
    const std::string dir = copy_of_trained("flipped");
    std::string bytes = read_file(dir + "/best_model.pt");
    bytes[bytes.size() / 3] = static_cast<char>(bytes[bytes.size() / 3] ^ 0x40);  // inside a tensor record
    write(dir + "/best_model.pt", bytes);
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "CRC mismatch");
    // in the checkpoint, the manifest's checksum refuses it before the zip reader sees it
    std::string optimizer = read_file(dir + "/checkpoint/optimizer.pt");
    optimizer[optimizer.size() / 2] = static_cast<char>(optimizer[optimizer.size() / 2] ^ 0x01);
    write(dir + "/checkpoint/optimizer.pt", optimizer);
    expect_clean_refusal("train --resume --epochs 2 --threads 1 --out " + dir, dir, "checksum differs from the manifest");
  }
  {
    const std::string dir = copy_of_trained("garbage");
    write(dir + "/best_model.pt", "this is not a checkpoint\n");
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "best_model.pt");
  }
  {  // a vocabulary from another run: the embedding no longer fits
    const std::string dir = copy_of_trained("other_vocab");
    std::string vocab = read_file(dir + "/source.vocab");
    write(dir + "/source.vocab", vocab + "zebra\nquagga\n");
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "state_dict does not match the model");
  }
  {  // another architecture
    const std::string dir = copy_of_trained("other_architecture");
    Json config = Json::parse(read_file(dir + "/config.json"));
    config["hidden"] = 32;
    write(dir + "/config.json", config.dump(2));
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "mis-shaped");
    config["hidden"] = 24;
    config["attention"] = "local-p";
    write(dir + "/config.json", config.dump(2));
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "missing: decoder.attention");
  }
  {
    const std::string dir = copy_of_trained("missing_vocab");
    fs::remove(dir + "/target.vocab");
    expect_clean_refusal("evaluate --threads 1 --model " + dir, dir, "target.vocab");
  }
  {  // --resume from a damaged checkpoint: refused, and nothing in the run is touched
    const std::string dir = copy_of_trained("resume_corrupt");
    const std::string bytes = read_file(dir + "/checkpoint/optimizer.pt");
    write(dir + "/checkpoint/optimizer.pt", bytes.substr(0, bytes.size() - 100));
    expect_clean_refusal("train --resume --epochs 2 --threads 1 --out " + dir, dir, "optimizer.pt");
    const std::string dir2 = copy_of_trained("resume_truncated_model");
    write(dir2 + "/checkpoint/model.pt", read_file(dir2 + "/checkpoint/model.pt").substr(0, 200));
    expect_clean_refusal("train --resume --epochs 2 --threads 1 --out " + dir2, dir2, "checkpoint/model.pt");
  }
}

// The loader never crashes, however a checkpoint is cut short.
TEST_F(ReliabilityTest, EveryPrefixOfACheckpointIsRefusedCleanly) {
  const std::string bytes = read_file(trained() + "/model.pt");
  int refused = 0;
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    try {
      models::parse_state_dict(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)),
                               "prefix.pt");
    } catch (const CheckpointError&) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, static_cast<int>(bytes.size()));
  EXPECT_NO_THROW(models::parse_state_dict(std::vector<char>(bytes.begin(), bytes.end()), "whole.pt"));
}

// SIGKILL between every two steps of every save (the crash helper walks the save points): the last
// complete checkpoint always loads, and --resume (or a fresh start, before the first checkpoint;
// with --overwrite where the first epoch's model.pt was written before the kill) ends with the
// parameters of a run that was never killed.
TEST_F(ReliabilityTest, SigkillAtEverySavePointLeavesALoadableCheckpoint) {
  const std::string args = kSmall + "--epochs 2 --train-size 64 ";
  const std::string straight = scratch("kill_straight");
  ASSERT_EQ(run(args + "--out " + straight, straight + ".log"), 0) << read_file(straight + ".log");

  int kills = 0;
  for (int point = 1; point < 100; ++point) {
    const std::string dir = scratch("kill_at_" + std::to_string(point));
    const int status = run_killed_at(point, args + "--out " + dir, dir + ".log");
    if (status == 0) break;  // past the last kill point
    ASSERT_EQ(status, 128 + SIGKILL) << "kill point " << point << ": " << read_file(dir + ".log");
    ++kills;
    const std::string checkpoint = dir + "/checkpoint";
    if (fs::exists(checkpoint)) {
      EXPECT_NO_THROW(models::read_state_dict(checkpoint + "/model.pt", test::kStateDictBytes)) << "kill point " << point;
      EXPECT_NO_THROW(Json::parse(read_file(checkpoint + "/state.json"))) << "kill point " << point;
      const int resumed = run("train --resume --threads 1 --out " + dir, dir + ".resume.log");
      ASSERT_EQ(resumed, 0) << "kill point " << point << ": " << read_file(dir + ".resume.log");
    } else {
      const bool exported = fs::exists(dir + "/model.pt");
      const int restarted = run(args + (exported ? "--overwrite " : "") + "--out " + dir, dir + ".restart.log");
      ASSERT_EQ(restarted, 0) << "kill point " << point << ": " << read_file(dir + ".restart.log");
    }
    EXPECT_TRUE(same_weights(straight + "/model.pt", dir + "/model.pt")) << "kill point " << point;
    for (const auto& entry : fs::directory_iterator(dir)) {
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
          << "kill point " << point << " left " << entry.path();
    }
    luong::remove_tree(dir);
  }
  std::printf("killed at %d save points, every one recovered\n", kills);
  EXPECT_GE(kills, 10);
}

// A save that cannot write (a file-size limit that optimizer.pt, written as it is serialized, runs
// into part-way) fails the run with one line naming the file; the previous checkpoint is untouched,
// nothing temporary is left, and resuming without the limit goes on from it.
TEST_F(ReliabilityTest, SaveThatCannotWriteKeepsThePreviousCheckpoint) {
  const std::string dir = copy_of_trained("file_size_limit");
  const auto checkpoint_before = snapshot(dir + "/checkpoint");
  const auto optimizer_bytes = fs::file_size(dir + "/checkpoint/optimizer.pt");
  const auto model_bytes = fs::file_size(dir + "/checkpoint/model.pt");
  // In KiB (bash's ulimit -f): above model.pt, below optimizer.pt.
  const auto limit = (model_bytes + optimizer_bytes) / 2 / 1024;
  ASSERT_GT(limit * 1024, model_bytes);
  ASSERT_LT(limit * 1024, optimizer_bytes);
  const std::string command = "ulimit -f " + std::to_string(limit) + "; trap '' XFSZ; exec " + LUONG_BINARY +
                              " train --resume --epochs 2 --threads 1 --out " + dir;
  test::Subprocess limited({"-c", command}, dir + ".limited.log", {}, "/dev/null", "", "/bin/bash");
  EXPECT_EQ(limited.wait(), 2);
  const std::string output = limited.output();
  EXPECT_NE(output.find("optimizer.pt: write failed (File too large)"), std::string::npos) << output;
  EXPECT_TRUE(snapshot(dir + "/checkpoint") == checkpoint_before);
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << "left " << entry.path();
  }
  test::Subprocess resumed("train --resume --epochs 2 --threads 1 --out " + dir, dir + ".resume.log");
  EXPECT_EQ(resumed.wait(), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("resuming after epoch 1"), std::string::npos) << resumed.output();
}

// A diverging run stops at the first non-finite loss, names the batch, and keeps the last good
// checkpoint; resuming it with a sane learning rate goes on from there.
TEST_F(ReliabilityTest, NonFiniteLossStopsWithTheBatchAndKeepsTheCheckpoint) {
  const std::string dir = copy_of_trained("diverging");
  const auto checkpoint_before = snapshot(dir + "/checkpoint");
  const std::string model_before = read_file(dir + "/model.pt");
  test::Subprocess diverging("train --resume --epochs 2 --lr 1e38 --clip 0 --threads 1 --out " + dir, dir + ".log");
  EXPECT_EQ(diverging.wait(), 2);
  const std::string output = diverging.output();
  EXPECT_NE(output.find("non-finite loss at epoch 2 batch "), std::string::npos) << output;
  EXPECT_NE(output.find("(corpus lines "), std::string::npos) << output;
  EXPECT_NE(output.find("is kept"), std::string::npos) << output;
  EXPECT_TRUE(snapshot(dir + "/checkpoint") == checkpoint_before);
  EXPECT_EQ(read_file(dir + "/model.pt"), model_before);
  test::Subprocess resumed("train --resume --epochs 2 --threads 1 --out " + dir, dir + ".resume.log");
  EXPECT_EQ(resumed.wait(), 0) << resumed.output();
}

// 10,000 hostile lines: exit 0, one output line per input line, bounded memory.
TEST_F(ReliabilityTest, TranslateSurvivesTenThousandHostileLines) {
  const std::string dir = scratch("hostile");
  fs::create_directories(dir);
  std::mt19937 rng(20151127);
  const std::vector<std::string> words = {"one", "two", "three", "hundred", "thousand", "and", "seven", "xylophone"};
  const std::vector<std::string> scripts = {"日本語", "Ελληνικά", "हिन्दी", "🙂🚀", "ש", "ꦗꦮ", "\u200f\u202e", "𒀀"};
  std::string input;
  for (int i = 0; i < 10000; ++i) {
    std::string line;
    switch (i % 6) {
      case 0: break;  // empty
      case 1:         // 1,000 words
        for (int w = 0; w < 1000; ++w) line += words[rng() % words.size()] + (w % 97 == 0 ? "," : " ");
        break;
      case 2:  // only punctuation
        for (int c = 0; c < 1 + static_cast<int>(rng() % 40); ++c) line += "!?.,;:-\"'()[]{}…«»"[rng() % 17];
        break;
      case 3:  // unknown scripts
        for (int w = 0; w < 1 + static_cast<int>(rng() % 12); ++w) line += scripts[rng() % scripts.size()] + " ";
        break;
      case 4:  // invalid UTF-8 and control bytes
        for (int c = 0; c < 1 + static_cast<int>(rng() % 60); ++c) {
          char byte = static_cast<char>(rng() % 256);
          if (byte == '\n') byte = '\r';
          line += byte;
        }
        break;
      default:  // ordinary
        line = words[rng() % words.size()] + " " + words[rng() % words.size()];
    }
    input += line + "\n";
  }
  write(dir + "/input.txt", input);
  test::Subprocess translate("translate --threads 2 --model " + trained(), dir + "/stderr.log", {},
                             dir + "/input.txt", dir + "/output.txt");
  ASSERT_EQ(translate.wait(std::chrono::minutes(5)), 0) << translate.output();
  const std::string output = read_file(dir + "/output.txt");
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 10000);
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  std::printf("translate: 10,000 hostile lines, peak RSS of the largest child %.0f MiB\n", usage.ru_maxrss / 1024.0);
  EXPECT_LT(usage.ru_maxrss, test::kBoundedPeakKiB);
}

}  // namespace
}  // namespace luong
