#include "luong/evaluation/translator.h"

#include <algorithm>

#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/dataset.h"

namespace luong::evaluation {

std::vector<Translation> Translator::translate(const std::vector<std::string>& sentences, const SearchOptions& options,
                                               int max_source_tokens) {
  const auto batch_size = static_cast<std::size_t>(options.batch);
  std::vector<Translation> out(sentences.size());
  std::vector<std::size_t> pending;
  std::vector<data::EncodedPair> encoded;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    std::vector<std::string> tokens = trained_.source_tokenizer->encode(sentences[i]);
    if (tokens.empty()) continue;
    if (static_cast<int>(tokens.size()) > max_source_tokens) tokens.resize(static_cast<std::size_t>(max_source_tokens));
    for (const auto& t : tokens) out[i].source_tokens.push_back(trained_.source_vocab->id(t) == data::Vocabulary::kUnk ? "<unk>" : t);
    out[i].source_tokens.push_back("<eos>");
    encoded.push_back({data::encode_source(tokens, *trained_.source_vocab), {}, i + 1});
    pending.push_back(i);
  }
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
    const data::Batch batch = data::make_batch(rows).to(trained_.device);
    std::vector<Hypothesis> hypotheses = evaluation::translate(*trained_.model, batch.src, batch.src_lengths, options);
    for (std::size_t k = begin; k < end; ++k) {
      Translation& t = out[pending[order[k]]];
      t.hypothesis = std::move(hypotheses[k - begin]);
      t.target_tokens = trained_.target_vocab->decode(t.hypothesis.tokens);
      t.text = trained_.target_tokenizer->decode(t.target_tokens);
    }
  }
  return out;
}

}  // namespace luong::evaluation
