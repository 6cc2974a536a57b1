#include "luong/evaluation/translator.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/dataset.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/line_reader.h"

namespace luong::evaluation {
namespace {

// A --dictionary (source<TAB>target per line) is read whole; a lexicon larger than this is not one.
constexpr std::uint64_t kMaxDictionaryBytes = std::uint64_t{256} << 20;

}  // namespace

Translator::Translator(std::vector<run::TrainedModel*> models) : models_(std::move(models)) {
  if (models_.empty()) throw Error("no model to translate with");
  const run::TrainedModel& first = *models_.front();
  for (const run::TrainedModel* other : models_) {
    if (!(*other->source_vocab == *first.source_vocab) || !(*other->target_vocab == *first.target_vocab) ||
        other->config.tokenizer != first.config.tokenizer || other->config.reverse_source != first.config.reverse_source) {
      throw Error("an ensemble's models must share their data preparation (tokenizers, vocabularies, --reverse-source): " +
                  printable(other->weights) + " differs from " + printable(first.weights));
    }
  }
}

void Translator::load_dictionary(const std::string& path) {
  if (path.empty() || path == dictionary_path_) return;
  std::optional<std::string> text = read_text_file(path, kMaxDictionaryBytes, "a dictionary");
  if (!text) throw Error(printable(path) + ": cannot open dictionary (no such file)");
  std::istringstream in(std::move(*text));
  dictionary_.clear();
  std::string line;
  for (std::size_t number = 1; true; ++number) {
    const LineStatus status = read_line(in, line);
    if (status == LineStatus::kEnd) break;
    const std::size_t tab = line.find('\t');
    if (status == LineStatus::kTooLong || tab == std::string::npos || data::find_invalid_utf8(line)) {
      throw DataError(printable(path) + ":" + std::to_string(number) + ": expected source<TAB>target");
    }
    const std::size_t end = line.find('\t', tab + 1);
    dictionary_.emplace(line.substr(0, tab), line.substr(tab + 1, end == std::string::npos ? end : end - tab - 1));
  }
  dictionary_path_ = path;
}

// Luong et al. (2015), following Jean et al.: each <unk> takes the source word its step attended to most.
std::string Translator::replace_unknowns(std::vector<std::string>& tokens, const Hypothesis& hypothesis,
                                         const std::vector<std::string>& source_words) const {
  for (std::size_t i = 0; i < tokens.size() && i < hypothesis.attention.size(); ++i) {
    if (tokens[i] != "<unk>") continue;
    const auto& weights = hypothesis.attention[i];
    const std::size_t words = std::min(weights.size(), source_words.size());  // <eos> is not a word
    if (words == 0) continue;
    const auto peak = static_cast<std::size_t>(std::max_element(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(words)) - weights.begin());
    const std::string& source = source_words[peak];
    const auto entry = dictionary_.find(source);
    tokens[i] = entry != dictionary_.end() ? entry->second : source;
  }
  return models_.front()->target_tokenizer->decode(tokens);
}

std::vector<Translation> Translator::translate(const std::vector<std::string>& sentences, const SearchOptions& search_options,
                                               int max_source_tokens) {
  const run::TrainedModel& first = *models_.front();
  SearchOptions options = search_options;
  if (options.unk_replace) {
    options.keep_attention = true;
    load_dictionary(options.dictionary);
  }
  const auto batch_size = static_cast<std::size_t>(options.batch);
  std::vector<Translation> out(sentences.size());
  std::vector<std::size_t> pending;
  std::vector<data::EncodedPair> encoded;
  std::vector<std::vector<std::string>> source_words(sentences.size());  // surface tokens, in the encoder's order
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::vector<std::string> tokens = first.source_tokenizer->encode(sentences[i]);
    if (tokens.empty()) continue;
    if (static_cast<int>(tokens.size()) > max_source_tokens) tokens.resize(static_cast<std::size_t>(max_source_tokens));
    if (first.config.reverse_source) std::reverse(tokens.begin(), tokens.end());
    for (const auto& t : tokens) out[i].source_tokens.push_back(first.source_vocab->id(t) == data::Vocabulary::kUnk ? "<unk>" : t);
    out[i].source_tokens.push_back("<eos>");
    source_words[i] = tokens;
    if (first.config.reverse_source) std::reverse(tokens.begin(), tokens.end());  // encode_source reverses them again
    encoded.push_back({data::encode_source(tokens, *first.source_vocab, first.config.reverse_source), {}, i + 1});
    pending.push_back(i);
  }
  std::vector<models::Seq2SeqImpl*> members;
  for (run::TrainedModel* m : models_) members.push_back(m->model.get());
  Scorer scorer(members);
  // Batches of similar source lengths: less padding in the encoder and attention, and output
  // lengths that end close together.
  std::vector<std::size_t> order(encoded.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return encoded[a].source.size() < encoded[b].source.size(); });
  for (std::size_t begin = 0; begin < order.size(); begin += batch_size) {
    const std::size_t end = std::min(order.size(), begin + batch_size);
    std::vector<const data::EncodedPair*> rows;
    for (std::size_t k = begin; k < end; ++k) rows.push_back(&encoded[order[k]]);
    const data::Batch batch = data::make_batch(rows).to(first.device);
    std::vector<std::vector<Hypothesis>> results = search(scorer, batch.src, batch.src_lengths, options);
    for (std::size_t k = begin; k < end; ++k) {
      const std::size_t index = pending[order[k]];
      Translation& t = out[index];
      t.nbest = std::move(results[k - begin]);
      for (const Hypothesis& h : t.nbest) {
        std::vector<std::string> tokens = first.target_vocab->decode(h.tokens);
        t.nbest_texts.push_back(options.unk_replace ? replace_unknowns(tokens, h, source_words[index])
                                                    : first.target_tokenizer->decode(tokens));
        if (t.nbest_texts.size() == 1) t.target_tokens = tokens;
      }
      if (!t.nbest.empty()) {
        t.hypothesis = t.nbest.front();
        t.text = t.nbest_texts.front();
      }
    }
  }
  return out;
}

}  // namespace luong::evaluation
