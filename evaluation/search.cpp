#include "luong/evaluation/search.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "luong/data_pipeline/vocabulary.h"
#include "luong/evaluation/best_continuations.h"
#include "luong/models/row_exponentials.h"
#include "luong/util/error.h"

namespace luong::evaluation {
namespace {

using data::Vocabulary;
constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

double length_penalty(std::size_t length, const SearchOptions& options) {
  const auto n = static_cast<double>(std::max<std::size_t>(length, 1));
  if (options.alpha == 0) return 1.0;
  return options.length_penalty == LengthPenalty::kGnmt ? std::pow((5.0 + n) / 6.0, options.alpha)
                                                        : std::pow(n, options.alpha);
}

// GNMT's coverage penalty: beta * sum over the source's real positions of log(min(attention, 1)).
double coverage_penalty(const std::vector<double>& coverage, const SearchOptions& options) {
  if (options.coverage == 0) return 0.0;
  double sum = 0;
  for (const double c : coverage) sum += std::log(std::min(std::max(c, 1e-12), 1.0));
  return options.coverage * sum;
}

std::vector<float> row_of(const torch::Tensor& weights, int64_t row, int64_t length) {
  const torch::Tensor r = weights[row].slice(0, 0, length).to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
}

// Each row's longest output: --max-len, and --max-ratio times its source (without <eos>).
std::vector<int64_t> length_limits(const torch::Tensor& cpu_lengths, const SearchOptions& options) {
  std::vector<int64_t> limits;
  for (int64_t b = 0; b < cpu_lengths.size(0); ++b) {
    int64_t limit = options.max_len;
    if (options.max_ratio > 0) {
      const auto words = static_cast<double>(std::max<int64_t>(cpu_lengths[b].item<int64_t>() - 1, 1));
      limit = std::min(limit, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(options.max_ratio * words))));
    }
    limits.push_back(limit);
  }
  return limits;
}

// The tokens that would repeat an n-gram of `tokens` if appended (n = options.block_ngram).
std::vector<int64_t> blocked_tokens(const std::vector<int64_t>& tokens, int64_t n) {
  std::vector<int64_t> out;
  if (n <= 0 || static_cast<int64_t>(tokens.size()) < n) return out;
  const auto size = static_cast<int64_t>(tokens.size());
  // An n-gram ending at position i (i >= n - 1) repeats if its first n - 1 tokens equal the last n - 1.
  for (int64_t end = n - 1; end < size; ++end) {
    bool same = true;
    for (int64_t k = 0; k < n - 1 && same; ++k) same = tokens[static_cast<std::size_t>(end - (n - 1) + k)] == tokens[static_cast<std::size_t>(size - (n - 1) + k)];
    if (same) out.push_back(tokens[static_cast<std::size_t>(end)]);
  }
  return out;
}

// Sets scores[row, token] to -inf for every token that would repeat an n-gram of that row's tokens.
void block_repeats(torch::Tensor& scores, const std::vector<const std::vector<int64_t>*>& row_tokens, int64_t n) {
  if (n <= 0) return;
  std::vector<int64_t> rows, columns;
  for (std::size_t r = 0; r < row_tokens.size(); ++r) {
    if (row_tokens[r] == nullptr) continue;
    for (const int64_t token : blocked_tokens(*row_tokens[r], n)) {
      rows.push_back(static_cast<int64_t>(r));
      columns.push_back(token);
    }
  }
  if (rows.empty()) return;
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(scores.device());
  scores.index_put_({torch::tensor(rows, options), torch::tensor(columns, options)},
                    torch::tensor(-std::numeric_limits<double>::infinity(), scores.options()));
}

