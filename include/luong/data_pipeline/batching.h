#pragma once
// Padded tensor batches, as the notebook's train_loader yields them.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "luong/data_pipeline/dataset.h"

namespace luong::data {

/// One batch. B = sentences, S = longest source (with <eos>), T = longest target + 1.
struct Batch {
  torch::Tensor src;          ///< [B, S] int64, padded with <pad>=0, each row ending in <eos>
  torch::Tensor dec_in;       ///< [B, T] int64: <sos> + target
  torch::Tensor dec_tgt;      ///< [B, T] int64: target + <eos>
  torch::Tensor src_lengths;  ///< [B] int64, on the CPU (pack_padded_sequence wants it there)
  torch::Tensor target_rows;  ///< [target_tokens(rows)] int64: flat indices b * T + t of dec_tgt's non-padding entries
  std::vector<std::size_t> lines;  ///< corpus line of each row
  std::vector<std::int64_t> tokens_at_step;  ///< [T]: non-padding entries of each column of dec_tgt

  Batch to(const torch::Device& device) const;  ///< src_lengths stays on the CPU; to a GPU, no waiting
};

struct BatchingOptions {
  /// Sentences per batch, or (with by_tokens) the most target tokens per batch.
  std::int64_t batch_size = 32;
  bool by_tokens = false;
  /// Sort by length within windows of 50 batches, so padding is small; batch order is still shuffled.
  bool bucket = false;
  /// Shuffle the pairs (and batches) with this seed; keep corpus order when false.
  bool shuffle = false;
  std::uint64_t seed = 0;
};

Batch make_batch(const std::vector<const EncodedPair*>& rows);

/// The target tokens of `rows`, each row's target + <eos> (dec_tgt's non-padding entries, were the
/// rows one batch).
std::int64_t target_tokens(const std::vector<const EncodedPair*>& rows);

/// How many of `rows` have a target token (target + <eos>) at each decoder step: [T], T the longest
/// target + 1 (dec_tgt's non-padding entries of each column, were the rows one batch).
std::vector<std::int64_t> target_tokens_at_each_step(const std::vector<const EncodedPair*>& rows);

/// The rows of each batch: `pairs` split into groups (the last may be smaller), deterministic for a
/// given seed. The pointers point into `pairs`.
std::vector<std::vector<const EncodedPair*>> plan_batches(const std::vector<EncodedPair>& pairs,
                                                         const BatchingOptions& options);

/// make_batch over every group of plan_batches.
std::vector<Batch> make_batches(const std::vector<EncodedPair>& pairs, const BatchingOptions& options);

/// Rank `rank`'s contiguous share of a batch's rows in data-parallel training: the shards of all
/// ranks partition `rows` in order, differing in size by at most one (some may be empty).
std::vector<const EncodedPair*> shard_rows(const std::vector<const EncodedPair*>& rows, int rank, int world_size);

}  // namespace luong::data
