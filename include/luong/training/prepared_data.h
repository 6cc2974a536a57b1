#pragma once
// Dataset and vocabulary preparation for a training run: the corpus read and split, sentencepiece
// trained (with --tokenizer spm), vocabularies built, the held-out splits written, everything
// encoded; on --resume the run's own files are read back instead.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/dataset.h"
#include "luong/data_pipeline/tokenizer.h"
#include "luong/data_pipeline/vocabulary.h"
#include "luong/run/run_directory.h"
#include "luong/run/train_config.h"
#include "luong/training/data_parallel.h"

namespace luong::training {

struct PreparedData {
  data::DataSplits splits;
  std::unique_ptr<data::Tokenizer> source_tokenizer, target_tokenizer;
  std::unique_ptr<data::Vocabulary> source_vocab, target_vocab;
  std::vector<data::EncodedPair> train;
  std::vector<data::Batch> dev_batches;     ///< on the CPU
  std::vector<std::string> dev_references;  ///< raw dev targets, for BLEU
  std::size_t corpus_pairs = 0;             ///< the pairs read from the corpus, before any filter
  std::string corpus_digest;                ///< data::corpus_digest of them
};

/// Rank 0 (or the only process) writes the tokenizers, vocabularies and the held-out splits into
/// `paths` unless `resume`; with a data-parallel job the other ranks receive them from
/// rank 0. Throws luong::Error / DataError naming the file or setting at fault.
PreparedData prepare_data(const run::TrainConfig& config, const run::RunPaths& paths, bool resume, DataParallel* parallel);

/// The pairs of the corpus `config` names (a file, an OPUS set or builtin:numbers).
std::vector<data::SentencePair> read_training_corpus(const run::TrainConfig& config);

/// Rank 0's copy of a file of the run, given to the other ranks (which may be on machines that cannot
/// see rank 0's run directory): they write it at the same place in their private directory.
/// Rank 0 reads at most `max_bytes` of it.
void mirror_from_main(DataParallel* parallel, const std::string& key, const std::string& path, std::uint64_t max_bytes);

}  // namespace luong::training
