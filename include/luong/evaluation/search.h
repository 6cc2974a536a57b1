#pragma once
// Greedy decoding and beam search over the decoders' single `step`.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "luong/models/seq2seq.h"
#include "luong/util/options.h"

namespace luong::evaluation {

// X(type, name, default, flag, group, help, range, on_resume): see luong/util/options.h.
#define LUONG_SEARCH_OPTIONS(X)                                                                                 \
  X(std::int64_t, beam, 1, "beam", "search", "beam width (1 = greedy)", ::luong::options::closed(1, 64),         \
    kMayChange)                                                                                                 \
  X(double, alpha, 0.6, "alpha", "search",                                                                       \
    "length normalisation: hypotheses ranked by log p / length^alpha (0 = raw log p)",                           \
    ::luong::options::closed(0, 10), kMayChange)                                                                \
  X(std::int64_t, max_len, 50, "max-len", "search", "most target tokens per sentence (<eos> included)",          \
    ::luong::options::closed(1, 1000), kMayChange)                                                              \
  X(std::int64_t, batch, 64, "batch", "search", "sentences translated together",                                 \
    ::luong::options::closed(1, 4096), kMayChange)

struct SearchOptions {
  LUONG_OPTIONS_STRUCT_BODY(LUONG_SEARCH_OPTIONS)
  /// Keep each step's attention weights (for trace).
  bool keep_attention = false;
};

struct Hypothesis {
  std::vector<std::int64_t> tokens;              ///< without <sos>; ends before <eos>
  double log_prob = 0;                           ///< sum of token log-probabilities, <eos> included
  double score = 0;                              ///< log_prob / length^alpha
  bool finished = false;                         ///< ended with <eos> (not cut at max_len)
  std::vector<std::vector<float>> attention;     ///< per produced token (and <eos>): weights over source
  std::vector<float> positions;                  ///< local attention's p_t per step (empty for global)
};

/// Beam search for one sentence: src [1, S], src_lengths [1]. With beam 1 it makes the same choices
/// as greedy decoding. Call under InferenceMode (translate() does).
Hypothesis beam_search(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                       const SearchOptions& options);

/// Translates a batch. src [B, S] int64, src_lengths [B] -> one hypothesis per row. Runs under
/// InferenceMode in eval mode; beam 1 decodes the whole batch at once, wider beams one sentence at
/// a time with the beams as the batch.
std::vector<Hypothesis> translate(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                  const SearchOptions& options);

}  // namespace luong::evaluation
