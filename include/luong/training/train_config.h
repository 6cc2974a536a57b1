#pragma once
// Everything that defines a training run; saved as RUN_DIR/config.json and re-run with --config.
#include <cstdint>
#include <string>

#include "luong/models/seq2seq.h"
#include "luong/util/json.h"

namespace luong::training {

struct TrainConfig {
  // data
  std::string data;                ///< corpus path, or "builtin:numbers"
  std::string format = "tsv";      ///< tsv or opus
  bool reverse = false;            ///< Arabic -> English
  std::size_t max_len = 12;
  std::size_t train_size = 3000;
  std::size_t test_size = 300;
  std::size_t dev_size = 300;
  bool deduplicate = false;
  std::string tokenizer = "word";  ///< word or spm
  int spm_vocab = 4000;
  std::string spm_type = "unigram";
  std::size_t min_frequency = 1;
  std::size_t max_vocab = 0;
  // model
  std::string attention = "dot";   ///< dot, general, concat, local-m, local-p
  std::string score;               ///< score for local attention (default dot)
  std::int64_t window = 2;
  bool renormalize = false;
  bool scale = true;
  std::string decoder = "luong";   ///< luong or bahdanau
  std::int64_t hidden = 64;
  std::int64_t embed = 28;
  std::int64_t layers = 1;
  double dropout = 0.0;
  bool bidirectional = false;
  std::string dtype = "float32";   ///< float32, or float64 (for numerics: parity checks, data-parallel equality)
  // optimisation
  std::int64_t batch = 32;
  bool batch_by_tokens = false;
  bool bucket = false;
  bool shuffle = true;
  int epochs = 10;
  double lr = 1e-3;
  double clip = 1.0;
  std::string loss_average = "token";  ///< token, or step (the notebook's mean of per-step means)
  int patience = 0;                    ///< early stopping on dev BLEU; 0 = off
  // runtime
  std::string device = "cpu";
  int threads = 0;
  bool fused = true;               ///< hand-differentiated recurrences where they apply (Seq2SeqOptions::fused)
  std::uint64_t seed = 0;
  std::string out = "runs/latest";

  /// Throws luong::Error naming the first invalid field.
  void validate() const;
  torch::ScalarType scalar_type() const;
  models::Seq2SeqOptions model_options(std::int64_t source_vocab, std::int64_t target_vocab) const;

  Json to_json() const;
  /// Fields absent from `json` keep their defaults; unknown fields are an error.
  static TrainConfig from_json(const Json& json, const std::string& origin);
  static TrainConfig load(const std::string& path);
  void save(const std::string& path) const;
};

}  // namespace luong::training
