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
#include "luong/training/weight_average.h"

namespace luong::training {

class Checkpointer {
 public:
  /// `average_last`: at each epoch's end also keep the last N epochs' weights (epochs/) and their
  /// mean (averaged_model.pt); 0 = off.
  explicit Checkpointer(run::RunPaths paths, std::int64_t average_last = 0)
      : paths_(std::move(paths)), average_last_(average_last) {}

  /// Writes the run's exports first (model.pt; best_model.pt when `improved`; at an epoch's end the
  /// learning curve, ema_model.pt and the epoch averages), then the checkpoint, which is the commit
  /// point: a crash before it leaves the previous checkpoint, and --resume redoes the work and
  /// rewrites the same exports. `ema`, when the run keeps one, is saved in the checkpoint too.
  void save(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, const TrainerState& state, bool improved,
            bool epoch_end, const ExponentialAverage* ema = nullptr) const;

  /// Restores the model, optimizer, random states (and `ema`) and returns the trainer state.
  /// `max_epochs` bounds state.json's epoch (the run's configured epochs). Throws
  /// luong::CheckpointError naming the file and what is wrong with it.
  TrainerState load(models::Seq2SeqImpl& model, torch::optim::Optimizer& optimizer, std::int64_t max_epochs,
                    ExponentialAverage* ema = nullptr) const;

  /// Throws luong::Error (naming the first tensor and `state`'s epoch) where the weights or their
  /// exponential average hold NaN or Inf: such weights are never committed (save() checks first).
  static void check_finite(const models::StateDict& weights, const models::StateDict& ema, const TrainerState& state);

  /// The most bytes the checkpoint's file `name` can hold for a model whose state_dict takes at most
  /// `weights` bytes (models::state_dict_size_limit).
  static std::uint64_t file_size_limit(const std::string& name, std::uint64_t weights);

  /// The checkpoint's file names, manifest.json last (ema.pt only in runs with --ema).
  static const std::vector<std::string>& files();

 private:
  void export_epoch_average(const models::StateDict& weights, std::int64_t epoch) const;

  run::RunPaths paths_;
  std::int64_t average_last_;
};

/// loss.csv and loss.png of `history`.
void write_learning_curve(const run::RunPaths& paths, const std::vector<EpochRecord>& history);

}  // namespace luong::training
