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
#include "luong/training/data_parallel.h"
#include "luong/training/fused_adam.h"
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

// Writes the run's exports first (model.pt, best_model.pt when `improved`, the curve at an epoch's
// end) and the checkpoint last: the checkpoint is the commit point. A crash before it leaves the
// previous checkpoint, and --resume redoes the work and rewrites the same exports.
void save_checkpoint(const RunPaths& paths, models::Seq2SeqImpl& model, torch::optim::Adam& optimizer,
                     const TrainerState& state, bool improved, bool epoch_end) {
  const models::StateDict weights = models::state_dict(model);
  models::save_state_dict(weights, paths.model);
  if (improved) models::save_state_dict(weights, paths.best_model);
  if (epoch_end) write_curve(paths, state.history);
  const std::string staging = temporary_path_for(paths.checkpoint);
  fs::create_directories(staging);
  kill_point();
  try {
    models::save_state_dict(weights, (fs::path(staging) / "model.pt").string());
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to((fs::path(staging) / "optimizer.pt").string());
    kill_point();
    models::save_state_dict({{"cpu", at::detail::getDefaultCPUGenerator().get_state()}},
                            (fs::path(staging) / "rng.pt").string());
    write_file_atomically((fs::path(staging) / "state.json").string(),
                          [&](std::ostream& out) { out << state.to_json().dump(1) << "\n"; });
    // Swap the finished directory in as a whole: a reader sees the old checkpoint or the new one.
    if (fs::exists(paths.checkpoint)) {
      if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, paths.checkpoint.c_str(), RENAME_EXCHANGE) != 0) {
        throw Error(paths.checkpoint + ": cannot replace checkpoint (" + std::strerror(errno) + ")");
      }
      kill_point();
      fs::remove_all(staging);
    } else {
      fs::rename(staging, paths.checkpoint);
    }
    kill_point();
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

// Rank 0's copy of a file of the run, given to the other ranks (which may be on machines that
// cannot see rank 0's run directory): they write it at the same place in their private directory.
void mirror_from_main(DataParallel* parallel, const std::string& key, const std::string& path) {
  if (parallel == nullptr) return;
  if (parallel->is_main()) {
    parallel->share(key, fs::exists(path) ? read_text(path) : std::string());
    return;
  }
  const std::string bytes = parallel->share(key, "");
  if (bytes.empty()) return;
  fs::create_directories(fs::path(path).parent_path());
  write_file_atomically(path, [&](std::ostream& out) { out << bytes; });
}

// Per-step weights that turn summed cross-entropy into the configured average over `rows`, so
// that every rank's share of a global batch is normalised by the whole batch's counts.
torch::Tensor step_weights(const std::vector<const data::EncodedPair*>& rows, models::LossAverage average) {
  std::vector<double> count;
  for (const data::EncodedPair* row : rows) {
    const std::size_t length = row->target.size() + 1;  // + <eos>
    if (count.size() < length) count.resize(length, 0.0);
    for (std::size_t t = 0; t < length; ++t) count[t] += 1;
  }
  double tokens = 0;
  for (const double c : count) tokens += c;
  std::vector<double> weights(count.size());
  for (std::size_t t = 0; t < count.size(); ++t) {
    weights[t] = average == models::LossAverage::kToken ? 1.0 / tokens
                                                        : 1.0 / (count[t] * static_cast<double>(count.size()));
  }
  return torch::tensor(weights, torch::kFloat64);
}

// Target tokens of a batch's rows, <eos> included (what make_batch counts).
std::int64_t target_tokens(const std::vector<const data::EncodedPair*>& rows) {
  std::int64_t tokens = 0;
  for (const data::EncodedPair* row : rows) tokens += static_cast<std::int64_t>(row->target.size()) + 1;
  return tokens;
}

std::string describe_lines(const std::vector<const data::EncodedPair*>& rows) {
  std::ostringstream out;
  for (std::size_t k = 0; k < rows.size() && k < 8; ++k) out << (k ? "," : "") << rows[k]->line;
  if (rows.size() > 8) out << ",...";
  return out.str();
}

