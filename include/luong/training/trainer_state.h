#pragma once
// What --resume needs besides the model, the optimizer and the random states: checkpoint/state.json.
#include <cstdint>
#include <string>
#include <vector>

#include "luong/util/json.h"

namespace luong::training {

struct EpochRecord {
  std::int64_t epoch = 0;
  double train_loss = 0;
  double dev_loss = 0;     ///< NaN without a dev split
  double dev_bleu = 0;     ///< NaN without a dev split
  double tokens_per_second = 0;
  double seconds = 0;
};

struct TrainerState {
  std::int64_t epoch = 0;         ///< completed epochs
  std::int64_t batches_done = 0;  ///< batches of epoch + 1 already applied
  double partial_loss = 0;        ///< the loss sums of those batches
  double partial_weight = 0;
  std::int64_t partial_tokens = 0;
  double best_bleu = -1;          ///< -1 before the first dev evaluation
  std::int64_t bad_epochs = 0;    ///< epochs since the best dev BLEU
  std::int64_t optimizer_steps = 0;  ///< updates applied so far (the inverse-sqrt schedule's clock)
  double lr_scale = 1;               ///< the plateau schedule's factor on the learning rate
  double best_dev_loss = -1;         ///< -1 before the first dev evaluation
  std::int64_t plateau_epochs = 0;   ///< epochs since the best dev loss
  std::vector<EpochRecord> history;  ///< one record per completed epoch, in order
  /// What the run's data depends on (the options --resume may not change, the corpus's pair count and
  /// digest: data_record in trainer.cpp), checked on --resume; empty in checkpoints of older luongs.
  Json data = Json::object();

  Json to_json() const;
  /// Reads state.json, checked against a schema: every field present with its type, epoch in
  /// [0, max_epochs], history one record per completed epoch, counts and losses non-negative. Throws
  /// luong::CheckpointError("<origin>: <field> ...") otherwise.
  static TrainerState from_json(const Json& json, const std::string& origin, std::int64_t max_epochs);
  /// Throws luong::CheckpointError when batches_done does not fit an epoch of `batches` batches.
  void check_batches(std::int64_t batches, const std::string& origin) const;
};

}  // namespace luong::training
