#include "luong/training/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <fcntl.h>
#include <stdio.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/builtin_corpus.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/data_pipeline/sentencepiece_tokenizer.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/evaluation/metrics.h"
#include "luong/evaluation/search.h"
#include "luong/models/state_dict.h"
#include "luong/training/run_directory.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/plot.h"
#include "luong/util/progress.h"
#include "luong/util/threads.h"

namespace luong::training {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Installs the SIGINT handler for the duration of training and restores the old one after.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted.store(false);
    previous_ = std::signal(SIGINT, on_sigint);
  }
  ~InterruptGuard() { std::signal(SIGINT, previous_); }

 private:
  void (*previous_)(int);
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": missing");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::vector<std::string>> tokenize_all(const std::vector<data::FilteredPair>& pairs,
                                                   const data::Tokenizer& tokenizer, bool source) {
  std::vector<std::vector<std::string>> out;
  out.reserve(pairs.size());
  for (const auto& p : pairs) out.push_back(tokenizer.encode(source ? p.source : p.target));
  return out;
}

// Everything --resume needs besides the model and optimizer.
struct TrainerState {
  int epoch = 0;                 // completed epochs
  std::int64_t batches_done = 0; // batches of epoch + 1 already applied
  double partial_loss = 0;       // loss sums of those batches
  double partial_weight = 0;
  std::int64_t partial_tokens = 0;
  double best_bleu = -1;
  int bad_epochs = 0;
  std::vector<EpochRecord> history;

  Json to_json() const {
    Json j = Json::object();
    j.set("epoch", epoch);
    j.set("batches_done", batches_done);
    j.set("partial_loss", partial_loss);
    j.set("partial_weight", partial_weight);
    j.set("partial_tokens", partial_tokens);
    j.set("best_bleu", best_bleu);
    j.set("bad_epochs", bad_epochs);
    Json rows = Json::array();
    for (const auto& r : history) {
      Json row = Json::object();
      row.set("epoch", r.epoch);
      row.set("train_loss", r.train_loss);
      row.set("dev_loss", r.dev_loss);
      row.set("dev_bleu", r.dev_bleu);
      row.set("tokens_per_second", r.tokens_per_second);
      row.set("seconds", r.seconds);
      rows.push_back(row);
    }
    j.set("history", rows);
    return j;
  }

  static TrainerState from_json(const Json& j) {
    TrainerState s;
    s.epoch = static_cast<int>(j.at("epoch").as_int());
    s.batches_done = j.at("batches_done").as_int();
    s.partial_loss = j.at("partial_loss").as_number();
    s.partial_weight = j.at("partial_weight").as_number();
    s.partial_tokens = j.at("partial_tokens").as_int();
    s.best_bleu = j.at("best_bleu").as_number();
    s.bad_epochs = static_cast<int>(j.at("bad_epochs").as_int());
    const auto number = [](const Json& v) { return v.type() == Json::Type::kNull ? NAN : v.as_number(); };
    for (const auto& row : j.at("history").items()) {
      s.history.push_back({static_cast<int>(row.at("epoch").as_int()), number(row.at("train_loss")),
                           number(row.at("dev_loss")), number(row.at("dev_bleu")),
                           number(row.at("tokens_per_second")), number(row.at("seconds"))});
    }
    return s;
  }
};

void save_checkpoint(const RunPaths& paths, models::Seq2SeqImpl& model, torch::optim::Adam& optimizer,
                     const TrainerState& state) {
  const std::string staging = temporary_path_for(paths.checkpoint);
  fs::create_directories(staging);
  try {
    const models::StateDict weights = models::state_dict(model);
    models::save_state_dict(weights, (fs::path(staging) / "model.pt").string());
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to((fs::path(staging) / "optimizer.pt").string());
    models::save_state_dict({{"cpu", at::detail::getDefaultCPUGenerator().get_state()}},
                            (fs::path(staging) / "rng.pt").string());
    write_file_atomically((fs::path(staging) / "state.json").string(),
                          [&](std::ostream& out) { out << state.to_json().dump(1) << "\n"; });
    // Swap the finished directory in as a whole: a reader sees the old checkpoint or the new one.
    if (fs::exists(paths.checkpoint)) {
      if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, paths.checkpoint.c_str(), RENAME_EXCHANGE) != 0) {
        throw Error(paths.checkpoint + ": cannot replace checkpoint (" + std::strerror(errno) + ")");
      }
      fs::remove_all(staging);
    } else {
      fs::rename(staging, paths.checkpoint);
    }
    models::save_state_dict(weights, paths.model);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
}

