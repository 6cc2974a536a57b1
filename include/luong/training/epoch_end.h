#pragma once
// What happens when an epoch ends: the dev loss and BLEU, the best model and early stopping, the log line.
#include <string>

#include "luong/models/seq2seq.h"
#include "luong/training/prepared_data.h"
#include "luong/training/trainer_state.h"

namespace luong::training {

struct DevMetrics {
  double loss = NAN;  ///< NaN without a dev split
  double bleu = NAN;
};

/// Teacher-forced loss and greedy BLEU on the dev split (NaN without one).
DevMetrics evaluate_dev(models::Seq2SeqImpl& model, const PreparedData& data, const torch::Device& device);

/// Adds `record` (with `dev`) to the state's history and updates the best BLEU and the count of
/// epochs without improvement; returns whether this epoch is the best so far.
bool record_epoch(TrainerState& state, EpochRecord record, const DevMetrics& dev);

/// "epoch 3/10: train loss ..., dev loss ..., dev BLEU ... (best), N tok/s, S s<extra>" on stderr.
void log_epoch(const EpochRecord& record, std::int64_t epochs, bool improved, const std::string& extra);

}  // namespace luong::training
