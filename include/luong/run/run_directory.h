#pragma once
// The files of a training run (RUN_DIR) and loading a trained model back from them.
//
//   config.json                 the TrainConfig (re-run it with `luong train --config`)
//   source.vocab, target.vocab  one token per line
//   spm.source.model, spm.target.model   with --tokenizer spm
//   model.pt                    latest weights, a PyTorch state_dict (torch.load reads it)
//   best_model.pt               weights of the best dev BLEU so far (with a dev split)
//   averaged_model.pt, epochs/  with --average-last N: the mean of the last N epochs' weights, and those
//   ema_model.pt                with --ema: the exponential moving average of the weights
//   checkpoint/                 model.pt, optimizer.pt, rng.pt, state.json (ema.pt) and manifest.json (their
//                               sizes and checksums): what --resume needs, replaced as a whole by an
//                               atomic directory exchange
//   .lock                       held (flock) by the process training into the directory
//   loss.csv, loss.png          the learning curve
//   test.tsv, dev.tsv           the held-out splits (source, target, corpus line)
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "luong/data_pipeline/dataset.h"
#include "luong/data_pipeline/tokenizer.h"
#include "luong/data_pipeline/vocabulary.h"
#include "luong/models/seq2seq.h"
#include "luong/run/runtime_options.h"
#include "luong/run/train_config.h"

namespace luong::run {

struct RunPaths {
  explicit RunPaths(std::string run_dir);
  std::string dir, config, source_vocab, target_vocab, source_spm, target_spm, model, best_model, checkpoint,
      loss_csv, loss_png, test, dev, lock, epochs, averaged_model, ema_model, truecase, profile;
};

/// Which weights of a run to load.
enum class WeightsChoice {
  kBest,      ///< best_model.pt (model.pt without a dev split)
  kLast,      ///< model.pt
  kAveraged,  ///< averaged_model.pt (--average-last)
  kEma,       ///< ema_model.pt (--ema)
};

}  // namespace luong::run

template <>
struct luong::options::EnumNames<luong::run::WeightsChoice> {
  static constexpr std::pair<luong::run::WeightsChoice, const char*> values[] = {
      {luong::run::WeightsChoice::kBest, "best"},
      {luong::run::WeightsChoice::kLast, "last"},
      {luong::run::WeightsChoice::kAveraged, "averaged"},
      {luong::run::WeightsChoice::kEma, "ema"}};
};

namespace luong::run {

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_MODEL_OPTIONS(X)                                                                           \
  X(::luong::run::WeightsChoice, weights, ::luong::run::WeightsChoice::kBest, "weights", "model",          \
    "which weights of each run: best (best_model.pt, else model.pt), last, averaged or ema",               \
    ::luong::options::kAnyValue, kMayChange)

/// How evaluate, translate and trace pick the weights of the runs they load.
struct ModelOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_MODEL_OPTIONS)
};

/// A trained model ready to translate.
struct TrainedModel {
  TrainConfig config;
  std::unique_ptr<data::Tokenizer> source_tokenizer;
  std::unique_ptr<data::Tokenizer> target_tokenizer;
  std::unique_ptr<data::Vocabulary> source_vocab;
  std::unique_ptr<data::Vocabulary> target_vocab;
  models::Seq2Seq model{nullptr};
  torch::Device device = torch::kCPU;
  std::string weights;  ///< the file the weights came from
};

/// Loads config, tokenizers, vocabularies and weights (best_model.pt when present, else model.pt)
/// onto `device`. Throws luong::Error / CheckpointError with the file at fault.
TrainedModel load_trained_model(const std::string& run_dir, const torch::Device& device,
                                WeightsChoice weights = WeightsChoice::kBest);

/// Before a run writes anything: a symbolic link, FIFO or device where it will write (any file
/// RunPaths names) is refused with one luong::Error line.
void check_run_files(const RunPaths& paths);

/// A fresh run in a directory that holds a trained model (model.pt, best_model.pt, averaged or EMA
/// weights, epochs/, checkpoint/) is refused, or with `overwrite` every file a run writes is removed
/// first (none that RunPaths does not name).
void clear_previous_run(const RunPaths& paths, bool overwrite);

/// Pairs of a `test.tsv`-style file written by write_pairs.
void write_pairs(const std::string& path, const std::vector<data::FilteredPair>& pairs);

}  // namespace luong::run