TrainerState load_checkpoint(const RunPaths& paths, models::Seq2SeqImpl& model, torch::optim::Adam& optimizer) {
  if (!fs::is_directory(paths.checkpoint)) throw Error(paths.checkpoint + ": no checkpoint to resume from");
  const std::string model_path = (fs::path(paths.checkpoint) / "model.pt").string();
  models::load_state_dict(model, models::read_state_dict(model_path), model_path);
  const std::string optimizer_path = (fs::path(paths.checkpoint) / "optimizer.pt").string();
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(optimizer_path);
    optimizer.load(archive);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw CheckpointError(optimizer_path + ": corrupt or mismatched optimizer state (" + what.substr(0, what.find('\n')) + ")");
  }
  const std::string rng_path = (fs::path(paths.checkpoint) / "rng.pt").string();
  for (const auto& [name, tensor] : models::read_state_dict(rng_path)) {
    if (name == "cpu") {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      generator.set_state(tensor);
    }
  }
  const std::string state_path = (fs::path(paths.checkpoint) / "state.json").string();
  return TrainerState::from_json(Json::parse(read_text(state_path), state_path));
}

void write_curve(const RunPaths& paths, const std::vector<EpochRecord>& history) {
  write_file_atomically(paths.loss_csv, [&](std::ostream& out) {
    out << "epoch,train_loss,dev_loss,dev_bleu,tokens_per_second\n";
    for (const auto& r : history) {
      char line[256];
      std::snprintf(line, sizeof line, "%d,%.6f,%.6f,%.2f,%.0f\n", r.epoch, r.train_loss, r.dev_loss, r.dev_bleu,
                    r.tokens_per_second);
      out << line;
    }
  });
  Series train{"train", {}, {}, {31, 119, 180}};
  Series dev{"dev", {}, {}, {255, 127, 14}};
  for (const auto& r : history) {
    train.x.push_back(r.epoch);
    train.y.push_back(r.train_loss);
    dev.x.push_back(r.epoch);
    dev.y.push_back(r.dev_loss);
  }
  Canvas canvas(640, 400);
  draw_line_chart(canvas, {0, 0, 640, 400}, {train, dev}, "cross-entropy per target token", "epoch", "loss");
  canvas.save_png(paths.loss_png);
}

struct DevMetrics {
  double loss = NAN;
  double bleu = NAN;
};

DevMetrics evaluate_dev(models::Seq2SeqImpl& model, const std::vector<data::Batch>& batches,
                        const std::vector<std::string>& references, const data::Vocabulary& target_vocab,
                        const data::Tokenizer& target_tokenizer, const torch::Device& device) {
  if (batches.empty()) return {};
  model.eval();
  double sum = 0;
  std::int64_t tokens = 0;
  std::vector<std::string> hypotheses;
  {
    torch::NoGradGuard no_grad;
    for (const auto& cpu_batch : batches) {
      const data::Batch batch = cpu_batch.to(device);
      const models::LossOutput loss = model.loss(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt);
      sum += loss.sum.item<double>();
      tokens += loss.tokens;
    }
  }
  evaluation::SearchOptions search;
  search.beam = 1;
  for (const auto& cpu_batch : batches) {
    const data::Batch batch = cpu_batch.to(device);
    for (const auto& h : evaluation::translate(model, batch.src, batch.src_lengths, search)) {
      hypotheses.push_back(target_tokenizer.decode(target_vocab.decode(h.tokens)));
    }
  }
  model.train();
  return {sum / static_cast<double>(std::max<std::int64_t>(tokens, 1)),
          evaluation::corpus_bleu(hypotheses, references).score};
}

}  // namespace

