#include "luong/training/epoch_end.h"

#include <cmath>
#include <cstdio>

#include "luong/evaluation/metrics.h"
#include "luong/evaluation/scoring.h"
#include "luong/evaluation/search.h"

namespace luong::training {

DevMetrics evaluate_dev(models::Seq2SeqImpl& model, const PreparedData& data, const torch::Device& device) {
  if (data.dev_batches.empty()) return {};
  const evaluation::CorpusLoss loss = evaluation::teacher_forced_loss(model, data.dev_batches, device);
  evaluation::SearchOptions search;
  search.beam = 1;
  std::vector<std::string> hypotheses;
  for (const data::Batch& cpu_batch : data.dev_batches) {
    const data::Batch batch = cpu_batch.to(device);
    for (const auto& h : evaluation::translate(model, batch.src, batch.src_lengths, search)) {
      hypotheses.push_back(data.target_tokenizer->decode(data.target_vocab->decode(h.tokens)));
    }
  }
  return {loss.mean(), evaluation::corpus_bleu(hypotheses, data.dev_references).score};
}

bool record_epoch(TrainerState& state, EpochRecord record, const DevMetrics& dev) {
  record.dev_loss = dev.loss;
  record.dev_bleu = dev.bleu;
  state.history.push_back(record);
  if (std::isnan(dev.bleu)) return false;
  if (dev.bleu > state.best_bleu) {
    state.best_bleu = dev.bleu;
    state.bad_epochs = 0;
    return true;
  }
  ++state.bad_epochs;
  return false;
}

void log_epoch(const EpochRecord& r, std::int64_t epochs, bool improved, const std::string& extra) {
  const long long epoch = r.epoch, total = epochs;
  if (std::isnan(r.dev_loss)) {
    std::fprintf(stderr, "epoch %lld/%lld: train loss %.4f, %.0f tok/s, %.1f s%s\n", epoch, total, r.train_loss,
                 r.tokens_per_second, r.seconds, extra.c_str());
  } else {
    std::fprintf(stderr, "epoch %lld/%lld: train loss %.4f, dev loss %.4f, dev BLEU %.2f%s, %.0f tok/s, %.1f s%s\n",
                 epoch, total, r.train_loss, r.dev_loss, r.dev_bleu, improved ? " (best)" : "", r.tokens_per_second,
                 r.seconds, extra.c_str());
  }
}

}  // namespace luong::training