// Each row's most likely token [B] int64 and its log-probability [B], from logits [B, V]. On the CPU
// one pass per row (models/row_exponentials.h); LibTorch's log_softmax followed by max(1) costs
// more than the vocabulary projection itself at the notebook's sizes.
std::pair<torch::Tensor, torch::Tensor> most_likely(torch::Tensor logits, bool log_probs) {
  if (log_probs) {
    const auto [best, index] = logits.max(1);
    return {index, best};
  }
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

// Each sentence's `count` best continuations, best first, for rows [sentences * beams, V] of scores
// (logits, or log-probabilities when `log_probs`) and each row's log-probability so far (-inf for an
// unused row): values [sentences, count] (double: base + log-probability) and indices [sentences,
// count] into the sentence's beams x vocabulary, on the CPU. There, the log-softmax's normalisers and
// then one read of the scores (evaluation/best_continuations.h); on other devices LibTorch's
// log_softmax, conversion, sum and top-k.
std::pair<torch::Tensor, torch::Tensor> top_continuations(const torch::Tensor& scores, bool log_probs,
                                                          const std::vector<double>& base, int64_t beams, int64_t count) {
  const int64_t rows = scores.size(0), vocab = scores.size(1), sentences = rows / beams;
  const auto type = scores.scalar_type();
  if (!scores.device().is_cpu() || !(type == torch::kFloat || type == torch::kDouble)) {
    const torch::Tensor lp = (log_probs ? scores : torch::log_softmax(scores, 1)).to(torch::kDouble);
    const torch::Tensor totals = (lp + torch::tensor(base, lp.options()).unsqueeze(1)).view({sentences, beams * vocab});
    const auto [values, indices] = totals.topk(count, 1);
    return {values.to(torch::kCPU).contiguous(), indices.to(torch::kCPU).contiguous()};
  }
  const torch::Tensor x = scores.contiguous();
  torch::Tensor values = torch::empty({sentences, count}, torch::kDouble);
  torch::Tensor indices = torch::empty({sentences, count}, torch::kLong);
  torch::Tensor maxima, log_sums;
  if (!log_probs) {
    maxima = torch::empty({rows}, x.options());
    log_sums = torch::empty({rows}, x.options());
  }
  AT_DISPATCH_FLOATING_TYPES(type, "top_continuations", [&] {
    const scalar_t* data = x.data_ptr<scalar_t>();
    scalar_t* row_maxima = log_probs ? nullptr : maxima.data_ptr<scalar_t>();
    scalar_t* row_log_sums = log_probs ? nullptr : log_sums.data_ptr<scalar_t>();
    at::parallel_for(0, sentences, 4, [&](int64_t first, int64_t last) {
      if (!log_probs) {
        models::log_sum_exponentials(data + first * beams * vocab, (last - first) * beams, vocab, vocab,
                                     row_maxima + first * beams, row_log_sums + first * beams);
      }
      evaluation::best_continuations(data, base.data(), beams, vocab, count, first, last, values.data_ptr<double>(),
                                     indices.data_ptr<int64_t>(), row_maxima, row_log_sums);
    });
  });
  return {values, indices};
}

// Rows leave the batch as soon as they produce <eos> or reach their limit: the vocabulary
// projection, the largest product of a step, then runs only over the sentences still being
// translated. One copy to the host per step: the chosen tokens and their log-probabilities.
std::vector<Hypothesis> greedy(Scorer& scorer, const torch::Tensor& src, const torch::Tensor& lengths,
                               const SearchOptions& options) {
  const int64_t batch = src.size(0);
  const torch::Tensor cpu_lengths = lengths.to(torch::kCPU, torch::kLong).contiguous();
  const std::vector<int64_t> limits = length_limits(cpu_lengths, options);
  Scorer::State state = scorer.start(src, lengths);
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(scorer.device());
  torch::Tensor previous = torch::full({batch}, Vocabulary::kSos, long_options);
  std::vector<Hypothesis> out(static_cast<std::size_t>(batch));
  std::vector<int64_t> rows(static_cast<std::size_t>(batch));  // the batch row of each active row
  for (int64_t b = 0; b < batch; ++b) rows[static_cast<std::size_t>(b)] = b;
  for (int64_t t = 0; t < options.max_len && !rows.empty(); ++t) {
    Scorer::Step step = scorer.step(previous, state, t);
    if (options.block_ngram > 0) {
      std::vector<const std::vector<int64_t>*> tokens;
      for (const int64_t b : rows) tokens.push_back(&out[static_cast<std::size_t>(b)].tokens);
      block_repeats(step.scores, tokens, options.block_ngram);
    }
    const auto [index, best] = most_likely(step.scores, step.log_probs);
    const torch::Tensor chosen = torch::stack({index.to(torch::kDouble), best.to(torch::kDouble)}).to(torch::kCPU);
    const double* choice = chosen.data_ptr<double>();
    const auto active = static_cast<int64_t>(rows.size());
    const bool keep = options.keep_attention;
    const torch::Tensor weights_cpu = keep ? step.weights.to(torch::kCPU, torch::kFloat) : torch::Tensor();
    const torch::Tensor positions_cpu =
        keep && step.positions.defined() ? step.positions.to(torch::kCPU, torch::kFloat).contiguous() : torch::Tensor();
    std::vector<int64_t> still_active;  // indices into `rows`
    for (int64_t i = 0; i < active; ++i) {
      const int64_t b = rows[static_cast<std::size_t>(i)];
      Hypothesis& h = out[static_cast<std::size_t>(b)];
      const auto token = static_cast<int64_t>(choice[i]);
      h.log_prob += choice[active + i];
      if (keep) {
        h.attention.push_back(row_of(weights_cpu, i, cpu_lengths.data_ptr<int64_t>()[b]));
        if (positions_cpu.defined()) h.positions.push_back(positions_cpu.data_ptr<float>()[i]);
      }
      if (token == Vocabulary::kEos) {
        h.finished = true;
      } else {
        h.tokens.push_back(token);
        if (t + 1 < limits[static_cast<std::size_t>(b)]) still_active.push_back(i);
      }
    }
    if (static_cast<int64_t>(still_active.size()) == active) {
      previous = index;
      state = std::move(step.state);
      continue;
    }
    if (still_active.empty()) break;
    const torch::Tensor keep_rows = torch::tensor(still_active, torch::kLong).to(scorer.device());
    previous = index.index_select(0, keep_rows);
    state = step.state.index_select(keep_rows, /*memories_too=*/true);
    std::vector<int64_t> next_rows;
    for (const int64_t i : still_active) next_rows.push_back(rows[static_cast<std::size_t>(i)]);
    rows = std::move(next_rows);
  }
  for (auto& h : out) h.score = h.log_prob / length_penalty(h.tokens.size() + (h.finished ? 1 : 0), options);
  return out;
}

// ---- batched beam search --------------------------------------------------------------------------
// The sentences' beams are rows of one batch, K rows per sentence (rows past a sentence's live beams
// are padding with base score -inf). Each step scores every row, takes each sentence's top 2K
// candidates over its K x V continuations on the device, and walks them on the host exactly as the
// one-sentence search does; sentences that are done leave the batch.

struct Beam {
  std::vector<int64_t> tokens;
  double log_prob = 0;
  std::vector<std::vector<float>> attention;
  std::vector<float> positions;
};

struct Sentence {
  int64_t index = 0;          // its row in the input batch
  int64_t source_length = 0;  // with <eos>
  int64_t limit = 0;
  std::vector<Beam> beams;    // live, at most K
  std::vector<Hypothesis> finished;
  bool done = false;
};

double final_score(const Hypothesis& h, const std::vector<double>& coverage, const SearchOptions& options) {
  const std::size_t length = h.tokens.size() + (h.finished ? 1 : 0);
  return h.log_prob / length_penalty(length, options) + coverage_penalty(coverage, options);
}

Hypothesis to_hypothesis(Beam beam, bool finished) {
  Hypothesis h;
  h.tokens = std::move(beam.tokens);
  h.log_prob = beam.log_prob;
  h.finished = finished;
  h.attention = std::move(beam.attention);
  h.positions = std::move(beam.positions);
  return h;
}

// The coverage of row `row` over its sentence's real source positions, as doubles.
std::vector<double> coverage_of(const torch::Tensor& coverage_cpu, int64_t row, int64_t length) {
  if (!coverage_cpu.defined()) return {};
  const double* c = coverage_cpu.data_ptr<double>() + row * coverage_cpu.size(1);
  return std::vector<double>(c, c + length);
}

std::vector<Sentence> start_sentences(const torch::Tensor& cpu_lengths, const SearchOptions& options) {
  const std::vector<int64_t> limits = length_limits(cpu_lengths, options);
  std::vector<Sentence> sentences(static_cast<std::size_t>(cpu_lengths.size(0)));
  for (std::size_t b = 0; b < sentences.size(); ++b) {
    Sentence& s = sentences[b];
    s.index = static_cast<int64_t>(b);
    s.source_length = cpu_lengths[s.index].item<int64_t>();
    s.limit = limits[b];
    s.beams.resize(1);
  }
  return sentences;
}

// The batch's rows as the step reads them: each live beam's last token and score, `beams` rows a
// sentence.
struct BatchRows {
  std::vector<int64_t> previous;
  std::vector<double> base;
  std::vector<const std::vector<int64_t>*> tokens;
};

BatchRows gather_rows(const std::vector<Sentence*>& live, int64_t beams) {
  const auto rows = live.size() * static_cast<std::size_t>(beams);
  BatchRows out{std::vector<int64_t>(rows, Vocabulary::kSos), std::vector<double>(rows, kMinusInfinity),
                std::vector<const std::vector<int64_t>*>(rows, nullptr)};
  for (std::size_t s = 0; s < live.size(); ++s) {
    for (std::size_t j = 0; j < live[s]->beams.size(); ++j) {
      const Beam& beam = live[s]->beams[j];
      const std::size_t row = s * static_cast<std::size_t>(beams) + j;
      out.previous[row] = beam.tokens.empty() ? Vocabulary::kSos : beam.tokens.back();
      out.base[row] = beam.log_prob;
      out.tokens[row] = &beam.tokens;
    }
  }
  return out;
}

// One step's outcome on the host: each sentence's best `candidates` continuations (index = row in
// its block x vocab + token), and what the hypotheses keep of the step.
struct HostStep {
  torch::Tensor values, indices;  // [sentences, candidates]
  int64_t candidates = 0, vocab = 0, beams = 0;
  torch::Tensor weights, positions, coverage;  // defined when kept
};

// Walks sentence `s`'s candidates into its next beams and finished hypotheses; returns whether it
// stays in the batch, and then appends its K source rows to `next_rows`.
bool advance_sentence(Sentence& sentence, std::size_t s, const HostStep& step, int64_t t, const SearchOptions& options,
                      std::vector<int64_t>& next_rows) {
  const int64_t k = options.beam;
  const double* values = step.values.data_ptr<double>() + static_cast<int64_t>(s) * step.candidates;
  const int64_t* indices = step.indices.data_ptr<int64_t>() + static_cast<int64_t>(s) * step.candidates;
  std::vector<Beam> next;
  std::vector<int64_t> from_rows;
  for (int64_t c = 0; c < step.candidates && static_cast<int64_t>(next.size()) < k; ++c) {
    if (values[c] == kMinusInfinity) break;
    const int64_t from = indices[c] / step.vocab, token = indices[c] % step.vocab;
    const int64_t row = static_cast<int64_t>(s) * step.beams + from;
    Beam beam = sentence.beams[static_cast<std::size_t>(from)];
    beam.log_prob = values[c];
    if (step.weights.defined()) {
      beam.attention.push_back(row_of(step.weights, row, sentence.source_length));
      if (step.positions.defined()) beam.positions.push_back(step.positions[row].item<float>());
    }
    if (token == Vocabulary::kEos) {
      Hypothesis h = to_hypothesis(std::move(beam), true);
      h.score = final_score(h, coverage_of(step.coverage, row, sentence.source_length), options);
      sentence.finished.push_back(std::move(h));
      if (static_cast<int64_t>(sentence.finished.size()) >= k) break;
      continue;
    }
    beam.tokens.push_back(token);
    next.push_back(std::move(beam));
    from_rows.push_back(row);
  }
  const bool full = static_cast<int64_t>(sentence.finished.size()) >= k;
  const bool at_limit = t + 1 >= sentence.limit;
  if (full || next.empty() || at_limit) {
    for (std::size_t j = 0; j < next.size() && !full; ++j) {
      Hypothesis h = to_hypothesis(std::move(next[j]), false);
      h.score = final_score(h, coverage_of(step.coverage, from_rows[j], sentence.source_length), options);
      sentence.finished.push_back(std::move(h));
    }
    sentence.done = true;
    return false;
  }
  sentence.beams = std::move(next);
  for (int64_t j = 0; j < k; ++j) {
    next_rows.push_back(from_rows[static_cast<std::size_t>(std::min<int64_t>(j, static_cast<int64_t>(from_rows.size()) - 1))]);
  }
  return true;
}

// Each sentence's n-best: complete translations first; among them, and then among the rest, the
// best score.
std::vector<std::vector<Hypothesis>> best_first(std::vector<Sentence>& sentences, int64_t nbest) {
  std::vector<std::vector<Hypothesis>> out;
  for (auto& sentence : sentences) {
    std::stable_sort(sentence.finished.begin(), sentence.finished.end(), [](const Hypothesis& a, const Hypothesis& b) {
      if (a.finished != b.finished) return a.finished;
      return a.score > b.score;
    });
    if (static_cast<int64_t>(sentence.finished.size()) > nbest) sentence.finished.resize(static_cast<std::size_t>(nbest));
    out.push_back(std::move(sentence.finished));
  }
  return out;
}

std::vector<std::vector<Hypothesis>> beam_batch(Scorer& scorer, const torch::Tensor& src, const torch::Tensor& lengths,
                                                const SearchOptions& options) {
  const int64_t k = options.beam;
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(scorer.device());
  std::vector<Sentence> sentences = start_sentences(lengths.to(torch::kCPU, torch::kLong).contiguous(), options);
  // The first step runs once per sentence: its K rows would all be the same encoder row and <sos>.
  // Each sentence then has K rows, all from its encoder row, until it leaves the batch.
  Scorer::State state = scorer.start(src, lengths);
  std::vector<Sentence*> live;  // sentences in the batch, `beams` rows each
  for (auto& s : sentences) live.push_back(&s);
  const bool track_coverage = options.coverage > 0;
  torch::Tensor coverage;  // [rows, S] attention received so far (GNMT)
  for (int64_t t = 0; !live.empty(); ++t) {
    const int64_t beams = t == 0 ? 1 : k;
    const auto rows = static_cast<int64_t>(live.size()) * beams;
    const BatchRows batch = gather_rows(live, beams);
    Scorer::Step step = scorer.step(torch::tensor(batch.previous, long_options), state, t);
    torch::Tensor scores = step.scores;
    bool log_probs = step.log_probs;
    if (options.block_ngram > 0) {  // blocked after normalising, so the others keep their probabilities
      if (!log_probs) scores = torch::log_softmax(scores, 1);
      log_probs = true;
      block_repeats(scores, batch.tokens, options.block_ngram);
    }
    HostStep host;
    host.vocab = scores.size(1);
    host.beams = beams;
    host.candidates = std::min<int64_t>(2 * k, beams * host.vocab);
    std::tie(host.values, host.indices) = top_continuations(scores, log_probs, batch.base, beams, host.candidates);
    if (options.keep_attention) {
      host.weights = step.weights.to(torch::kCPU, torch::kFloat);
      if (step.positions.defined()) host.positions = step.positions.to(torch::kCPU, torch::kFloat);
    }
    torch::Tensor stepped_coverage;
    if (track_coverage) {
      stepped_coverage = (coverage.defined() ? coverage : torch::zeros_like(step.weights, torch::kDouble)) +
                         step.weights.to(torch::kDouble);
      host.coverage = stepped_coverage.to(torch::kCPU).contiguous();
    }
    std::vector<int64_t> next_rows;  // for every surviving sentence, K source rows
    std::vector<Sentence*> still_live;
    for (std::size_t s = 0; s < live.size(); ++s) {
      if (advance_sentence(*live[s], s, host, t, options, next_rows)) still_live.push_back(live[s]);
    }
    live = std::move(still_live);
    if (live.empty()) break;
    const torch::Tensor index = torch::tensor(next_rows, long_options);
    // Rows stay inside their sentence's block of K, whose memories are all its encoder row: they
    // need reselecting only after the first step and when sentences left the batch.
    const bool sentences_left = static_cast<int64_t>(next_rows.size()) != rows;
    state = step.state.index_select(index, t == 0 || sentences_left);
    if (track_coverage) coverage = stepped_coverage.index_select(0, index);
  }
  return best_first(sentences, options.nbest);
}

}  // namespace