TrainResult train(const TrainConfig& config, bool resume) {
  config.validate();
  const int threads = configure_threads(config.threads);
  const torch::Device device(config.device);
  const RunPaths paths(config.out);
  fs::create_directories(config.out);
  if (!resume && fs::exists(paths.checkpoint)) {
    throw Error(config.out + " already holds a run; use --resume to continue it or choose another --out");
  }

  // ---- data ----
  std::vector<data::SentencePair> pairs;
  if (config.data.rfind("builtin:", 0) == 0) {
    if (config.data != "builtin:numbers") throw Error("unknown built-in corpus '" + config.data + "' (builtin:numbers)");
    pairs = data::builtin_numbers_corpus();
  } else {
    pairs = data::read_corpus({config.data, data::parse_corpus_format(config.format), config.reverse});
  }
  data::DatasetOptions dataset;
  dataset.max_len = config.max_len;
  dataset.train_size = config.train_size;
  dataset.test_size = config.test_size;
  dataset.dev_size = config.dev_size;
  dataset.seed = config.seed;
  dataset.deduplicate = config.deduplicate;
  const data::DataSplits splits = data::split_corpus(pairs, dataset);

  std::unique_ptr<data::Tokenizer> source_tokenizer, target_tokenizer;
  if (config.tokenizer == "spm" && !resume) {
    data::SentencePieceTrainOptions spm;
    spm.vocab_size = config.spm_vocab;
    spm.model_type = config.spm_type;
    std::vector<std::string> sources, targets;
    for (const auto& p : splits.train) {
      sources.push_back(p.source);
      targets.push_back(p.target);
    }
    data::SentencePieceTokenizer::train(sources, paths.source_spm.substr(0, paths.source_spm.size() - 6), spm);
    data::SentencePieceTokenizer::train(targets, paths.target_spm.substr(0, paths.target_spm.size() - 6), spm);
  }
  source_tokenizer = data::load_tokenizer(config.tokenizer, paths.source_spm);
  target_tokenizer = data::load_tokenizer(config.tokenizer, paths.target_spm);

  std::unique_ptr<data::Vocabulary> source_vocab, target_vocab;
  if (resume) {
    source_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.source_vocab));
    target_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::load(paths.target_vocab));
  } else {
    const data::VocabularyOptions vocab_options{config.min_frequency, config.max_vocab};
    source_vocab = std::make_unique<data::Vocabulary>(
        data::Vocabulary::build(tokenize_all(splits.train, *source_tokenizer, true), vocab_options));
    target_vocab = std::make_unique<data::Vocabulary>(
        data::Vocabulary::build(tokenize_all(splits.train, *target_tokenizer, false), vocab_options));
    source_vocab->save(paths.source_vocab);
    target_vocab->save(paths.target_vocab);
    config.save(paths.config);
    write_pairs(paths.test, splits.test);
    write_pairs(paths.dev, splits.dev);
  }
  const auto train_pairs =
      data::encode_pairs(splits.train, *source_tokenizer, *target_tokenizer, *source_vocab, *target_vocab);
  const auto dev_pairs = data::encode_pairs(splits.dev, *source_tokenizer, *target_tokenizer, *source_vocab, *target_vocab);
  std::vector<std::string> dev_references;
  for (const auto& p : splits.dev) dev_references.push_back(p.target);
  data::BatchingOptions dev_batching;
  dev_batching.batch_size = 100;
  const std::vector<data::Batch> dev_batches = data::make_batches(dev_pairs, dev_batching);

  // ---- model ----
  torch::manual_seed(config.seed);
  models::Seq2Seq model(config.model_options(static_cast<int64_t>(source_vocab->size()),
                                             static_cast<int64_t>(target_vocab->size())));
  model->to(device);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(config.lr));
  TrainerState state;
  if (resume) state = load_checkpoint(paths, *model, optimizer);

  TrainResult result;
  result.train_pairs = train_pairs.size();
  result.source_vocab = source_vocab->size();
  result.target_vocab = target_vocab->size();
  result.history = state.history;
  std::fprintf(stderr,
               "luong train: %zu train / %zu dev / %zu test pairs (of %zu read, %zu within %zu tokens); "
               "vocabularies %zu / %zu; %s attention, %s decoder, %d threads, %s%s\n",
               splits.train.size(), splits.dev.size(), splits.test.size(), splits.read, splits.filtered,
               config.max_len, source_vocab->size(), target_vocab->size(), config.attention.c_str(),
               config.decoder.c_str(), threads, device.str().c_str(),
               resume ? (", resuming after epoch " + std::to_string(state.epoch) +
                         (state.batches_done ? " + " + std::to_string(state.batches_done) + " batches" : ""))
                            .c_str()
                      : "");

  const models::LossAverage average =
      config.loss_average == "step" ? models::LossAverage::kStep : models::LossAverage::kToken;
  InterruptGuard interrupt_guard;
  std::int64_t global_step = 0;
  for (int epoch = state.epoch + 1; epoch <= config.epochs; ++epoch) {
    data::BatchingOptions batching;
    batching.batch_size = config.batch;
    batching.by_tokens = config.batch_by_tokens;
    batching.bucket = config.bucket;
    batching.shuffle = config.shuffle;
    batching.seed = config.seed * 1000003ULL + static_cast<std::uint64_t>(epoch);
    const std::vector<data::Batch> batches = data::make_batches(train_pairs, batching);
    std::int64_t epoch_tokens = 0;
    for (const auto& b : batches) epoch_tokens += b.target_tokens;

    Progress progress("epoch " + std::to_string(epoch) + "/" + std::to_string(config.epochs), epoch_tokens, "tok");
    double loss_sum = state.partial_loss;
    double loss_weight = state.partial_weight;
    std::int64_t tokens_done = state.partial_tokens;
    const auto start = std::chrono::steady_clock::now();
    std::int64_t timed_tokens = 0;
    for (std::size_t i = static_cast<std::size_t>(state.batches_done); i < batches.size(); ++i) {
      const data::Batch batch = batches[i].to(device);
      optimizer.zero_grad();
      const models::LossOutput loss = model->loss(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt, average);
      const double value = loss.loss.item<double>();
      if (!std::isfinite(value)) {
        std::ostringstream lines;
        for (std::size_t k = 0; k < batch.lines.size() && k < 8; ++k) lines << (k ? "," : "") << batch.lines[k];
        if (batch.lines.size() > 8) lines << ",...";
        throw Error("non-finite loss at epoch " + std::to_string(epoch) + " batch " + std::to_string(i + 1) +
                    " (corpus lines " + lines.str() + "); the last good checkpoint in " + paths.checkpoint +
                    " is kept");
      }
      loss.loss.backward();
      if (config.clip > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), config.clip);
      optimizer.step();
      ++global_step;
      // token averaging weighs each batch by its tokens; step averaging takes the mean over batches
      const double weight = average == models::LossAverage::kToken ? static_cast<double>(loss.tokens) : 1.0;
      loss_sum += value * weight;
      loss_weight += weight;
      tokens_done += batch.target_tokens;
      timed_tokens += batch.target_tokens;
      char detail[64];
      std::snprintf(detail, sizeof detail, "loss %.4f", loss_sum / loss_weight);
      progress.advance(batch.target_tokens, detail);
      if (g_interrupted.load()) {
        progress.finish();
        state.batches_done = static_cast<std::int64_t>(i + 1);
        state.partial_loss = loss_sum;
        state.partial_weight = loss_weight;
        state.partial_tokens = tokens_done;
        save_checkpoint(paths, *model, optimizer, state);
        std::fprintf(stderr, "luong train: interrupted; checkpoint saved after epoch %d batch %zu (resume with --resume)\n",
                     epoch - 1, i + 1);
        result.interrupted = true;
        return result;
      }
    }
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EpochRecord record;
    record.epoch = epoch;
    record.train_loss = loss_sum / std::max(loss_weight, 1.0);
    record.seconds = seconds;
    record.tokens_per_second = seconds > 0 ? static_cast<double>(timed_tokens) / seconds : 0.0;
    const DevMetrics dev = evaluate_dev(*model, dev_batches, dev_references, *target_vocab, *target_tokenizer, device);
    record.dev_loss = dev.loss;
    record.dev_bleu = dev.bleu;
    state.history.push_back(record);
    state.epoch = epoch;
    state.batches_done = 0;
    state.partial_loss = state.partial_weight = 0;
    state.partial_tokens = 0;
    bool improved = false;
    if (!std::isnan(dev.bleu)) {
      if (dev.bleu > state.best_bleu) {
        state.best_bleu = dev.bleu;
        state.bad_epochs = 0;
        improved = true;
      } else {
        ++state.bad_epochs;
      }
    }
    save_checkpoint(paths, *model, optimizer, state);
    if (improved) models::save_state_dict(models::state_dict(*model), paths.best_model);
    write_curve(paths, state.history);
    if (std::isnan(dev.loss)) {
      std::fprintf(stderr, "epoch %d/%d: train loss %.4f, %.0f tok/s, %.1f s\n", epoch, config.epochs,
                   record.train_loss, record.tokens_per_second, seconds);
    } else {
      std::fprintf(stderr, "epoch %d/%d: train loss %.4f, dev loss %.4f, dev BLEU %.2f%s, %.0f tok/s, %.1f s\n", epoch,
                   config.epochs, record.train_loss, dev.loss, dev.bleu, improved ? " (best)" : "",
                   record.tokens_per_second, seconds);
    }
    result.history = state.history;
    if (config.patience > 0 && state.bad_epochs >= config.patience) {
      std::fprintf(stderr, "luong train: dev BLEU has not improved for %d epochs; stopping (best %.2f kept in %s)\n",
                   config.patience, state.best_bleu, paths.best_model.c_str());
      result.stopped_early = true;
      break;
    }
  }
  return result;
}

}  // namespace luong::training
