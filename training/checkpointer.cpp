#include "luong/training/checkpointer.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "luong/models/state_dict.h"
#include "luong/run/runtime.h"
#include "luong/training/optimizer_state.h"
#include "luong/util/atomic_file.h"
#include "luong/util/crash_test_hooks.h"
#include "luong/util/error.h"
#include "luong/util/plot.h"

namespace luong::training {
namespace fs = std::filesystem;
namespace {

constexpr int kManifestFormat = 1;

// crc32_z: a size_t length (crc32's uInt would wrap at 4 GiB).
std::uint32_t crc32_update(std::uint32_t crc, const char* data, std::size_t size) {
  return static_cast<std::uint32_t>(::crc32_z(crc, reinterpret_cast<const Bytef*>(data), size));
}

std::uint32_t crc32_of(const std::vector<char>& bytes) { return crc32_update(0, bytes.data(), bytes.size()); }

std::vector<char> read_bytes(const std::string& path, std::uint64_t max_bytes) {
  std::optional<std::vector<char>> bytes = models::read_checkpoint_file(path, max_bytes);
  if (!bytes) throw CheckpointError(printable(path) + ": missing");
  return std::move(*bytes);
}

// What the manifest records of a file.
struct WrittenFile {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
};

// `path` written atomically from the pieces `produce` hands its sink, counted and checksummed on the
// way for the manifest.
WrittenFile write_counted(const std::string& path, const std::function<void(const models::ByteSink&)>& produce) {
  WrittenFile file;
  write_file_atomically(path, [&](std::ostream& out) {
    produce([&](const char* data, std::size_t size) {
      out.write(data, static_cast<std::streamsize>(size));
      file.crc32 = crc32_update(file.crc32, data, size);
      file.bytes += size;
    });
  });
  return file;
}

void write_text(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& out) { out << text; });
}

// Swaps the finished staging directory in as a whole: a reader sees the old checkpoint or the new.
void exchange_into_place(const std::string& staging, const std::string& checkpoint) {
  if (!fs::exists(checkpoint)) {
    fs::rename(staging, checkpoint);
    crash_test::save_point();
    return;
  }
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, checkpoint.c_str(), RENAME_EXCHANGE) != 0) {
    throw Error(printable(checkpoint) + ": cannot replace checkpoint (" + std::strerror(errno) + ")");
  }
  crash_test::save_point();
  if (const std::error_code ec = remove_tree(staging)) {
    throw Error(printable(staging) + ": cannot remove the replaced checkpoint (" + ec.message() + ")");
  }
  crash_test::save_point();
}

}  // namespace

std::uint64_t Checkpointer::file_size_limit(const std::string& name, std::uint64_t weights) {
  if (name == "model.pt" || name == "ema.pt") return weights;
  if (name == "optimizer.pt") return 2 * weights + (std::uint64_t{1} << 20);  // two moments, and step counts
  if (name == "rng.pt") return std::uint64_t{16} << 20;                         // the generators' states
  if (name == "state.json") return std::uint64_t{64} << 20;                     // a record per epoch
  return kMaxJsonFileBytes;                                                      // manifest.json
}

