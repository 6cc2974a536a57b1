#include "luong/evaluation/search.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "luong/data_pipeline/vocabulary.h"
#include "luong/models/row_exponentials.h"
#include "luong/util/error.h"

namespace luong::evaluation {
namespace {

using data::Vocabulary;

double normalised(double log_prob, std::size_t length, double alpha) {
  return alpha == 0 ? log_prob : log_prob / std::pow(static_cast<double>(std::max<std::size_t>(length, 1)), alpha);
}

std::vector<float> row_of(const torch::Tensor& weights, int64_t row, int64_t length) {
  const torch::Tensor r = weights[row].slice(0, 0, length).to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
}

// Each row's most likely token [B] int64 and its log-probability [B], from logits [B, V]. On the CPU
// one pass per row (models/row_exponentials.h); LibTorch's log_softmax followed by max(1) costs
// more than the vocabulary projection itself at the notebook's sizes.
std::pair<torch::Tensor, torch::Tensor> most_likely(torch::Tensor logits) {
  if (!logits.device().is_cpu() || !(logits.scalar_type() == torch::kFloat || logits.scalar_type() == torch::kDouble)) {
    const auto [best, index] = torch::log_softmax(logits, 1).max(1);
    return {index, best};
  }
  logits = logits.contiguous();  // overwritten with exponentials: the caller keeps no reference
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  torch::Tensor index = torch::empty({rows}, logits.options().dtype(torch::kLong));
  torch::Tensor maxima = torch::empty({rows}, logits.options());
  torch::Tensor sums = torch::empty({rows}, logits.options());
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "most_likely", [&] {
    scalar_t* x = logits.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 8, [&](int64_t begin, int64_t end) {
      models::exponentiate_rows(x + begin * vocab, end - begin, vocab, vocab, maxima.data_ptr<scalar_t>() + begin,
                                sums.data_ptr<scalar_t>() + begin, index.data_ptr<int64_t>() + begin);
    });
  });
  return {index, sums.log().neg_()};  // log softmax at the maximum: -log sum_j exp(x_j - max)
}

// Rows leave the batch as soon as they produce <eos>: the vocabulary projection, the largest
// product of a step, then runs only over the sentences still being translated.
std::vector<Hypothesis> greedy(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& lengths,
                               const SearchOptions& options) {
  const int64_t batch = src.size(0);
  const torch::Tensor cpu_lengths = lengths.to(torch::kCPU, torch::kLong).contiguous();
  models::EncodedSource encoded = model.encode(src, lengths);
  models::DecoderState state = encoded.state;
  models::AttentionMemory memory = encoded.memory;
  torch::Tensor previous = torch::full({batch}, Vocabulary::kSos, torch::TensorOptions().dtype(torch::kLong).device(src.device()));
  std::vector<Hypothesis> out(static_cast<std::size_t>(batch));
  std::vector<int64_t> rows(static_cast<std::size_t>(batch));  // the batch row of each active row
  for (int64_t b = 0; b < batch; ++b) rows[static_cast<std::size_t>(b)] = b;
  for (int64_t t = 0; t < options.max_len && !rows.empty(); ++t) {
    models::DecoderStep step = model.decoder->step(previous, state, memory, t);
    const auto [index, best] = most_likely(model.decoder->project(step.features));
    const torch::Tensor best_cpu = best.to(torch::kCPU, torch::kDouble).contiguous();
    const torch::Tensor index_cpu = index.to(torch::kCPU).contiguous();
    const double* best_values = best_cpu.data_ptr<double>();
    const int64_t* tokens = index_cpu.data_ptr<int64_t>();
    const torch::Tensor weights_cpu = options.keep_attention ? step.weights.to(torch::kCPU, torch::kFloat) : torch::Tensor();
    const torch::Tensor positions_cpu =
        options.keep_attention && step.positions.defined() ? step.positions.to(torch::kCPU, torch::kFloat).contiguous() : torch::Tensor();
    std::vector<int64_t> still_active;  // indices into `rows`
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const int64_t b = rows[i];
      const auto row = static_cast<int64_t>(i);
      Hypothesis& h = out[static_cast<std::size_t>(b)];
      h.log_prob += best_values[i];
      if (options.keep_attention) {
        h.attention.push_back(row_of(weights_cpu, row, cpu_lengths.data_ptr<int64_t>()[b]));
        if (positions_cpu.defined()) h.positions.push_back(positions_cpu.data_ptr<float>()[i]);
      }
      if (tokens[i] == Vocabulary::kEos) {
        h.finished = true;
      } else {
        h.tokens.push_back(tokens[i]);
        still_active.push_back(row);
      }
    }
    if (still_active.size() == rows.size()) {
      previous = index;
      state = std::move(step.state);
      continue;
    }
    if (still_active.empty()) break;
    const torch::Tensor keep = torch::tensor(still_active, torch::kLong).to(src.device());
    previous = index.index_select(0, keep);
    state = step.state.index_select(keep);
    memory = memory.index_select(keep);
    std::vector<int64_t> next_rows;
    for (const int64_t i : still_active) next_rows.push_back(rows[static_cast<std::size_t>(i)]);
    rows = std::move(next_rows);
  }
  for (auto& h : out) h.score = normalised(h.log_prob, h.tokens.size() + (h.finished ? 1 : 0), options.alpha);
  return out;
}

