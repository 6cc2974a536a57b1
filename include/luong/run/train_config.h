#pragma once
// Everything that defines a training run, declared once in LUONG_TRAIN_OPTIONS: the struct's
// members, config.json, the `luong train` flags with their help and defaults, the range checks and
// what --resume may change all come from the table. Saved as RUN_DIR/config.json and re-run with
// `luong train --config`.
#include <cstdint>
#include <string>

#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/tokenizer.h"
#include "luong/models/precision.h"
#include "luong/models/seq2seq.h"
#include "luong/run/runtime_options.h"
#include "luong/util/json.h"
#include "luong/util/options.h"

namespace luong::run {

/// What --attention names: a global score, or a local attention (whose score is --score).
enum class AttentionChoice { kDot, kGeneral, kConcat, kLocation, kLocalMonotonic, kLocalPredictive };
enum class DType { kFloat32, kFloat64 };
enum class OptimizerKind { kAdam, kSgd };
/// How the learning rate moves: constant; halved every epoch after --decay-after (the paper's, with
/// SGD at lr 1.0 after epoch 5); linear warmup then inverse square root (per optimizer step); halved
/// when the dev loss has not improved for --plateau-patience epochs.
enum class Schedule { kConstant, kHalveAfter, kInverseSqrt, kPlateau };

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_TRAIN_OPTIONS(X)                                                                                      \
  X(std::string, data, "", "data", "data",                                                                         \
    "corpus: a TSV file (english<TAB>arabic[<TAB>...]), an OPUS directory or prefix, or builtin:numbers",           \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(::luong::data::CorpusFormat, format, ::luong::data::CorpusFormat::kTsv, "format", "data", "corpus format",     \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(bool, reverse, false, "reverse", "data", "translate Arabic -> English", ::luong::options::kAnyValue, kFixed)   \
  X(std::int64_t, max_len, 12, "max-len", "data", "longest sentence kept, in words",                              \
    ::luong::options::closed(1, 1000), kFixed)                                                                     \
  X(std::int64_t, train_size, 3000, "train-size", "data", "training pairs (0 = every pair not in the test or dev split)", ::luong::options::closed(0, 1e8),      \
    kFixed)                                                                                                        \
  X(std::int64_t, test_size, 300, "test-size", "data", "test pairs", ::luong::options::closed(0, 1e8), kFixed)     \
  X(std::int64_t, dev_size, 300, "dev-size", "data", "dev pairs (dev loss, BLEU, early stopping)",                 \
    ::luong::options::closed(0, 1e8), kFixed)                                                                      \
  X(bool, deduplicate, false, "dedupe", "data", "drop repeated sentence pairs", ::luong::options::kAnyValue,       \
    kFixed)                                                                                                        \
  X(::luong::data::TokenizerKind, tokenizer, ::luong::data::TokenizerKind::kWord, "tokenizer", "data",             \
    "word (the notebook's) or spm (sentencepiece trained on the training split)", ::luong::options::kAnyValue,     \
    kFixed)                                                                                                        \
  X(std::int64_t, spm_vocab, 4000, "spm-vocab", "data", "sentencepiece vocabulary size per side",                 \
    ::luong::options::closed(8, 1e6), kFixed)                                                                      \
  X(::luong::data::SentencePieceModel, spm_type, ::luong::data::SentencePieceModel::kUnigram, "spm-type", "data",  \
    "sentencepiece model", ::luong::options::kAnyValue, kFixed)                                                    \
  X(std::int64_t, min_frequency, 1, "min-freq", "data", "rarer tokens become <unk>",                              \
    ::luong::options::closed(1, 1e9), kFixed)                                                                      \
  X(std::int64_t, max_vocab, 0, "max-vocab", "data", "largest vocabulary per side (0 = all)",                     \
    ::luong::options::closed(0, 1e8), kFixed)                                                                      \
  X(bool, reverse_source, false, "reverse-source", "data", "feed the source sentence reversed (Luong et al.)",     \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(AttentionChoice, attention, AttentionChoice::kDot, "attention", "model",                                       \
    "global with the dot, general, concat or location score, or local-m / local-p", ::luong::options::kAnyValue,    \
    kFixed)                                                                                                        \
  X(::luong::models::ScoreKind, score, ::luong::models::ScoreKind::kDot, "score", "model",                        \
    "score of local attention", ::luong::options::kAnyValue, kFixed)                                              \
  X(std::int64_t, location_positions, 64, "location-positions", "model",                                          \
    "source positions the location score scores (longer sources get no weight past them)",                        \
    ::luong::options::closed(1, 4096), kFixed)                                                                     \
  X(std::int64_t, window, 2, "window", "model", "local window half-width D", ::luong::options::closed(0, 1000),    \
    kFixed)                                                                                                        \
  X(bool, renormalize, false, "renormalize", "model",                                                              \
    "local-p as in the notebook (clamped centre, weights renormalised)", ::luong::options::kAnyValue, kFixed)      \
  X(bool, scale, true, "!no-scale", "model", "do not divide dot/general scores by sqrt(hidden)",                  \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(::luong::models::DecoderKind, decoder, ::luong::models::DecoderKind::kLuong, "decoder", "model",              \
    "luong (input feeding) or bahdanau (the notebook's first Decoder)", ::luong::options::kAnyValue, kFixed)       \
  X(::luong::models::CellKind, cell, ::luong::models::CellKind::kGru, "cell", "model",                            \
    "recurrent cell: gru (the notebook's) or lstm (the paper's)", ::luong::options::kAnyValue, kFixed)             \
  X(std::int64_t, hidden, 64, "hidden", "model", "recurrent state size", ::luong::options::closed(1, 65536),       \
    kFixed)                                                                                                        \
  X(std::int64_t, embed, 28, "embed", "model", "decoder embedding size", ::luong::options::closed(1, 65536),       \
    kFixed)                                                                                                        \
  X(std::int64_t, layers, 1, "layers", "model", "recurrent layers of the encoder and of the decoder",             \
    ::luong::options::closed(1, 64), kFixed)                                                                       \
  X(double, dropout, 0.0, "dropout", "model",                                                                      \
    "dropout on embeddings, between layers, on encoder outputs and the attentional vector",                        \
    ::luong::options::right_open(0, 1), kFixed)                                                                    \
  X(bool, tie_embeddings, false, "tie-embeddings", "model",                                                        \
    "the output projection reuses the decoder's embeddings (needs --embed = --hidden)", ::luong::options::kAnyValue, \
    kFixed)                                                                                                        \
  X(bool, bidirectional, false, "bidirectional", "model", "bidirectional encoder (bridged to the decoder size)",    \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(bool, fused, true, "!unfused", "model",                                                                        \
    "run LibTorch's modules instead of the fused CPU kernels (the same model; for comparison)",                    \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(DType, dtype, DType::kFloat32, "dtype", "model", "float32, or float64 for numerical checks",                  \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(::luong::models::Precision, precision, ::luong::models::Precision::kFloat32, "precision", "training",          \
    "float32, or bf16: training's matrix products in bfloat16 (float32 weights, accumulation, loss and softmax)",    \
    ::luong::options::kAnyValue, kMayChange)                                                                       \
  X(std::int64_t, batch, 32, "batch", "training", "sentences per batch (or tokens with --batch-by-tokens)",        \
    ::luong::options::closed(1, 1e7), kFixed)                                                                      \
  X(bool, batch_by_tokens, false, "batch-by-tokens", "training", "--batch counts target tokens",                  \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(bool, bucket, false, "bucket", "training", "group sentences of similar length", ::luong::options::kAnyValue,   \
    kFixed)                                                                                                        \
  X(bool, shuffle, true, "!no-shuffle", "training", "keep the corpus order (the Python reference's)",              \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(std::int64_t, epochs, 10, "epochs", "training", "epochs", ::luong::options::closed(1, 1e6), kMayChange)        \
  X(std::int64_t, profile_steps, 0, "profile-steps", "training",                                                   \
    "profile this many steps of the first epoch run (after up to 10 warm-up steps) with LibTorch's profiler: "     \
    "where a step's time goes on stderr, the Chrome trace in profile.json", ::luong::options::closed(0, 1e6),      \
    kMayChange)                                                                                                    \
  X(std::int64_t, max_time, 0, "max-time", "training",                                                             \
    "seconds of training at most: no epoch starts that would end past them (0 = no limit)",                        \
    ::luong::options::closed(0, 1e9), kMayChange)                                                                  \
  X(OptimizerKind, optimizer, OptimizerKind::kAdam, "optimizer", "training", "adam, or sgd (the paper's)",         \
    ::luong::options::kAnyValue, kFixed)                                                                           \
  X(double, lr, 1e-3, "lr", "training", "learning rate", ::luong::options::left_open(0, 1e38), kMayChange)         \
  X(Schedule, schedule, Schedule::kConstant, "schedule", "training",                                                \
    "learning-rate schedule: constant, halve-after, inverse-sqrt or plateau", ::luong::options::kAnyValue, kFixed) \
  X(std::int64_t, decay_after, 5, "decay-after", "training", "halve-after: halve the rate every epoch after this",  \
    ::luong::options::closed(0, 1e6), kFixed)                                                                      \
  X(std::int64_t, warmup, 4000, "warmup", "training", "inverse-sqrt: optimizer steps of linear warmup",              \
    ::luong::options::closed(1, 1e9), kFixed)                                                                      \
  X(std::int64_t, plateau_patience, 1, "plateau-patience", "training",                                              \
    "plateau: epochs without a better dev loss before the rate halves", ::luong::options::closed(1, 1e6), kFixed)  \
  X(bool, cuda_graphs, true, "!no-cuda-graphs", "training",                                                         \
    "on a GPU, LibTorch's eager launches instead of one CUDA graph a step (per padded batch shape)",                \
    ::luong::options::kAnyValue, kMayChange)                                                                       \
  X(std::int64_t, cuda_graph_padding, 8, "cuda-graph-padding", "training",                                          \
    "CUDA graphs: source and target lengths padded up to a multiple of this (fewer graphs, more padding)",         \
    ::luong::options::closed(1, 1024), kMayChange)                                                                 \
  X(std::int64_t, overlap_below_hidden, 256, "overlap-below-hidden", "training",                                    \
    "on the CPU, fused models of a smaller hidden size run the backward pass on one thread while the others "     \
    "take the work it hands out (0 = never)", ::luong::options::closed(0, 1e9), kMayChange)                         \
  X(double, clip, 1.0, "clip", "training", "gradient-norm clipping (0 = off)", ::luong::options::closed(0, 1e6),   \
    kMayChange)                                                                                                    \
  X(double, label_smoothing, 0.0, "label-smoothing", "training",                                                    \
    "the target gets 1 - eps of the probability, every token eps / V", ::luong::options::right_open(0, 1), kFixed) \
  X(std::int64_t, accumulate, 1, "accumulate", "training", "batches whose gradients are summed per optimizer step",   \
    ::luong::options::closed(1, 1024), kFixed)                                                                     \
  X(std::int64_t, average_last, 0, "average-last", "training",                                                      \
    "also write averaged_model.pt, the mean of the last N epochs' weights (0 = off)",                              \
    ::luong::options::closed(0, 100), kFixed)                                                                      \
  X(double, ema, 0.0, "ema", "training",                                                                            \
    "also keep ema_model.pt, an exponential moving average of the weights with this decay per step (0 = off)",     \
    ::luong::options::right_open(0, 1), kFixed)                                                                    \
  X(::luong::models::LossAverage, loss_average, ::luong::models::LossAverage::kToken, "loss-average", "training",  \
    "token (per target token) or step (the notebook's per-step mean)", ::luong::options::kAnyValue, kFixed)        \
  X(std::int64_t, patience, 0, "patience", "training",                                                             \
    "stop after this many epochs without a better dev BLEU (0 = never)", ::luong::options::closed(0, 1e6),         \
    kMayChange)                                                                                                    \
  X(double, param_init, 0.0, "param-init", "training",                                                              \
    "draw every weight uniformly from [-x, x] (OpenNMT-py's param_init; 0 = LibTorch's per-module defaults)",       \
    ::luong::options::closed(0, 10), kFixed)                                                                       \
  X(std::int64_t, seed, 0, "seed", "training", "random seed (split, initialisation, batch order)",                \
    ::luong::options::closed(0, 9.2e18), kFixed)                                                                   \
  X(std::string, out, "runs/latest", "out", "training", "run directory", ::luong::options::kAnyValue, kMayChange)  \
  LUONG_RUNTIME_OPTIONS(X)

struct TrainConfig {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_TRAIN_OPTIONS)

  /// What --resume changed, as config.json records it: [{"after_epoch": N, "changes": {key: [old, new]}}].
  Json resumed = Json::array();

  /// The ranges of the table and the rules between options; throws luong::Error naming the first
  /// invalid option (by its flag).
  void validate() const;
  torch::ScalarType scalar_type() const;
  models::Seq2SeqOptions model_options(std::int64_t source_vocab, std::int64_t target_vocab) const;
  RuntimeOptions runtime() const;

  Json to_json() const;
  /// Options absent from `json` keep their defaults; an unknown key, a wrong type or a value out of
  /// range is a luong::Error naming the key and `origin`.
  static TrainConfig from_json(const Json& json, const std::string& origin);
  static TrainConfig load(const std::string& path);
  void save(const std::string& path) const;
};

}  // namespace luong::run

template <>
struct luong::options::EnumNames<luong::run::AttentionChoice> {
  static constexpr std::pair<luong::run::AttentionChoice, const char*> values[] = {
      {luong::run::AttentionChoice::kDot, "dot"},
      {luong::run::AttentionChoice::kGeneral, "general"},
      {luong::run::AttentionChoice::kConcat, "concat"},
      {luong::run::AttentionChoice::kLocation, "location"},
      {luong::run::AttentionChoice::kLocalMonotonic, "local-m"},
      {luong::run::AttentionChoice::kLocalPredictive, "local-p"}};
};
template <>
struct luong::options::EnumNames<luong::run::DType> {
  static constexpr std::pair<luong::run::DType, const char*> values[] = {{luong::run::DType::kFloat32, "float32"},
                                                                         {luong::run::DType::kFloat64, "float64"}};
};
template <>
struct luong::options::EnumNames<luong::run::OptimizerKind> {
  static constexpr std::pair<luong::run::OptimizerKind, const char*> values[] = {{luong::run::OptimizerKind::kAdam, "adam"},
                                                                               {luong::run::OptimizerKind::kSgd, "sgd"}};
};
template <>
struct luong::options::EnumNames<luong::run::Schedule> {
  static constexpr std::pair<luong::run::Schedule, const char*> values[] = {
      {luong::run::Schedule::kConstant, "constant"},
      {luong::run::Schedule::kHalveAfter, "halve-after"},
      {luong::run::Schedule::kInverseSqrt, "inverse-sqrt"},
      {luong::run::Schedule::kPlateau, "plateau"}};
};
