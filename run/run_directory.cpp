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
  models::load_state_dict(*out.model, models::read_state_dict(out.weights), out.weights);
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