Scorer::Scorer(std::vector<models::Seq2SeqImpl*> members) : members_(std::move(members)), device_(torch::kCPU) {
  if (members_.empty()) throw Error("search needs at least one model");
  device_ = members_.front()->parameters().front().device();
  const int64_t vocab = members_.front()->options.target_vocab_size();
  for (const auto* member : members_) {
    if (member->options.target_vocab_size() != vocab) throw Error("ensemble members must share the target vocabulary");
  }
}

Scorer::State Scorer::State::index_select(const torch::Tensor& rows, bool memories_too) const {
  State out;
  for (std::size_t m = 0; m < states.size(); ++m) {
    out.states.push_back(states[m].index_select(rows));
    out.memories.push_back(memories_too ? memories[m].index_select(rows) : memories[m]);
  }
  return out;
}

Scorer::State Scorer::start(const torch::Tensor& src, const torch::Tensor& lengths) {
  State state;
  for (auto* member : members_) {
    models::EncodedSource encoded = member->encode(src, lengths);
    state.memories.push_back(std::move(encoded.memory));
    state.states.push_back(std::move(encoded.state));
  }
  return state;
}

Scorer::Step Scorer::step(const torch::Tensor& previous, const State& state, int64_t t) {
  Step out;
  if (members_.size() == 1) {
    models::DecoderStep step = members_[0]->decoder->step(previous, state.states[0], state.memories[0], t);
    out.scores = members_[0]->decoder->project(step.features);
    out.weights = step.weights;
    out.positions = step.positions;
    out.state.memories = state.memories;
    out.state.states.push_back(std::move(step.state));
    return out;
  }
  out.log_probs = true;
  out.state.memories = state.memories;
  for (std::size_t m = 0; m < members_.size(); ++m) {
    models::DecoderStep step = members_[m]->decoder->step(previous, state.states[m], state.memories[m], t);
    const torch::Tensor log_probs = torch::log_softmax(members_[m]->decoder->project(step.features), 1);
    out.scores = m == 0 ? log_probs : out.scores + log_probs;
    out.weights = m == 0 ? step.weights : out.weights + step.weights;
    if (step.positions.defined()) out.positions = m == 0 ? step.positions : out.positions + step.positions;
    out.state.states.push_back(std::move(step.state));
  }
  const auto count = static_cast<double>(members_.size());
  out.scores = out.scores / count;
  out.weights = out.weights / count;
  if (out.positions.defined()) out.positions = out.positions / count;
  return out;
}

