#pragma once
// The training loop: teacher forcing, Adam, gradient-norm clipping, a masked token-level loss,
// per-epoch dev loss and BLEU, early stopping, atomic checkpoints and exact resumption.
#include <functional>
#include <string>
#include <vector>

#include "luong/training/data_parallel.h"
#include "luong/training/train_config.h"

namespace luong::training {

struct EpochRecord {
  int epoch = 0;
  double train_loss = 0;
  double dev_loss = 0;     ///< NaN without a dev split
  double dev_bleu = 0;     ///< NaN without a dev split
  double tokens_per_second = 0;
  double seconds = 0;
};

struct TrainResult {
  std::vector<EpochRecord> history;
  bool interrupted = false;      ///< stopped by SIGINT (a checkpoint was saved)
  bool stopped_early = false;    ///< patience ran out
  std::size_t train_pairs = 0;
  std::size_t source_vocab = 0;
  std::size_t target_vocab = 0;
};

/// Trains as `config` says, writing everything into config.out. With `resume`, continues from
/// config.out/checkpoint exactly where it stopped (mid-epoch included): the same batches, the same
/// optimizer state and random-number state, so the parameters match an uninterrupted run bit for
/// bit. Progress goes to stderr. Throws luong::Error on bad input and on a non-finite loss (naming
/// the step and corpus lines; the last checkpoint is kept).
///
/// With distributed.enabled(), this process is one rank of a data-parallel job (see DataParallel):
/// config.batch is the global batch, each rank trains on its rows of it, and the result equals a
/// single process's up to rounding. Rank 0's configuration holds for every rank except device and
/// threads; only rank 0 writes to config.out, and --resume reads rank 0's checkpoint.
TrainResult train(const TrainConfig& config, bool resume, const DistributedOptions& distributed = {});

}  // namespace luong::training
