#pragma once
// Saving and resuming a run: RUN_DIR/checkpoint/ holds model.pt, optimizer.pt, rng.pt and
// state.json, and manifest.json last (each file's size and CRC-32). The finished directory replaces
// the old one in one atomic exchange, so a crash at any moment leaves the old checkpoint or the new
// one; resuming verifies every file against the manifest and every record against its schema
// before anything is used.
#include <torch/torch.h>

#include <string>

#include "luong/models/seq2seq.h"
#include "luong/run/run_directory.h"
#include "luong/training/trainer_state.h"

namespace luong::training {

class Checkpointer {
 public:
  explicit Checkpointer(run::RunPaths paths) : paths_(std::move(paths)) {}

  /// Writes the run's exports first (model.pt; best_model.pt when `improved`; the learning curve at
  /// an epoch's end), then the checkpoint, which is the commit point: a crash before it leaves the
  /// previous checkpoint, and --resume redoes the work and rewrites the same exports.
  void save(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, const TrainerState& state, bool improved,
            bool epoch_end) const;

  /// Restores the model, optimizer and random states and returns the trainer state. `max_epochs`
  /// bounds state.json's epoch (the run's configured epochs). Throws luong::CheckpointError naming
  /// the file and what is wrong with it.
  TrainerState load(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, std::int64_t max_epochs) const;

  /// The checkpoint's file names, manifest.json last.
  static const std::vector<std::string>& files();

 private:
  run::RunPaths paths_;
};

/// loss.csv and loss.png of `history`.
void write_learning_curve(const run::RunPaths& paths, const std::vector<EpochRecord>& history);

}  // namespace luong::training