std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                            const SearchOptions& options) {
  if (options.beam < 1) throw Error("beam width must be at least 1");
  if (options.max_len < 1) throw Error("maximum output length must be at least 1");
  if (options.nbest > options.beam) throw Error("--nbest " + std::to_string(options.nbest) + " needs --beam >= it");
  c10::InferenceMode inference;
  if (options.beam > 1) return beam_batch(scorer, src, src_lengths, options);
  std::vector<std::vector<Hypothesis>> out;
  for (auto& h : greedy(scorer, src, src_lengths, options)) out.push_back({std::move(h)});
  return out;
}

std::vector<Hypothesis> translate(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& src_lengths,
                                  const SearchOptions& options) {
  const bool was_training = model.is_training();
  model.eval();
  Scorer scorer({&model});
  SearchOptions best = options;
  best.nbest = 1;
  std::vector<Hypothesis> out;
  for (auto& hypotheses : search(scorer, src, src_lengths, best)) out.push_back(std::move(hypotheses.front()));
  if (was_training) model.train();
  return out;
}

Hypothesis reference_beam_search(models::Seq2SeqImpl& model, const torch::Tensor& src, const torch::Tensor& lengths,
                                 const SearchOptions& options) {
  c10::InferenceMode inference;
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
    for (const auto& beam : beams) previous_tokens.push_back(beam.tokens.empty() ? Vocabulary::kSos : beam.tokens.back());
    const torch::Tensor previous = torch::tensor(previous_tokens, torch::kLong).to(src.device());
    models::DecoderStep step = model.decoder->step(previous, state, memory, t);
    const torch::Tensor log_probs = torch::log_softmax(model.decoder->project(step.features), 1).to(torch::kCPU, torch::kDouble);
    const int64_t vocab = log_probs.size(1);
    std::vector<double> base;
    for (const auto& beam : beams) base.push_back(beam.log_prob);
    const torch::Tensor totals = log_probs + torch::tensor(base, torch::kDouble).unsqueeze(1);
    const int64_t candidates = std::min<int64_t>(2 * k, totals.numel());
    const auto [top_values, top_indices] = totals.view({-1}).topk(candidates);
    std::vector<Beam> next;
    std::vector<int64_t> rows;
    for (int64_t c = 0; c < candidates && static_cast<int64_t>(next.size()) < k; ++c) {
      const int64_t flat = top_indices[c].item<int64_t>();
      const int64_t from = flat / vocab, token = flat % vocab;
      Beam beam = beams[static_cast<std::size_t>(from)];
      beam.log_prob = top_values[c].item<double>();
      if (options.keep_attention) beam.attention.push_back(row_of(step.weights, from, source_length));
      if (token == Vocabulary::kEos) {
        Hypothesis h = to_hypothesis(std::move(beam), true);
        h.score = h.log_prob / length_penalty(h.tokens.size() + 1, options);
        finished.push_back(std::move(h));
        if (static_cast<int64_t>(finished.size()) >= k) break;
        continue;
      }
      beam.tokens.push_back(token);
      next.push_back(std::move(beam));
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
    Hypothesis h = to_hypothesis(std::move(beam), false);
    h.score = h.log_prob / length_penalty(h.tokens.size(), options);
    finished.push_back(std::move(h));
  }
  if (finished.empty()) return {};
  return *std::max_element(finished.begin(), finished.end(), [](const Hypothesis& a, const Hypothesis& b) {
    if (a.finished != b.finished) return !a.finished;
    return a.score < b.score;
  });
}

}  // namespace luong::evaluation
