#pragma once
// The training loop: teacher forcing, Adam, gradient-norm clipping, a masked token-level loss,
// per-epoch dev loss and BLEU, early stopping, atomic checkpoints and exact resumption. The parts
// live beside it: prepared_data.h (corpus, tokenizers, vocabularies), train_step.h (one step),
// checkpointer.h (saving and resuming), epoch_end.h (dev evaluation, early stopping, logging).
#include <string>
#include <vector>

#include "luong/run/train_config.h"
#include "luong/training/data_parallel.h"
#include "luong/training/trainer_state.h"

namespace luong::training {

struct TrainResult {
  std::vector<EpochRecord> history;
  bool interrupted = false;    ///< stopped by SIGINT (a checkpoint was saved)
  bool stopped_early = false;  ///< patience ran out
  std::size_t train_pairs = 0;
  std::size_t source_vocab = 0;
  std::size_t target_vocab = 0;
};

/// Trains as `config` says, writing everything into config.out, which it locks for its whole run.
/// With `resume`, continues from config.out/checkpoint exactly where it stopped (mid-epoch
/// included): the same batches, the same optimizer state and random-number state, so the
/// parameters match an uninterrupted run bit for bit. A resumed run may change only the options the
/// table marks kMayChange (recorded in config.json); any other difference from the run's
/// config.json is an error. Progress goes to stderr. Throws luong::Error on bad input and on a
/// non-finite loss (naming the step and corpus lines; the last checkpoint is kept).
///
/// With distributed.enabled(), this process is one rank of a data-parallel job (see DataParallel):
/// config.batch is the global batch, each rank trains on its rows of it, and the result equals a
/// single process's up to rounding. Rank 0's configuration holds for every rank except the runtime
/// options; only rank 0 writes to config.out, and --resume reads rank 0's checkpoint.
///
/// A fresh run refuses a config.out that holds a trained model (model.pt, best_model.pt, a checkpoint,
/// ...) unless `overwrite`, which first removes every file a run writes there.
TrainResult train(const run::TrainConfig& config, bool resume, const DistributedOptions& distributed = {},
                  bool overwrite = false);

}  // namespace luong::training