struct Beam {
  Hypothesis hypothesis;
};

}  // namespace

Hypothesis beam_search(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& lengths,
                       const SearchOptions& options) {
  const int64_t k = options.beam;
  const int64_t source_length = lengths.to(torch::kCPU, torch::kLong)[0].item<int64_t>();
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(src.device());
  models::EncodedSource encoded = model.encode(src, lengths);
  std::vector<Beam> beams(1);
  std::vector<Hypothesis> finished;
  models::DecoderState state = encoded.state;
  models::AttentionMemory memory = encoded.memory;
  for (int64_t t = 0; t < options.max_len && !beams.empty(); ++t) {
    std::vector<int64_t> previous_tokens;
    for (const auto& beam : beams) {
      previous_tokens.push_back(beam.hypothesis.tokens.empty() ? Vocabulary::kSos : beam.hypothesis.tokens.back());
    }
    const torch::Tensor previous = torch::tensor(previous_tokens, torch::kLong).to(src.device());
    models::DecoderStep step = model.decoder->step(previous, state, memory, t);
    const torch::Tensor log_probs = torch::log_softmax(model.decoder->project(step.features), 1).to(torch::kCPU, torch::kDouble);
    const int64_t vocab = log_probs.size(1);
    std::vector<double> base;
    for (const auto& beam : beams) base.push_back(beam.hypothesis.log_prob);
    const torch::Tensor totals = log_probs + torch::tensor(base, torch::kDouble).unsqueeze(1);
    const int64_t candidates = std::min<int64_t>(2 * k, totals.numel());
    const auto [top_values, top_indices] = totals.view({-1}).topk(candidates);
    const torch::Tensor weights_cpu = options.keep_attention ? step.weights.to(torch::kCPU, torch::kFloat) : torch::Tensor();
    const torch::Tensor positions_cpu =
        options.keep_attention && step.positions.defined() ? step.positions.to(torch::kCPU, torch::kFloat) : torch::Tensor();

    std::vector<Beam> next;
    std::vector<int64_t> rows;
    for (int64_t c = 0; c < candidates && static_cast<int64_t>(next.size()) < k; ++c) {
      const int64_t flat = top_indices[c].item<int64_t>();
      const int64_t from = flat / vocab;
      const int64_t token = flat % vocab;
      Hypothesis h = beams[static_cast<std::size_t>(from)].hypothesis;
      h.log_prob = top_values[c].item<double>();
      if (options.keep_attention) {
        h.attention.push_back(row_of(weights_cpu, from, source_length));
        if (positions_cpu.defined()) h.positions.push_back(positions_cpu[from].item<float>());
      }
      if (token == Vocabulary::kEos) {
        h.finished = true;
        h.score = normalised(h.log_prob, h.tokens.size() + 1, options.alpha);
        finished.push_back(std::move(h));
        if (static_cast<int64_t>(finished.size()) >= k) break;
        continue;
      }
      h.tokens.push_back(token);
      next.push_back({std::move(h)});
      rows.push_back(from);
    }
    if (static_cast<int64_t>(finished.size()) >= k) break;
    beams = std::move(next);
    if (beams.empty()) break;
    const torch::Tensor index = torch::tensor(rows, torch::kLong).to(src.device());
    state = step.state.index_select(index);
    if (memory.encoder_outputs.size(0) != index.size(0)) {
      memory = encoded.memory.index_select(torch::zeros({index.size(0)}, long_options));
    }
  }
  for (auto& beam : beams) {
    beam.hypothesis.score = normalised(beam.hypothesis.log_prob, beam.hypothesis.tokens.size(), options.alpha);
    finished.push_back(std::move(beam.hypothesis));
  }
  if (finished.empty()) return {};
  // Prefer complete translations; among them the best normalised score.
  return *std::max_element(finished.begin(), finished.end(), [](const Hypothesis& a, const Hypothesis& b) {
    if (a.finished != b.finished) return !a.finished;
    return a.score < b.score;
  });
}

std::vector<Hypothesis> translate(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                  const SearchOptions& options) {
  if (options.beam < 1) throw Error("beam width must be at least 1");
  if (options.max_len < 1) throw Error("maximum output length must be at least 1");
  const bool was_training = model.is_training();
  model.eval();
  c10::InferenceMode inference;
  std::vector<Hypothesis> out;
  if (options.beam == 1) {
    out = greedy(model, src, src_lengths, options);
  } else {
    for (int64_t b = 0; b < src.size(0); ++b) {
      const int64_t length = src_lengths.to(torch::kCPU)[b].item<int64_t>();
      out.push_back(beam_search(model, src.slice(0, b, b + 1).slice(1, 0, length), src_lengths.slice(0, b, b + 1), options));
    }
  }
  if (was_training) model.train();
  return out;
}

}  // namespace luong::evaluation
