// Hostile input, round three: links and hard links where a run writes, readers pointed at devices,
// FIFOs and huge files, nested pickles and JSON, tensors whose views outgrow their storage, archives
// of another byte order, weights that are not floating-point or not finite, a trained model in the
// way of a fresh run. Each test failed on the binary before the fix (docs/RELIABILITY.md).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "luong/models/state_dict.h"
#include "luong/models/zip_archive.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/json.h"
#include "command_runs.h"
#include "test_paths.h"

namespace luong {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using test::read_file;
using test::snapshot;

void write(const std::string& path, const std::string& bytes) { test::write_bytes(path, bytes); }

const std::string kSmall =
    "train --data builtin:numbers --train-size 128 --dev-size 16 --test-size 16 --hidden 16 --embed 8 --batch 32 "
    "--threads 1 ";

struct HostileFilesSuite {
  static constexpr const char* kFolder = "luong_hostile_files_test";
  static std::string training() { return kSmall + "--epochs 1"; }
};
class HostileFilesTest : public test::TrainedRunTest<HostileFilesSuite> {};


using test::expect_refused;
using test::Outcome;

Outcome run(const std::string& args, const std::string& log, const std::string& stdin_path = "/dev/null",
            std::chrono::seconds limit = std::chrono::seconds(120)) {
  return test::run_command(args, log, stdin_path, log + ".out", limit);
}

// 1. Nothing a run writes goes through a symbolic link or into a hard-linked file: the lock on a
// fresh run and on --resume, an export, a checkpoint file, the checkpoint itself. The file the link
// points at keeps its bytes.
TEST_F(HostileFilesTest, LinksInARunDirectoryAreNeverWrittenThrough) {
  const std::string victim = scratch("victim.txt");
  write(victim, "precious\n");
  const auto expect_untouched = [&](const Outcome& outcome, const std::string& expected, const std::string& what) {
    expect_refused(outcome, expected, what);
    EXPECT_EQ(read_file(victim), "precious\n") << what;
  };
  {  // a fresh run into a directory whose only entry is a .lock pointing elsewhere
    const std::string dir = scratch("fresh_lock");
    fs::create_directories(dir);
    fs::create_symlink(victim, dir + "/.lock");
    expect_untouched(run(kSmall + "--epochs 1 --out " + dir, dir + ".log"), ".lock: is a symbolic link", "fresh");
  }
  const std::string resume = "train --resume --epochs 2 --threads 1 --out ";
  {
    const std::string dir = copy_of_trained("resume_lock");
    fs::remove(dir + "/.lock");
    fs::create_symlink(victim, dir + "/.lock");
    expect_untouched(run(resume + dir, dir + ".log"), ".lock: is a symbolic link", "resume, symlinked lock");
  }
  {
    const std::string dir = copy_of_trained("hard_lock");
    fs::remove(dir + "/.lock");
    fs::create_hard_link(victim, dir + "/.lock");
    expect_untouched(run(resume + dir, dir + ".log"), ".lock: has 2 hard links", "resume, hard-linked lock");
  }
  for (const char* file : {"model.pt", "loss.png", "best_model.pt"}) {
    const std::string dir = copy_of_trained(std::string("export_") + file);
    fs::remove(dir + "/" + file);
    fs::create_symlink(victim, dir + "/" + file);
    const auto before = snapshot(dir);
    const Outcome outcome = run(resume + dir, dir + ".log");
    expect_untouched(outcome, std::string(file) + ": is a symbolic link", file);
    EXPECT_EQ(outcome.output.find("epoch 2/2"), std::string::npos) << "refused before training:\n" << outcome.output;
    EXPECT_TRUE(snapshot(dir) == before) << file;
  }
  {  // a checkpoint file linked elsewhere is read (and refused: its checksum), never written
    const std::string dir = copy_of_trained("checkpoint_file");
    fs::remove(dir + "/checkpoint/optimizer.pt");
    fs::create_symlink(victim, dir + "/checkpoint/optimizer.pt");
    expect_untouched(run(resume + dir, dir + ".log"), "optimizer.pt", "checkpoint/optimizer.pt linked");
  }
  {  // the checkpoint directory itself a link to another run's
    const std::string other = copy_of_trained("checkpoint_target");
    const std::string dir = copy_of_trained("checkpoint_link");
    remove_tree(dir + "/checkpoint");
    fs::create_directory_symlink(other + "/checkpoint", dir + "/checkpoint");
    const auto before = snapshot(other);
    expect_refused(run(resume + dir, dir + ".log"), "checkpoint: is a symbolic link", "checkpoint/ linked");
    EXPECT_TRUE(snapshot(other) == before);
  }
  {  // a FIFO where the learning curve goes would block the run at its first epoch's end
    const std::string dir = copy_of_trained("fifo_curve");
    fs::remove(dir + "/loss.csv");
    ASSERT_EQ(::mkfifo((dir + "/loss.csv").c_str(), 0644), 0);
    expect_refused(run(resume + dir, dir + ".log", "/dev/null", std::chrono::seconds(60)), "loss.csv: is a FIFO",
                   "FIFO loss.csv");
  }
}

// 2. A directory holding a trained model (here only what an export leaves: config.json, model.pt,
// best_model.pt) is not trained over unless --overwrite says so; --overwrite removes that run's files.
TEST_F(HostileFilesTest, ATrainedModelIsReplacedOnlyWithOverwrite) {
  const std::string dir = scratch("exported");
  fs::create_directories(dir);
  for (const char* file : {"config.json", "model.pt", "best_model.pt"}) fs::copy_file(trained() + "/" + file, dir + "/" + file);
  const auto before = snapshot(dir);
  expect_refused(run(kSmall + "--epochs 1 --seed 7 --out " + dir, dir + ".log"), "already holds a run (model.pt)",
                 "exported model");
  EXPECT_TRUE(snapshot(dir) == before);
  expect_refused(run("train --resume --overwrite --threads 1 --out " + dir, dir + ".both.log"),
                 "--overwrite starts the run afresh", "--overwrite with --resume");
  write(dir + "/notes.txt", "mine\n");
  const Outcome replaced = run(kSmall + "--epochs 1 --seed 7 --overwrite --out " + dir, dir + ".overwrite.log");
  ASSERT_EQ(replaced.status, 0) << replaced.output;
  EXPECT_EQ(read_file(dir + "/notes.txt"), "mine\n") << "a file luong does not name is left alone";
  EXPECT_FALSE(test::same_weights(trained() + "/model.pt", dir + "/model.pt"));
  EXPECT_EQ(Json::parse(read_file(dir + "/config.json"))["seed"].get<int>(), 7);
}

// 3. Every file a command reads whole is checked first: a device or FIFO in its place is refused at
// once (no hang, no reading /dev/zero into memory), a file larger than its format can hold too.
TEST_F(HostileFilesTest, EveryReaderRefusesDevicesFifosAndHugeFiles) {
  const std::string huge = scratch("huge.bin");
  {  // 3 GB, sparse
    std::ofstream out(huge, std::ios::binary);
    out.seekp((std::int64_t{3} << 30) - 1);
    out.put('\0');
  }
  struct Case {
    const char* file;     // in the run directory
    const char* command;  // "translate" or "resume"
  };
  const Case cases[] = {{"best_model.pt", "translate"},         {"config.json", "translate"},
                        {"source.vocab", "translate"},          {"target.vocab", "translate"},
                        {"target.truecase", "translate"},       {"checkpoint/model.pt", "resume"},
                        {"checkpoint/optimizer.pt", "resume"},  {"checkpoint/rng.pt", "resume"},
                        {"checkpoint/state.json", "resume"},    {"checkpoint/manifest.json", "resume"}};
  int index = 0;
  for (const Case& c : cases) {
    for (const std::string kind : {"zero", "fifo", "huge"}) {
      const std::string dir = copy_of_trained("reader_" + std::to_string(index++));
      const std::string path = dir + "/" + c.file;
      fs::remove(path);
      if (kind == "zero") fs::create_symlink("/dev/zero", path);
      if (kind == "huge") fs::create_symlink(huge, path);
      if (kind == "fifo") {
        ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
      }
      const std::string args = std::string(c.command) == "translate" ? "translate --threads 1 --model " + dir
                                                                     : "train --resume --epochs 2 --threads 1 --out " + dir;
      const std::string what = std::string(c.file) + " as " + kind;
      const Outcome outcome = run(args, dir + ".log", "/dev/null", std::chrono::seconds(60));
      const std::string expected = kind == "huge"   ? "larger than"
                                   : kind == "fifo" ? "a FIFO, not a regular file"
                                                    : "a character device, not a regular file";
      expect_refused(outcome, expected, what);
      EXPECT_LT(outcome.seconds, 30.0) << what;
    }
  }
  // The files a user names that are read whole: --config and --dictionary.
  const std::string fifo = scratch("named.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo, huge}) {
    const std::string dir = scratch("named_files");
    const std::string expected = path == huge ? "larger than" : "not a regular file";
    expect_refused(run(kSmall + "--config " + path + " --out " + dir, dir + ".config.log", "/dev/null",
                       std::chrono::seconds(60)),
                   expected, "--config " + path);
    write(dir + ".in", "seven\n");
    expect_refused(run("translate --threads 1 --unk-replace --dictionary " + path + " --model " + trained(),
                       dir + ".dictionary.log", dir + ".in", std::chrono::seconds(60)),
                   expected, "--dictionary " + path);
  }
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  EXPECT_LT(usage.ru_maxrss, test::kBoundedPeakKiB);
  fs::remove(huge);
}

// A torch.save archive of `records` (name -> bytes), with data.pkl and byteorder among them.
std::vector<char> archive_of(const std::vector<std::pair<std::string, std::string>>& records) {
  std::vector<char> bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, std::size_t size) {
    bytes.insert(bytes.end(), static_cast<const char*>(data), static_cast<const char*>(data) + size);
    return size;
  });
  for (const auto& [name, data] : records) writer.writeRecord(name, data.data(), data.size());
  writer.writeEndOfFile();
  return bytes;
}

