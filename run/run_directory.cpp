#include "luong/run/run_directory.h"

#include <filesystem>
#include <ostream>

#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/models/state_dict.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::run {
namespace fs = std::filesystem;

RunPaths::RunPaths(std::string run_dir) : dir(std::move(run_dir)) {
  const fs::path d(dir);
  config = (d / "config.json").string();
  source_vocab = (d / "source.vocab").string();
  target_vocab = (d / "target.vocab").string();
  source_spm = (d / "spm.source.model").string();
  target_spm = (d / "spm.target.model").string();
  model = (d / "model.pt").string();
  best_model = (d / "best_model.pt").string();
  checkpoint = (d / "checkpoint").string();
  loss_csv = (d / "loss.csv").string();
  loss_png = (d / "loss.png").string();
  test = (d / "test.tsv").string();
  dev = (d / "dev.tsv").string();
  lock = (d / ".lock").string();
  epochs = (d / "epochs").string();
  averaged_model = (d / "averaged_model.pt").string();
  ema_model = (d / "ema_model.pt").string();
  truecase = (d / "target.truecase").string();
  profile = (d / "profile.json").string();
}

namespace {

// The files of a trained model: a fresh run refuses a directory holding any, unless told to overwrite.
std::vector<std::string> model_files(const RunPaths& paths) {
  return {paths.checkpoint, paths.model, paths.best_model, paths.averaged_model, paths.ema_model, paths.epochs};
}

// Every other file a run writes, whose place a link or a FIFO may not take either.
std::vector<std::string> other_run_files(const RunPaths& paths) {
  return {paths.config,   paths.source_vocab, paths.target_vocab, paths.source_spm, paths.target_spm, paths.loss_csv,
          paths.loss_png, paths.test,         paths.dev,          paths.truecase,   paths.profile};
}

}  // namespace

// Before any work: a link, FIFO or device where the run will write is refused now, not epochs later.
void check_run_files(const RunPaths& paths) {
  for (const std::string& path : model_files(paths)) {
    check_own_path(path, path == paths.checkpoint || path == paths.epochs);
  }
  for (const std::string& path : other_run_files(paths)) check_own_path(path);
}

// A fresh run in a directory that holds a trained model: refused, or with --overwrite every file a
// run writes removed first (none that luong does not name), so that nothing of the old run is left
// beside the new one.
void clear_previous_run(const RunPaths& paths, bool overwrite) {
  std::vector<std::string> present;
  for (const std::string& path : model_files(paths)) {
    if (fs::exists(fs::symlink_status(path))) present.push_back(fs::path(path).filename().string());
  }
  if (present.empty()) return;
  if (!overwrite) {
    throw Error(printable(paths.dir) + " already holds a run (" + present.front() +
                "); use --resume to continue it, --overwrite to replace it, or choose another --out");
  }
  std::vector<std::string> files = model_files(paths);
  for (const std::string& path : other_run_files(paths)) files.push_back(path);
  for (const std::string& path : files) {
    if (const std::error_code ec = remove_tree(path)) {
      throw Error(printable(path) + ": cannot remove for --overwrite (" + ec.message() + ")");
    }
  }
}

TrainedModel load_trained_model(const std::string& run_dir, const torch::Device& device, WeightsChoice weights) {
  if (!fs::is_directory(run_dir)) throw Error(printable(run_dir) + ": no such run directory");
  const RunPaths paths(run_dir);
  if (!fs::exists(paths.config)) {
    throw Error(printable(paths.config) + ": missing (is " + printable(run_dir) + " a luong run directory?)");
  }
  TrainedModel out;
  out.config = TrainConfig::load(paths.config);
  out.config.validate();
  out.device = device;
  out.source_tokenizer = data::load_tokenizer(out.config.tokenizer, paths.source_spm);
  out.target_tokenizer = data::load_tokenizer(out.config.tokenizer, paths.target_spm, paths.truecase);
  out.source_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.source_vocab));
  out.target_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.target_vocab));
  out.model = models::Seq2Seq(out.config.model_options(static_cast<int64_t>(out.source_vocab->size()),
                                                       static_cast<int64_t>(out.target_vocab->size())));
  switch (weights) {
    case WeightsChoice::kBest: out.weights = fs::exists(paths.best_model) ? paths.best_model : paths.model; break;
    case WeightsChoice::kLast: out.weights = paths.model; break;
    case WeightsChoice::kAveraged: out.weights = paths.averaged_model; break;
    case WeightsChoice::kEma: out.weights = paths.ema_model; break;
  }
  if (!fs::exists(out.weights)) {
    throw CheckpointError(printable(out.weights) + ": missing (" +
                          (weights == WeightsChoice::kAveraged ? std::string("trained without --average-last?")
                           : weights == WeightsChoice::kEma    ? std::string("trained without --ema?")
                                                               : std::string("training never finished an epoch?")) +
                          ")");
  }
  models::load_state_dict(*out.model, models::read_state_dict(out.weights, models::state_dict_size_limit(*out.model)),
                          out.weights);
  out.model->to(out.device, out.config.scalar_type());
  out.model->eval();
  return out;
}

void write_pairs(const std::string& path, const std::vector<data::FilteredPair>& pairs) {
  write_file_atomically(path, [&](std::ostream& out) {
    for (const auto& p : pairs) out << p.source << '\t' << p.target << '\t' << p.line << '\n';
  });
}

}  // namespace luong::run
