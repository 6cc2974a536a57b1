#pragma once
// The files of a training run (RUN_DIR) and loading a trained model back from them.
//
//   config.json                 the TrainConfig (re-run it with `luong train --config`)
//   source.vocab, target.vocab  one token per line
//   spm.source.model, spm.target.model   with --tokenizer spm
//   model.pt                    latest weights, a PyTorch state_dict (torch.load reads it)
//   best_model.pt               weights of the best dev BLEU so far (with a dev split)
//   checkpoint/                 model.pt, optimizer.pt, rng.pt, state.json and manifest.json (their
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
      loss_csv, loss_png, test, dev, lock;
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
TrainedModel load_trained_model(const std::string& run_dir, const torch::Device& device);

/// Pairs of a `test.tsv`-style file written by write_pairs.
void write_pairs(const std::string& path, const std::vector<data::FilteredPair>& pairs);

}  // namespace luong::run