namespace {

// Every file the manifest lists, checked for size and CRC-32; nothing else is trusted.
std::map<std::string, std::vector<char>> read_verified(const std::string& checkpoint, bool with_ema,
                                                       std::uint64_t weights) {
  const std::string manifest_path = (fs::path(checkpoint) / "manifest.json").string();
  if (!fs::exists(manifest_path)) {
    throw CheckpointError(printable(manifest_path) + ": missing (the checkpoint is incomplete or from an older luong)");
  }
  const std::vector<char> manifest_bytes = read_bytes(manifest_path, Checkpointer::file_size_limit("manifest.json", weights));
  Json manifest;
  try {
    manifest = parse_json(std::string(manifest_bytes.begin(), manifest_bytes.end()), printable(manifest_path));
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  if (!manifest.is_object() || manifest.value("format", Json()) != kManifestFormat || !manifest.contains("files") ||
      !manifest["files"].is_object()) {
    throw CheckpointError(printable(manifest_path) + ": not a luong checkpoint manifest (format " +
                          std::to_string(kManifestFormat) + ")");
  }
  std::map<std::string, std::vector<char>> contents;
  for (const std::string& name : Checkpointer::files()) {
    if (name == "manifest.json" || (name == "ema.pt" && !with_ema)) continue;
    const std::string path = (fs::path(checkpoint) / name).string();
    const Json& entry = manifest["files"].contains(name) ? manifest["files"][name] : Json();
    if (!entry.is_object() || !entry.contains("bytes") || !entry.contains("crc32") || !entry["bytes"].is_number_unsigned() ||
        !entry["crc32"].is_number_unsigned()) {
      throw CheckpointError(printable(manifest_path) + ": no valid entry for " + name);
    }
    std::vector<char> bytes = read_bytes(path, Checkpointer::file_size_limit(name, weights));
    if (bytes.size() != entry["bytes"].get<std::uint64_t>()) {
      throw CheckpointError(printable(path) + ": " + std::to_string(bytes.size()) + " bytes, the manifest says " +
                            std::to_string(entry["bytes"].get<std::uint64_t>()) + " (truncated or replaced)");
    }
    if (crc32_of(bytes) != entry["crc32"].get<std::uint64_t>()) {
      throw CheckpointError(printable(path) + ": checksum differs from the manifest's (corrupt or replaced)");
    }
    contents.emplace(name, std::move(bytes));
  }
  return contents;
}

// Throws where a tensor of `dict` holds NaN or Inf, naming the first such and the epoch.
void check_finite_tensors(const models::StateDict& dict, const std::string& what, const TrainerState& state) {
  for (const auto& [name, tensor] : dict) {
    if (tensor.is_floating_point() && !torch::isfinite(tensor).all().item<bool>()) {
      throw Error(what + " are no longer finite after epoch " + std::to_string(state.epoch) +
                  (state.batches_done > 0 ? " batch " + std::to_string(state.batches_done) : std::string()) + " ('" +
                  printable(name) + "' holds NaN or Inf: the learning rate may be too high, or --clip 0 too lax); " +
                  "nothing was saved, the last good checkpoint is kept");
    }
  }
}

}  // namespace

void Checkpointer::check_finite(const models::StateDict& weights, const models::StateDict& ema, const TrainerState& state) {
  check_finite_tensors(weights, "the model's weights", state);
  check_finite_tensors(ema, "the exponential average of the weights", state);
}

const std::vector<std::string>& Checkpointer::files() {
  static const std::vector<std::string> names = {"model.pt", "optimizer.pt", "rng.pt", "state.json", "ema.pt",
                                                 "manifest.json"};
  return names;
}

void Checkpointer::export_epoch_average(const models::StateDict& weights, std::int64_t epoch) const {
  make_own_directory(paths_.epochs);
  models::save_state_dict(weights, (fs::path(paths_.epochs) / ("model." + std::to_string(epoch) + ".pt")).string());
  std::vector<models::StateDict> last;
  for (std::int64_t e = epoch; e > 0 && e > epoch - average_last_; --e) {
    const std::string path = (fs::path(paths_.epochs) / ("model." + std::to_string(e) + ".pt")).string();
    if (fs::exists(path)) last.push_back(models::read_state_dict(path, models::state_dict_size_limit(weights)));
  }
  std::error_code ec;
  fs::remove((fs::path(paths_.epochs) / ("model." + std::to_string(epoch - average_last_) + ".pt")), ec);
  models::save_state_dict(average_state_dicts(last, paths_.epochs), paths_.averaged_model);
}

// Every file is written as it is serialized, straight from the tensors, rather than held whole in
// fresh buffers (page faults by the tens of thousands at hidden 512).
void Checkpointer::save(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, const TrainerState& state,
                        bool improved, bool epoch_end, const ExponentialAverage* ema) const {
  const models::StateDict weights = models::state_dict(model);
  const models::StateDict averaged = ema != nullptr ? ema->state_dict() : models::StateDict();  // (once off a GPU)
  check_finite(weights, averaged, state);
  check_own_path(paths_.checkpoint, /*directory=*/true);
  models::save_state_dict(weights, paths_.model);
  if (improved) models::save_state_dict(weights, paths_.best_model);
  if (epoch_end) {
    write_learning_curve(paths_, state.history);
    if (ema != nullptr) models::save_state_dict(averaged, paths_.ema_model);
    if (average_last_ > 0) export_epoch_average(weights, state.epoch);
  }
  // The checkpoint's tensor files, written in name order; state.json after them, the manifest last.
  std::map<std::string, models::StateDict> tensor_files = {
      {"model.pt", weights}, {"optimizer.pt", optimizer_state(optimizer)}, {"rng.pt", run::random_states()}};
  if (ema != nullptr) tensor_files.emplace("ema.pt", averaged);
  const std::string staging = temporary_path_for(paths_.checkpoint);
  if (::mkdir(staging.c_str(), 0755) != 0) {
    throw Error(printable(staging) + ": cannot create (" + std::strerror(errno) + ")");
  }
  crash_test::save_point();
  try {
    Json files = Json::object();
    const auto record = [&](const std::string& name, const std::function<void(const models::ByteSink&)>& produce) {
      const WrittenFile file = write_counted((fs::path(staging) / name).string(), produce);
      files[name] = {{"bytes", file.bytes}, {"crc32", file.crc32}};
      crash_test::save_point();
    };
    for (const auto& [name, dict] : tensor_files) {
      record(name, [&](const models::ByteSink& sink) { models::serialize_state_dict(dict, sink); });
    }
    const std::string state_text = dump_json(state.to_json(), 1) + "\n";
    record("state.json", [&](const models::ByteSink& sink) { sink(state_text.data(), state_text.size()); });
    write_text((fs::path(staging) / "manifest.json").string(),
               dump_json({{"format", kManifestFormat}, {"files", files}}, 1) + "\n");
    exchange_into_place(staging, paths_.checkpoint);
  } catch (...) {
    remove_tree(staging);
    throw;
  }
}

TrainerState Checkpointer::load(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer,
                                std::int64_t max_epochs, ExponentialAverage* ema) const {
  if (fs::is_symlink(paths_.checkpoint)) {
    throw CheckpointError(printable(paths_.checkpoint) + ": is a symbolic link; a run's checkpoint is a directory of its own");
  }
  if (!fs::is_directory(paths_.checkpoint)) throw Error(printable(paths_.checkpoint) + ": no checkpoint to resume from");
  const auto contents = read_verified(paths_.checkpoint, ema != nullptr, models::state_dict_size_limit(model));
  const auto path_of = [&](const std::string& name) { return printable((fs::path(paths_.checkpoint) / name).string()); };
  const std::vector<char>& state_bytes = contents.at("state.json");
  Json state_json;
  try {
    state_json = parse_json(std::string(state_bytes.begin(), state_bytes.end()), path_of("state.json"));
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
  TrainerState state = TrainerState::from_json(state_json, path_of("state.json"), max_epochs);
  const models::StateDict weights = models::parse_state_dict(contents.at("model.pt"), path_of("model.pt"));
  const models::StateDict optimizer_tensors = models::parse_state_dict(contents.at("optimizer.pt"), path_of("optimizer.pt"));
  const models::StateDict random = models::parse_state_dict(contents.at("rng.pt"), path_of("rng.pt"));
  const models::StateDict averaged =
      ema != nullptr ? models::parse_state_dict(contents.at("ema.pt"), path_of("ema.pt")) : models::StateDict();
  // load_state_dict converts dtypes (a float64 export loads into a float32 model); a checkpoint
  // must match exactly, or config.json was edited under it.
  for (const auto& [name, tensor] : weights) {
    for (const auto& parameter : model.named_parameters()) {
      if (parameter.key() == name && parameter.value().scalar_type() != tensor.scalar_type()) {
        throw CheckpointError(path_of("model.pt") + ": '" + printable(name) + "' is " + c10::toString(tensor.scalar_type()) +
                              " but the model's is " + c10::toString(parameter.value().scalar_type()) +
                              " (config.json's dtype changed?)");
      }
    }
  }
  models::load_state_dict(model, weights, path_of("model.pt"));
  load_optimizer_state(optimizer, optimizer_tensors, path_of("optimizer.pt"));
  run::restore_random_states(random, path_of("rng.pt"));
  if (ema != nullptr) ema->load(averaged, path_of("ema.pt"));
  return state;
}

void write_learning_curve(const run::RunPaths& paths, const std::vector<EpochRecord>& history) {
  write_file_atomically(paths.loss_csv, [&](std::ostream& out) {
    out << "epoch,train_loss,dev_loss,dev_bleu,tokens_per_second\n";
    for (const auto& r : history) {
      char line[256];
      std::snprintf(line, sizeof line, "%lld,%.6f,%.6f,%.2f,%.0f\n", static_cast<long long>(r.epoch), r.train_loss,
                    r.dev_loss, r.dev_bleu, r.tokens_per_second);
      out << line;
    }
  });
  LineSeries train{"train", {}, {}, {0.12, 0.47, 0.71}};
  LineSeries dev{"dev", {}, {}, {1.0, 0.5, 0.05}};
  for (const auto& r : history) {
    train.x.push_back(static_cast<double>(r.epoch));
    train.y.push_back(r.train_loss);
    dev.x.push_back(static_cast<double>(r.epoch));
    dev.y.push_back(r.dev_loss);
  }
  LineChart chart;
  chart.title = "cross-entropy per target token";
  chart.x_label = "epoch";
  chart.y_label = "loss";
  chart.series = {train, dev};
  save_line_chart(chart, paths.loss_png, 640, 400);
}

}  // namespace luong::training
