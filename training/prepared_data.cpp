#include "luong/training/prepared_data.h"

#include <cstdio>
#include <filesystem>

#include "luong/data_pipeline/builtin_corpus.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::training {
namespace fs = std::filesystem;
namespace {

std::vector<std::vector<std::string>> tokenize_all(const std::vector<data::FilteredPair>& pairs,
                                                   const data::Tokenizer& tokenizer, bool source) {
  std::vector<std::vector<std::string>> out;
  out.reserve(pairs.size());
  for (const auto& p : pairs) out.push_back(tokenizer.encode(source ? p.source : p.target));
  return out;
}

data::DataSplits split(const run::TrainConfig& config, PreparedData& out) {
  data::DatasetOptions dataset;
  dataset.max_len = static_cast<std::size_t>(config.max_len);
  dataset.train_size = static_cast<std::size_t>(config.train_size);
  dataset.test_size = static_cast<std::size_t>(config.test_size);
  dataset.dev_size = static_cast<std::size_t>(config.dev_size);
  dataset.seed = static_cast<std::uint64_t>(config.seed);
  dataset.deduplicate = config.deduplicate;
  std::vector<data::SentencePair> corpus = read_training_corpus(config);
  out.corpus_pairs = corpus.size();
  out.corpus_digest = data::corpus_digest(corpus);
  data::DataSplits splits = data::split_corpus(corpus, dataset);
  if (static_cast<std::int64_t>(splits.train.size()) < config.train_size ||
      static_cast<std::int64_t>(splits.test.size()) < config.test_size ||
      static_cast<std::int64_t>(splits.dev.size()) < config.dev_size) {
    std::fprintf(stderr,
                 "luong train: warning: only %zu pairs pass the filter (max %lld words); the splits are %zu train / "
                 "%zu test / %zu dev instead of %lld / %lld / %lld\n",
                 splits.filtered, static_cast<long long>(config.max_len), splits.train.size(), splits.test.size(),
                 splits.dev.size(), static_cast<long long>(config.train_size), static_cast<long long>(config.test_size),
                 static_cast<long long>(config.dev_size));
  }
  return splits;
}

void train_sentencepiece(const run::TrainConfig& config, const run::RunPaths& paths, const data::DataSplits& splits) {
  data::SentencePieceTrainOptions spm;
  spm.vocab_size = static_cast<int>(config.spm_vocab);
  spm.model_type = config.spm_type;
  std::vector<std::string> sources, targets;
  for (const auto& p : splits.train) {
    sources.push_back(p.source);
    targets.push_back(p.target);
  }
  const auto prefix = [](const std::string& model) { return model.substr(0, model.size() - std::string(".model").size()); };
  data::SentencePieceTokenizer::train(sources, prefix(paths.source_spm), spm);
  data::SentencePieceTokenizer::train(targets, prefix(paths.target_spm), spm);
}

}  // namespace

std::vector<data::SentencePair> read_training_corpus(const run::TrainConfig& config) {
  if (config.data.rfind("builtin:", 0) == 0) {
    if (config.data != "builtin:numbers") {
      throw Error("unknown built-in corpus '" + printable(config.data) + "' (builtin:numbers)");
    }
    return data::builtin_numbers_corpus();
  }
  return data::read_corpus({config.data, config.format, config.reverse});
}

void mirror_from_main(DataParallel* parallel, const std::string& key, const std::string& path, std::uint64_t max_bytes) {
  if (parallel == nullptr) return;
  if (parallel->is_main()) {
    parallel->share(key, read_text_file(path, max_bytes, "this file of a run").value_or(std::string()));
    return;
  }
  const std::string bytes = parallel->share(key, "");
  if (bytes.empty()) return;
  fs::create_directories(fs::path(path).parent_path());
  write_file_atomically(path, [&](std::ostream& out) { out << bytes; });
}

PreparedData prepare_data(const run::TrainConfig& config, const run::RunPaths& paths, bool resume, DataParallel* parallel) {
  const bool is_main = parallel == nullptr || parallel->is_main();
  PreparedData out;
  out.splits = split(config, out);
  const bool spm = config.tokenizer == data::TokenizerKind::kSpm;
  if (spm && !resume && is_main) train_sentencepiece(config, paths, out.splits);
  if (spm) {
    mirror_from_main(parallel, "spm.source.model", paths.source_spm, data::kMaxTokenizerFileBytes);
    mirror_from_main(parallel, "spm.target.model", paths.target_spm, data::kMaxTokenizerFileBytes);
  }
  if (!spm && !resume && is_main) {
    std::vector<std::string> targets;
    for (const auto& p : out.splits.train) targets.push_back(p.target);
    data::Truecaser::build(targets).save(paths.truecase);
  }
  if (!spm) mirror_from_main(parallel, "target.truecase", paths.truecase, data::kMaxTokenizerFileBytes);
  out.source_tokenizer = data::load_tokenizer(config.tokenizer, paths.source_spm);
  out.target_tokenizer = data::load_tokenizer(config.tokenizer, paths.target_spm, paths.truecase);
  if (is_main && !resume) {
    const data::VocabularyOptions vocab_options{static_cast<std::size_t>(config.min_frequency),
                                                static_cast<std::size_t>(config.max_vocab)};
    data::Vocabulary::build(tokenize_all(out.splits.train, *out.source_tokenizer, true), vocab_options).save(paths.source_vocab);
    data::Vocabulary::build(tokenize_all(out.splits.train, *out.target_tokenizer, false), vocab_options).save(paths.target_vocab);
    run::write_pairs(paths.test, out.splits.test);
    run::write_pairs(paths.dev, out.splits.dev);
  }
  mirror_from_main(parallel, "source.vocab", paths.source_vocab, data::kMaxTokenizerFileBytes);
  mirror_from_main(parallel, "target.vocab", paths.target_vocab, data::kMaxTokenizerFileBytes);
  out.source_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.source_vocab));
  out.target_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.target_vocab));
  out.train = data::encode_pairs(out.splits.train, *out.source_tokenizer, *out.target_tokenizer, *out.source_vocab,
                                 *out.target_vocab, config.reverse_source);
  const auto dev_pairs = data::encode_pairs(out.splits.dev, *out.source_tokenizer, *out.target_tokenizer,
                                            *out.source_vocab, *out.target_vocab, config.reverse_source);
  for (const auto& p : out.splits.dev) out.dev_references.push_back(p.target);
  data::BatchingOptions dev_batching;
  dev_batching.batch_size = 100;
  out.dev_batches = data::make_batches(dev_pairs, dev_batching);
  return out;
}

}  // namespace luong::training