std::string int32_op(std::int32_t value) {
  std::string out = "J";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((static_cast<std::uint32_t>(value) >> (8 * i)) & 0xff);
  return out;
}
std::string long_op(std::int64_t value) {  // LONG1 of eight bytes
  std::string out = "\x8a\x08";
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
  return out;
}
std::string string_op(const std::string& text) { return "X" + int32_op(static_cast<std::int32_t>(text.size())).substr(1) + text; }

// The pickle of {"w": a float tensor of `sizes` and `strides` over storage "0" of `numel` floats}.
std::string tensor_pickle(std::int64_t numel, const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides) {
  std::string p = "\x80\x02}(" + string_op("w") + "ctorch._utils\n_rebuild_tensor_v2\n((" + string_op("storage") +
                  "ctorch\nFloatStorage\n" + string_op("0") + string_op("cpu") + long_op(numel) + "tQ" + int32_op(0) + "(";
  for (const std::int64_t s : sizes) p += long_op(s);
  p += "t(";
  for (const std::int64_t s : strides) p += long_op(s);
  return p + "t\x89}tRu.";
}

std::string what_refused(const std::vector<char>& bytes) {
  try {
    models::parse_state_dict(bytes, "hostile.pt");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(accepted)";
}

// 4. Pickles nested 10^5-2x10^6 deep, cycles, and JSON nested 100,000 deep: refused, never a stack
// overflow.
TEST(HostilePickleTest, DeepNestingAndCyclesAreRefused) {
  const auto archive = [](const std::string& pickle) {
    return archive_of({{"data.pkl", pickle}, {"byteorder", "little"}});
  };
  EXPECT_NE(what_refused(archive("\x80\x02)" + std::string(100000, '\x85') + ".")).find("nested deeper than 32"),
            std::string::npos);
  EXPECT_NE(what_refused(archive("\x80\x02" + std::string(2000000, '(') + ")" + std::string(2000000, 't') + "."))
                .find("open marks"),
            std::string::npos);
  EXPECT_NE(what_refused(archive("\x80\x02]q\x00h\x00" "a."s)).find("holds itself"), std::string::npos);
  std::string deep_lists = "\x80\x02";
  for (int i = 0; i < 100000; ++i) deep_lists += "]";
  for (int i = 0; i < 99999; ++i) deep_lists += "a";
  EXPECT_NE(what_refused(archive(deep_lists + ".")).find("nested deeper"), std::string::npos);
  const std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_json(deep_json, "config.json");
    ADD_FAILURE() << "100,000 levels of JSON accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(parse_json(std::string(64, '[') + std::string(64, ']'), "64 levels"));
  EXPECT_NO_THROW(parse_json("{\"a\": \"" + std::string(1000, '[') + "\"}", "brackets inside a string"));
}

// 5. A tensor's view is checked against its storage before anything is allocated: a stride of 0
// repeating one float into 10^12, a shape far larger than its storage, sizes whose product overflows.
TEST(HostilePickleTest, TensorViewsAreCheckedBeforeAllocation) {
  const std::string four_bytes(4, '\0');
  const auto refused = [&](std::int64_t numel, const std::vector<std::int64_t>& sizes,
                           const std::vector<std::int64_t>& strides) {
    return what_refused(archive_of({{"data.pkl", tensor_pickle(numel, sizes, strides)},
                                    {"byteorder", "little"},
                                    {"data/0", std::string(static_cast<std::size_t>(numel) * 4, '\0')}}));
  };
  EXPECT_NE(refused(1, {1000000000000}, {0}).find("elements from a storage of 1"), std::string::npos);
  EXPECT_NE(refused(1, {1000000, 1000000}, {0, 0}).find("elements from a storage of 1"), std::string::npos);
  EXPECT_NE(refused(4, {2, 3}, {3, 1}).find("elements from a storage of 4"), std::string::npos);
  EXPECT_NE(refused(1, {INT64_MAX, 4}, {1, 1}).find("overflows"), std::string::npos);
  EXPECT_NE(refused(6, {2, 3}, {4, 1}).find("exceeds its storage"), std::string::npos);
  EXPECT_EQ(refused(6, {2, 3}, {3, 1}), "(accepted)");
  EXPECT_EQ(refused(6, {3, 2}, {1, 3}), "(accepted)") << "a transposed view";
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, test::kBoundedPeakKiB);
}

