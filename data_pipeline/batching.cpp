#include "luong/data_pipeline/batching.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "luong/data_pipeline/vocabulary.h"
#include "luong/util/error.h"

namespace luong::data {

Batch Batch::to(const torch::Device& device) const {
  // To a GPU from pinned memory, without waiting: a copy from pageable memory makes the host wait
  // for the device to finish the previous step's work, once a tensor. (LibTorch's pinned-memory
  // allocator keeps each buffer until its copy is done.)
  const auto moved_to = [&](const torch::Tensor& t) {
    return device.is_cuda() && t.is_cpu() ? t.pin_memory().to(device, /*non_blocking=*/true) : t.to(device);
  };
  Batch moved = *this;
  moved.src = moved_to(src);
  moved.dec_in = moved_to(dec_in);
  moved.dec_tgt = moved_to(dec_tgt);
  moved.target_rows = moved_to(target_rows);
  return moved;
}

std::int64_t target_tokens(const std::vector<const EncodedPair*>& rows) {
  std::int64_t tokens = 0;
  for (const EncodedPair* row : rows) tokens += static_cast<std::int64_t>(row->target.size()) + 1;
  return tokens;
}

std::vector<std::int64_t> target_tokens_at_each_step(const std::vector<const EncodedPair*>& rows) {
  std::vector<std::int64_t> tokens;
  for (const EncodedPair* row : rows) {
    const std::size_t steps = row->target.size() + 1;
    if (tokens.size() < steps) tokens.resize(steps, 0);
    for (std::size_t t = 0; t < steps; ++t) ++tokens[t];
  }
  return tokens;
}

Batch make_batch(const std::vector<const EncodedPair*>& rows) {
  const auto batch = static_cast<std::int64_t>(rows.size());
  std::int64_t source_length = 1;
  std::int64_t target_length = 1;
  for (const EncodedPair* row : rows) {
    source_length = std::max<std::int64_t>(source_length, static_cast<std::int64_t>(row->source.size()));
    target_length = std::max<std::int64_t>(target_length, static_cast<std::int64_t>(row->target.size()) + 1);
  }
  Batch out;
  out.src = torch::zeros({batch, source_length}, torch::kLong);
  out.dec_in = torch::zeros({batch, target_length}, torch::kLong);
  out.dec_tgt = torch::zeros({batch, target_length}, torch::kLong);
  out.src_lengths = torch::zeros({batch}, torch::kLong);
  auto src = out.src.accessor<std::int64_t, 2>();
  auto dec_in = out.dec_in.accessor<std::int64_t, 2>();
  auto dec_tgt = out.dec_tgt.accessor<std::int64_t, 2>();
  auto lengths = out.src_lengths.accessor<std::int64_t, 1>();
  for (std::int64_t b = 0; b < batch; ++b) {
    const EncodedPair& row = *rows[static_cast<std::size_t>(b)];
    for (std::size_t s = 0; s < row.source.size(); ++s) src[b][static_cast<std::int64_t>(s)] = row.source[s];
    lengths[b] = static_cast<std::int64_t>(row.source.size());
    dec_in[b][0] = Vocabulary::kSos;
    for (std::size_t t = 0; t < row.target.size(); ++t) {
      dec_in[b][static_cast<std::int64_t>(t) + 1] = row.target[t];
      dec_tgt[b][static_cast<std::int64_t>(t)] = row.target[t];
    }
    dec_tgt[b][static_cast<std::int64_t>(row.target.size())] = Vocabulary::kEos;
    out.lines.push_back(row.line);
  }
  out.tokens_at_step = target_tokens_at_each_step(rows);
  out.tokens_at_step.resize(static_cast<std::size_t>(target_length), 0);  // (an empty batch's one step)
  out.target_rows = torch::empty({target_tokens(rows)}, torch::kLong);
  std::int64_t* rows_out = out.target_rows.data_ptr<std::int64_t>();
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto length = static_cast<std::int64_t>(rows[static_cast<std::size_t>(b)]->target.size()) + 1;
    for (std::int64_t t = 0; t < length; ++t) *rows_out++ = b * target_length + t;
  }
  return out;
}

std::vector<std::vector<const EncodedPair*>> plan_batches(const std::vector<EncodedPair>& pairs,
                                                         const BatchingOptions& options) {
  if (options.batch_size <= 0) throw Error("batch size must be positive");
  std::vector<const EncodedPair*> order;
  order.reserve(pairs.size());
  for (const auto& pair : pairs) {
    if (pair.source.empty()) throw Error("source sentence on line " + std::to_string(pair.line) + " is empty");
    order.push_back(&pair);
  }
  std::mt19937_64 rng(options.seed);
  if (options.shuffle) {
    for (std::size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[std::uniform_int_distribution<std::size_t>(0, i - 1)(rng)]);
    }
  }
  const auto length_of = [](const EncodedPair* p) { return std::max(p->source.size(), p->target.size() + 1); };
  if (options.bucket) {
    const std::size_t window =
        static_cast<std::size_t>(options.by_tokens ? options.batch_size * 4 : options.batch_size * 50);
    for (std::size_t begin = 0; begin < order.size(); begin += window) {
      const auto first = order.begin() + static_cast<std::ptrdiff_t>(begin);
      const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), begin + window));
      std::stable_sort(first, last, [&](auto* a, auto* b) { return length_of(a) < length_of(b); });
    }
  }

  std::vector<std::vector<const EncodedPair*>> groups;
  std::vector<const EncodedPair*> current;
  std::size_t longest = 0;
  for (const EncodedPair* pair : order) {
    if (options.by_tokens) {
      const std::size_t grown = std::max(longest, length_of(pair)) * (current.size() + 1);
      if (!current.empty() && grown > static_cast<std::size_t>(options.batch_size)) {
        groups.push_back(std::move(current));
        current.clear();
        longest = 0;
      }
      longest = std::max(longest, length_of(pair));
    } else if (current.size() == static_cast<std::size_t>(options.batch_size)) {
      groups.push_back(std::move(current));
      current.clear();
    }
    current.push_back(pair);
  }
  if (!current.empty()) groups.push_back(std::move(current));
  if (options.shuffle && options.bucket) {
    for (std::size_t i = groups.size(); i > 1; --i) {
      std::swap(groups[i - 1], groups[std::uniform_int_distribution<std::size_t>(0, i - 1)(rng)]);
    }
  }
  return groups;
}

std::vector<Batch> make_batches(const std::vector<EncodedPair>& pairs, const BatchingOptions& options) {
  std::vector<Batch> batches;
  for (const auto& group : plan_batches(pairs, options)) batches.push_back(make_batch(group));
  return batches;
}

std::vector<const EncodedPair*> shard_rows(const std::vector<const EncodedPair*>& rows, int rank, int world_size) {
  const std::size_t begin = rows.size() * static_cast<std::size_t>(rank) / static_cast<std::size_t>(world_size);
  const std::size_t end = rows.size() * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(world_size);
  return {rows.begin() + static_cast<std::ptrdiff_t>(begin), rows.begin() + static_cast<std::ptrdiff_t>(end)};
}

}  // namespace luong::data