// A private run directory for ranks other than 0, removed when training ends.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = (fs::temp_directory_path() / "luong-rank-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a scratch directory in " + pattern);
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TrainResult train(const TrainConfig& requested, bool resume, const DistributedOptions& distributed) {
  // A follower's own flags may be partial: it validates rank 0's configuration once it has it.
  const bool follower = distributed.enabled() && distributed.rank != 0;
  if (!follower) requested.validate();
  TrainConfig config = requested;
  const int local_processes = distributed.enabled() ? distributed.local_world_size : 1;
  const int threads = configure_threads(config.threads > 0 ? config.threads
                                                           : std::max(1, available_cores() / local_processes));
  torch::Device device(config.device);
  if (distributed.enabled() && device.is_cuda() && !device.has_index()) {
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(distributed.local_rank));
  }

  // ---- rendezvous: rank 0's configuration is the run's; the others keep only their runtime ----
  std::unique_ptr<DataParallel> parallel;
  std::unique_ptr<ScratchDirectory> scratch;
  if (distributed.enabled()) {
    parallel = std::make_unique<DataParallel>(distributed, device);
    const std::string main_config = parallel->share("config.json", config.to_json().dump());
    if (!parallel->is_main()) {
      TrainConfig from_main = TrainConfig::from_json(Json::parse(main_config, "rank 0's config"), "rank 0's config");
      from_main.device = config.device;
      from_main.threads = config.threads;
      scratch = std::make_unique<ScratchDirectory>();
      from_main.out = scratch->path();
      from_main.validate();
      config = from_main;
    }
  }
  const bool is_main = parallel == nullptr || parallel->is_main();
  DataParallel* const dp = parallel.get();
  const RunPaths paths(config.out);
  fs::create_directories(config.out);
  if (is_main && !resume && fs::exists(paths.checkpoint)) {
    throw Error(config.out + " already holds a run; use --resume to continue it or choose another --out");
  }
  if (is_main) remove_stale_temporaries(config.out);

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

  if (config.tokenizer == "spm" && !resume && is_main) {
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
  if (config.tokenizer == "spm") {
    mirror_from_main(dp, "spm.source.model", paths.source_spm);
    mirror_from_main(dp, "spm.target.model", paths.target_spm);
  }
  const std::unique_ptr<data::Tokenizer> source_tokenizer = data::load_tokenizer(config.tokenizer, paths.source_spm);
  const std::unique_ptr<data::Tokenizer> target_tokenizer = data::load_tokenizer(config.tokenizer, paths.target_spm);

  if (is_main && !resume) {
    const data::VocabularyOptions vocab_options{config.min_frequency, config.max_vocab};
    data::Vocabulary::build(tokenize_all(splits.train, *source_tokenizer, true), vocab_options).save(paths.source_vocab);
    data::Vocabulary::build(tokenize_all(splits.train, *target_tokenizer, false), vocab_options).save(paths.target_vocab);
    config.save(paths.config);
    write_pairs(paths.test, splits.test);
    write_pairs(paths.dev, splits.dev);
  }
  mirror_from_main(dp, "source.vocab", paths.source_vocab);
  mirror_from_main(dp, "target.vocab", paths.target_vocab);
  const data::Vocabulary source_vocab = data::Vocabulary::load(paths.source_vocab);
  const data::Vocabulary target_vocab = data::Vocabulary::load(paths.target_vocab);
  const auto train_pairs =
      data::encode_pairs(splits.train, *source_tokenizer, *target_tokenizer, source_vocab, target_vocab);
  const auto dev_pairs = data::encode_pairs(splits.dev, *source_tokenizer, *target_tokenizer, source_vocab, target_vocab);
  std::vector<std::string> dev_references;
  for (const auto& p : splits.dev) dev_references.push_back(p.target);
  data::BatchingOptions dev_batching;
  dev_batching.batch_size = 100;
  const std::vector<data::Batch> dev_batches = data::make_batches(dev_pairs, dev_batching);

  // ---- model ----
  torch::manual_seed(config.seed);
  models::Seq2Seq model(config.model_options(static_cast<int64_t>(source_vocab.size()),
                                             static_cast<int64_t>(target_vocab.size())));
  model->to(device, config.scalar_type());
  model->train();
  FusedAdam optimizer(model->parameters(), torch::optim::AdamOptions(config.lr));
  TrainerState state;
  if (resume) {
    for (const char* file : {"model.pt", "optimizer.pt", "rng.pt", "state.json"}) {
      mirror_from_main(dp, std::string("checkpoint/") + file, (fs::path(paths.checkpoint) / file).string());
    }
    state = load_checkpoint(paths, *model, optimizer);
    // The checkpoint restores Adam's options too; a --lr given with --resume wins.
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(config.lr);
  }
  if (dp != nullptr) {
    dp->broadcast_parameters(model->parameters());
    // Dropout draws differ between ranks; rank 0 keeps the single-process stream.
    if (!is_main) torch::manual_seed(config.seed + 7919ULL * static_cast<std::uint64_t>(dp->rank()) + state.epoch);
  }

  TrainResult result;
  result.train_pairs = train_pairs.size();
  result.source_vocab = source_vocab.size();
  result.target_vocab = target_vocab.size();
  result.history = state.history;
  if (is_main) {
    const std::string ranks =
        dp == nullptr ? std::string()
                      : ", " + std::to_string(dp->world_size()) + " ranks (" + std::to_string(distributed.local_world_size) +
                            " on this machine)";
    std::fprintf(stderr,
                 "luong train: %zu train / %zu dev / %zu test pairs (of %zu read, %zu within %zu tokens); "
                 "vocabularies %zu / %zu; %s attention, %s decoder, %d thread%s, %s%s%s\n",
                 splits.train.size(), splits.dev.size(), splits.test.size(), splits.read, splits.filtered,
                 config.max_len, source_vocab.size(), target_vocab.size(), config.attention.c_str(),
                 config.decoder.c_str(), threads, threads == 1 ? "" : "s", device.str().c_str(), ranks.c_str(),
                 resume ? (", resuming after epoch " + std::to_string(state.epoch) +
                           (state.batches_done ? " + " + std::to_string(state.batches_done) + " batches" : ""))
                              .c_str()
                        : "");
  }

  const models::LossAverage average =
      config.loss_average == "step" ? models::LossAverage::kStep : models::LossAverage::kToken;
  InterruptGuard interrupt_guard;
  for (int epoch = state.epoch + 1; epoch <= config.epochs; ++epoch) {
    data::BatchingOptions batching;
    batching.batch_size = config.batch;
    batching.by_tokens = config.batch_by_tokens;
    batching.bucket = config.bucket;
    batching.shuffle = config.shuffle;
    batching.seed = config.seed * 1000003ULL + static_cast<std::uint64_t>(epoch);
    const std::vector<std::vector<const data::EncodedPair*>> plan = data::plan_batches(train_pairs, batching);
    std::int64_t epoch_tokens = 0;
    for (const auto& rows : plan) epoch_tokens += target_tokens(rows);

    Progress progress("epoch " + std::to_string(epoch) + "/" + std::to_string(config.epochs), epoch_tokens, "tok",
                      is_main ? stderr : nullptr);
    double loss_sum = state.partial_loss;
    double loss_weight = state.partial_weight;
    std::int64_t tokens_done = state.partial_tokens;
    const auto start = std::chrono::steady_clock::now();
    const double allreduce_before = dp != nullptr ? dp->allreduce_seconds() : 0.0;
    const std::int64_t allreduce_calls_before = dp != nullptr ? dp->allreduce_calls() : 0;
    std::int64_t timed_tokens = 0;
    for (std::size_t i = static_cast<std::size_t>(state.batches_done); i < plan.size(); ++i) {
      const std::int64_t batch_tokens = target_tokens(plan[i]);
      optimizer.zero_grad();
      double value = 0;    // the batch's loss, averaged as configured
      double weight = 0;   // its weight in the epoch's mean
      bool interrupted = false;
      if (dp == nullptr) {
        const data::Batch batch = data::make_batch(plan[i]).to(device);
        const models::LossOutput loss = model->loss(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt, average);
        value = loss.loss.item<double>();
        if (std::isfinite(value)) loss.loss.backward();
        interrupted = g_interrupted.load();
      } else {
        // Each rank's loss is its rows' share of the global batch's average, so the summed
        // gradients are exactly the single-process gradient of the whole batch.
        const std::vector<const data::EncodedPair*> mine = data::shard_rows(plan[i], dp->rank(), dp->world_size());
        double local = 0;
        if (!mine.empty()) {
          const data::Batch batch = data::make_batch(mine).to(device);
          const models::LossOutput loss = model->weighted_loss(batch.src, batch.src_lengths, batch.dec_in,
                                                               batch.dec_tgt, step_weights(plan[i], average));
          local = loss.loss.item<double>();
          if (std::isfinite(local)) loss.loss.backward();
        }
        const std::vector<double> totals =
            dp->sum_gradients(model->parameters(), {local, g_interrupted.load() ? 1.0 : 0.0});
        value = totals[0];
        interrupted = totals[1] > 0;
      }
      if (!std::isfinite(value)) {
        throw Error("non-finite loss at epoch " + std::to_string(epoch) + " batch " + std::to_string(i + 1) +
                    " (corpus lines " + describe_lines(plan[i]) + "); the last good checkpoint in " +
                    paths.checkpoint + " is kept");
      }
      if (config.clip > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), config.clip);
      optimizer.step();
      // token averaging weighs each batch by its tokens; step averaging takes the mean over batches
      weight = average == models::LossAverage::kToken ? static_cast<double>(batch_tokens) : 1.0;
      loss_sum += value * weight;
      loss_weight += weight;
      tokens_done += batch_tokens;
      timed_tokens += batch_tokens;
      char detail[64];
      std::snprintf(detail, sizeof detail, "loss %.4f", loss_sum / loss_weight);
      progress.advance(batch_tokens, detail);
      if (interrupted) {
        progress.finish();
        state.batches_done = static_cast<std::int64_t>(i + 1);
        state.partial_loss = loss_sum;
        state.partial_weight = loss_weight;
        state.partial_tokens = tokens_done;
        if (is_main) {
          save_checkpoint(paths, *model, optimizer, state, false, false);
          std::fprintf(stderr,
                       "luong train: interrupted; checkpoint saved after epoch %d batch %zu (resume with --resume)\n",
                       epoch - 1, i + 1);
        }
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
    state.epoch = epoch;
    state.batches_done = 0;
    state.partial_loss = state.partial_weight = 0;
    state.partial_tokens = 0;
    bool stop = false;
    if (is_main) {
      const DevMetrics dev = evaluate_dev(*model, dev_batches, dev_references, target_vocab, *target_tokenizer, device);
      record.dev_loss = dev.loss;
      record.dev_bleu = dev.bleu;
      state.history.push_back(record);
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
      save_checkpoint(paths, *model, optimizer, state, improved, true);
      std::string communication;
      if (dp != nullptr) {
        const std::int64_t calls = dp->allreduce_calls() - allreduce_calls_before;
        char text[96];
        std::snprintf(text, sizeof text, ", all-reduce %.2f ms/step (%zu bucket%s)",
                      calls > 0 ? 1000.0 * (dp->allreduce_seconds() - allreduce_before) / static_cast<double>(calls) : 0.0,
                      dp->bucket_count(), dp->bucket_count() == 1 ? "" : "s");
        communication = text;
      }
      if (std::isnan(dev.loss)) {
        std::fprintf(stderr, "epoch %d/%d: train loss %.4f, %.0f tok/s, %.1f s%s\n", epoch, config.epochs,
                     record.train_loss, record.tokens_per_second, seconds, communication.c_str());
      } else {
        std::fprintf(stderr, "epoch %d/%d: train loss %.4f, dev loss %.4f, dev BLEU %.2f%s, %.0f tok/s, %.1f s%s\n",
                     epoch, config.epochs, record.train_loss, dev.loss, dev.bleu, improved ? " (best)" : "",
                     record.tokens_per_second, seconds, communication.c_str());
      }
      if (config.patience > 0 && state.bad_epochs >= config.patience) {
        std::fprintf(stderr, "luong train: dev BLEU has not improved for %d epochs; stopping (best %.2f kept in %s)\n",
                     config.patience, state.best_bleu, paths.best_model.c_str());
        stop = true;
      }
    } else {
      state.history.push_back(record);
    }
    result.history = state.history;
    if (dp != nullptr) stop = dp->sum({stop ? 1.0 : 0.0})[0] > 0;  // rank 0 decides for everyone
    if (stop) {
      result.stopped_early = true;
      break;
    }
  }
  return result;
}

}  // namespace luong::training