// 6. An archive that declares another byte order is refused, not read as this machine's.
TEST_F(HostileFilesTest, BigEndianArchivesAreRefused) {
  const std::string dir = copy_of_trained("big_endian");
  const std::string bytes = read_file(dir + "/best_model.pt");
  const std::vector<char> original(bytes.begin(), bytes.end());
  const models::ZipArchive zip(original, "best_model.pt");
  std::vector<std::pair<std::string, std::string>> records = {{"data.pkl", std::string(zip.get("data.pkl"))},
                                                              {"byteorder", "big"}};
  for (int i = 0; zip.has("data/" + std::to_string(i)); ++i) {
    records.emplace_back("data/" + std::to_string(i), std::string(zip.get("data/" + std::to_string(i))));
  }
  const std::vector<char> big = archive_of(records);
  write(dir + "/best_model.pt", std::string(big.begin(), big.end()));
  expect_refused(run("translate --threads 1 --model " + dir, dir + ".log"), "byte order 'big'", "big-endian archive");
  records[1].second = "little";
  const std::vector<char> little = archive_of(records);
  EXPECT_EQ(what_refused(little), "(accepted)") << "the same records, little-endian";
}

// 7. Weights that are not floating-point, or hold NaN or Inf, are refused by name at load.
TEST_F(HostileFilesTest, NonFloatingAndNonFiniteWeightsAreRefused) {
  const models::StateDict good = models::read_state_dict(trained() + "/best_model.pt", test::kStateDictBytes);
  const std::string first = good.front().first;
  const auto with_first = [&](const std::string& name, const std::function<torch::Tensor(const torch::Tensor&)>& change) {
    const std::string dir = copy_of_trained(name);
    models::StateDict dict = good;
    dict.front().second = change(dict.front().second);
    models::save_state_dict(dict, dir + "/best_model.pt");
    return dir;
  };
  for (const auto dtype : {torch::kChar, torch::kByte, torch::kLong, torch::kBool}) {
    const std::string name = c10::toString(dtype);
    const std::string dir = with_first("dtype_" + name, [&](const torch::Tensor& t) { return t.to(dtype); });
    expect_refused(run("translate --threads 1 --model " + dir, dir + ".log"),
                   "not floating-point: " + first + " (" + name + ")", name);
  }
  for (const double bad : {NAN, INFINITY}) {
    const std::string dir = with_first(std::isnan(bad) ? "nan" : "inf", [&](const torch::Tensor& t) { return torch::full_like(t, bad); });
    expect_refused(run("translate --threads 1 --model " + dir, dir + ".log"), "holding NaN or Inf: " + first,
                   std::isnan(bad) ? "NaN" : "Inf");
  }
  const std::string one_nan = with_first("one_nan", [](const torch::Tensor& t) {
    torch::Tensor out = t.clone();
    out.view({-1})[0] = NAN;
    return out;
  });
  expect_refused(run("translate --threads 1 --model " + one_nan, one_nan + ".log"), "holding NaN or Inf", "one NaN");
}

}  // namespace
}  // namespace luong
