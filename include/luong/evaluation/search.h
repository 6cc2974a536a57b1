#pragma once
// Greedy decoding and batched beam search over the decoders' single `step`, for one model or an
// ensemble that averages its members' log-probabilities step by step.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "luong/models/seq2seq.h"
#include "luong/util/options.h"

namespace luong::evaluation {

/// How a finished hypothesis is ranked: log p / length^alpha, or GNMT's log p / ((5 + length) / 6)^alpha.
enum class LengthPenalty { kPower, kGnmt };

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_SEARCH_OPTIONS(X)                                                                                 \
  X(std::int64_t, beam, 1, "beam", "search", "beam width (1 = greedy)", ::luong::options::closed(1, 64),         \
    kMayChange)                                                                                                 \
  X(double, alpha, 0.6, "alpha", "search", "length normalisation exponent (0 = raw log p)",                      \
    ::luong::options::closed(0, 10), kMayChange)                                                                \
  X(::luong::evaluation::LengthPenalty, length_penalty, ::luong::evaluation::LengthPenalty::kPower,              \
    "length-penalty", "search", "power (log p / length^alpha) or gnmt (log p / ((5 + length) / 6)^alpha)",       \
    ::luong::options::kAnyValue, kMayChange)                                                                    \
  X(double, coverage, 0.0, "coverage", "search",                                                                 \
    "GNMT coverage penalty beta: + beta * sum over source words of log(min(attention received, 1))",             \
    ::luong::options::closed(0, 10), kMayChange)                                                                \
  X(std::int64_t, block_ngram, 0, "block-ngram", "search",                                                        \
    "forbid repeating any n-gram of this length within a translation (0 = off)", ::luong::options::closed(0, 10), \
    kMayChange)                                                                                                 \
  X(std::int64_t, max_len, 50, "max-len", "search", "most target tokens per sentence (<eos> included)",          \
    ::luong::options::closed(1, 1000), kMayChange)                                                              \
  X(double, max_ratio, 0.0, "max-ratio", "search",                                                               \
    "most target tokens per source token (0 = only --max-len)", ::luong::options::closed(0, 100), kMayChange)   \
  X(std::int64_t, nbest, 1, "nbest", "search", "translations per sentence, best first (at most --beam)",        \
    ::luong::options::closed(1, 64), kMayChange)                                                                \
  X(bool, unk_replace, false, "unk-replace", "search",                                                           \
    "replace each <unk> by the source word it attends to most (or its --dictionary entry)",                     \
    ::luong::options::kAnyValue, kMayChange)                                                                    \
  X(std::string, dictionary, "", "dictionary", "search",                                                         \
    "with --unk-replace: a TSV of source<TAB>target words", ::luong::options::kAnyValue, kMayChange)             \
  X(std::int64_t, batch, 64, "batch", "search", "sentences translated together",                                 \
    ::luong::options::closed(1, 4096), kMayChange)

struct SearchOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_SEARCH_OPTIONS)
  /// Keep each step's attention weights (for trace and <unk> replacement).
  bool keep_attention = false;
};

struct Hypothesis {
  std::vector<std::int64_t> tokens;              ///< without <sos>; ends before <eos>
  double log_prob = 0;                           ///< sum of token log-probabilities, <eos> included
  double score = 0;                              ///< log_prob / length penalty (+ coverage penalty)
  bool finished = false;                         ///< ended with <eos> (not cut at the length limit)
  std::vector<std::vector<float>> attention;     ///< per produced token (and <eos>): weights over source
  std::vector<float> positions;                  ///< local attention's p_t per step (empty for global)
};

/// What search steps through: one model, or an ensemble whose members share their vocabularies and
/// whose log-probabilities are averaged at every step (attention weights too, for traces).
class Scorer {
 public:
  explicit Scorer(std::vector<models::Seq2SeqImpl*> members);

  struct State {
    std::vector<models::AttentionMemory> memories;
    std::vector<models::DecoderState> states;
    /// The rows of a subset / reordering of the batch; memories too when `memories_too`.
    State index_select(const torch::Tensor& rows, bool memories_too) const;
  };
  struct Step {
    torch::Tensor scores;   ///< [B, V]: logits for one model, averaged log-probabilities for ensembles
    bool log_probs = false;
    torch::Tensor weights;  ///< [B, S]
    torch::Tensor positions;
    State state;            ///< the state after the step
  };

  State start(const torch::Tensor& src, const torch::Tensor& lengths);
  Step step(const torch::Tensor& previous, const State& state, int64_t t);
  const torch::Device& device() const { return device_; }

 private:
  std::vector<models::Seq2SeqImpl*> members_;
  torch::Device device_;
};

/// Translates a batch: src [B, S] int64, src_lengths [B] -> for each row, up to options.nbest
/// hypotheses, best first. Runs under InferenceMode in eval mode. Beam 1 is greedy decoding (rows
/// leave the batch as they finish); wider beams search all sentences and their beams as one batch.
std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                            const SearchOptions& options);

/// search() with one model, the best hypothesis of each row.
std::vector<Hypothesis> translate(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                  const SearchOptions& options);

/// The first implementation of beam search, kept as the reference the batched one is tested
/// against: one sentence (src [1, S]) with its beams as the batch, the power length penalty, no
/// coverage, blocking or ratio. With beam 1 it makes the same choices as greedy decoding.
Hypothesis reference_beam_search(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                 const SearchOptions& options);

}  // namespace luong::evaluation

template <>
struct luong::options::EnumNames<luong::evaluation::LengthPenalty> {
  static constexpr std::pair<luong::evaluation::LengthPenalty, const char*> values[] = {
      {luong::evaluation::LengthPenalty::kPower, "power"}, {luong::evaluation::LengthPenalty::kGnmt, "gnmt"}};
};
