#include "luong/training/trainer.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>

#include "luong/models/matrix_products.h"
#include "luong/models/state_dict.h"
#include "luong/models/step_buffers.h"
#include "luong/run/run_lock.h"
#include "luong/run/runtime.h"
#include "luong/training/checkpointer.h"
#include "luong/training/epoch_end.h"
#include "luong/training/prepared_data.h"
#include "luong/training/schedule.h"
#include "luong/training/step_profile.h"
#include "luong/training/train_step.h"
#include "luong/training/weight_average.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/progress.h"

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

// A private run directory for ranks other than 0, removed when training ends.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string pattern = (fs::temp_directory_path() / "luong-rank-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a scratch directory in " + pattern);
    path_ = pattern;
  }
  ~ScratchDirectory() { remove_tree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string flag_of(const options::Info& info) { return std::string("--") + info.flag; }

// On --resume: the run's own config.json with the changes the table allows taken from `requested`;
// a change to anything else is refused.
run::TrainConfig resumed_config(const run::TrainConfig& requested, const run::RunPaths& paths,
                                std::vector<options::Change>& allowed) {
  if (!fs::exists(paths.config)) throw Error(printable(paths.dir) + ": nothing to resume (no config.json)");
  run::TrainConfig saved = run::TrainConfig::load(paths.config);
  for (const options::Change& change : options::differences(saved, requested)) {
    if (change.info->on_resume == options::OnResume::kFixed) {
      throw Error("--resume cannot change " + flag_of(*change.info) + " (the run has " + printable(change.from) +
                  ", asked " + printable(change.to) + "): it would change the data, the model or the batches");
    }
    allowed.push_back(change);
  }
  run::TrainConfig config = requested;
  config.resumed = saved.resumed;
  return config;
}

// config.json remembers what each --resume changed and after which epoch; it is written with the
// first checkpoint the resumed run commits, so that a resume that fails changes nothing.
void record_resume(run::TrainConfig& config, std::vector<options::Change>& changes, std::int64_t after_epoch,
                   const run::RunPaths& paths) {
  if (changes.empty()) return;
  Json changed = Json::object();
  for (const auto& change : changes) changed[change.info->key] = Json::array({change.from, change.to});
  config.resumed.push_back({{"after_epoch", after_epoch}, {"changes", changed}});
  config.save(paths.config);
  changes.clear();
}

// An epoch's mean loss. On the CPU the values are read at once (they cost nothing to read and a
// non-finite loss stops the step); on a GPU they are summed on the device and read when shown.
class LossMeter {
 public:
  LossMeter(double sum, double weight, const torch::Device& device) : sum_(sum), weight_(weight), device_(device) {}
  void add(const torch::Tensor& loss, double weight) {
    if (device_.is_cpu()) {
      sum_ += loss.item<double>() * weight;
    } else {
      pending_ = pending_.defined() ? pending_ + loss * weight : loss * weight;
    }
    weight_ += weight;
  }
  double sum() {
    if (pending_.defined()) {
      sum_ += pending_.item<double>();
      pending_ = torch::Tensor();
    }
    return sum_;
  }
  double weight() const { return weight_; }
  double mean() { return sum() / std::max(weight_, 1.0); }

 private:
  double sum_, weight_;
  torch::Device device_;
  torch::Tensor pending_;
};

std::string describe_lines(const std::vector<const data::EncodedPair*>& rows) {
  std::ostringstream out;
  for (std::size_t k = 0; k < rows.size() && k < 8; ++k) out << (k ? "," : "") << rows[k]->line;
  if (rows.size() > 8) out << ",...";
  return out.str();
}

// Everything one training process holds.
struct Session {
  run::TrainConfig config;
  run::Runtime runtime;
  std::unique_ptr<DataParallel> parallel;
  std::unique_ptr<ScratchDirectory> scratch;
  std::unique_ptr<run::RunLock> lock;
  run::RunPaths paths{""};
  PreparedData data;
  models::Seq2Seq model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<ExponentialAverage> ema;  ///< with --ema
  TrainerState state;
  std::vector<options::Change> resume_changes;  ///< not yet recorded in config.json
  std::int64_t resumed_after = 0;
  bool profiled = false;  ///< --profile-steps has run (in the first epoch this process trained)
  bool is_main() const { return parallel == nullptr || parallel->is_main(); }
  Checkpointer checkpointer() const { return Checkpointer(paths, config.average_last); }
};

// The first option a follower's command line gave with another value than rank 0's configuration
// ("--hidden 64, rank 0 with 32"), or empty. Runtime options are each rank's own, and the corpus and
// the run directory are paths, which may differ between hosts (the corpus's content is compared
// once it is read: check_ranks_read_one_corpus).
std::string option_against_main(const run::TrainConfig& requested, const run::TrainConfig& main,
                                const std::vector<std::string>& given) {
  std::vector<std::string> own = {"data", "out"};
  const run::RuntimeOptions runtime;
  run::RuntimeOptions::visit(runtime, [&](const options::Info& info, const auto&) { own.push_back(info.key); });
  const auto contains = [](const std::vector<std::string>& keys, const char* key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  for (const options::Change& change : options::differences(main, requested)) {
    if (!contains(given, change.info->key) || contains(own, change.info->key)) continue;
    return flag_of(*change.info) + " " + printable(change.to) + ", rank 0 with " + printable(change.from);
  }
  return "";
}

// Every rank learns whether any was started with other training options than rank 0's, and all
// stop if one was: a follower takes rank 0's configuration, and would otherwise train rank 0's
// model under a command line that says another.
void check_ranks_agree_on_options(const Session& s, const std::string& mine) {
  const double differing = s.parallel->sum({mine.empty() ? 0.0 : 1.0})[0];
  if (differing == 0) return;
  const std::string me = s.parallel->me();
  if (!mine.empty()) {
    throw Error(me + ": this rank was started with " + mine + " (every rank must be started with the same training options)");
  }
  throw Error(me + ": " + std::to_string(static_cast<int>(differing)) +
              " other rank(s) were started with training options other than rank 0's (each names its own)");
}

// The runtime, the rendezvous (rank 0's configuration is the run's: the others keep only their
// runtime options and a scratch directory) and the run directory's lock.
void open_session(Session& s, const run::TrainConfig& requested, bool resume, bool overwrite,
                  const DistributedOptions& distributed) {
  const bool follower = distributed.enabled() && distributed.rank != 0;
  s.config = requested;
  if (!follower) s.config.validate();
  if (distributed.enabled() && requested.accumulate > 1) {
    throw Error("--accumulate with --world-size > 1 is not supported: a larger global --batch does the same");
  }
  s.runtime = run::apply_runtime(s.config.runtime(), distributed.enabled() ? distributed.local_world_size : 1);
  if (distributed.enabled() && s.runtime.device.is_cuda() && !s.runtime.device.has_index()) {
    s.runtime.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(distributed.local_rank));
  }
  if (!follower) {
    s.lock = std::make_unique<run::RunLock>(s.config.out);
    if (resume) s.config = resumed_config(s.config, run::RunPaths(s.config.out), s.resume_changes);
  }
  if (distributed.enabled()) {
    s.parallel = std::make_unique<DataParallel>(distributed, s.runtime.device);
    const std::string main_config = s.parallel->share("config.json", dump_json(s.config.to_json()));
    run::TrainConfig from_main = run::TrainConfig::from_json(parse_json(main_config, "rank 0's config"), "rank 0's config");
    check_ranks_agree_on_options(s, follower ? option_against_main(requested, from_main, distributed.given_options) : "");
    if (follower) {
      options::assign_subset(from_main, s.config.runtime());  // its own device, threads and kernels
      s.scratch = std::make_unique<ScratchDirectory>();
      from_main.out = s.scratch->path();
      from_main.validate();
      s.config = from_main;
    }
  }
  s.paths = run::RunPaths(s.config.out);
  if (s.is_main()) run::check_run_files(s.paths);
  if (s.is_main() && !resume) run::clear_previous_run(s.paths, overwrite);
  if (s.is_main()) remove_stale_temporaries(s.config.out);
  // First, so that the directory is recognisably a run from the moment its lock is held.
  if (s.is_main() && !resume) s.config.save(s.paths.config);
}

// What the run's data and split depend on, kept in every checkpoint so that --resume can tell that
// config.json or the corpus changed under it: the options --resume may not change, and the corpus.
Json data_record(const Session& s) {
  Json fixed = Json::object();
  run::TrainConfig::visit(s.config, [&](const options::Info& info, const auto& value) {
    if (info.on_resume == options::OnResume::kFixed) fixed[info.key] = options::value_to_json(value);
  });
  return {{"options", fixed}, {"corpus", {{"pairs", s.data.corpus_pairs}, {"digest", s.data.corpus_digest}}}};
}

// On --resume: the checkpoint's record against the run as it is now (a checkpoint of an older luong
// has none).
void check_data_record(const Session& s) {
  const Json& recorded = s.state.data;
  if (recorded.empty()) return;
  const std::string origin = printable((fs::path(s.paths.checkpoint) / "state.json").string());
  const Json now = data_record(s);
  if (recorded.contains("options") && recorded["options"].is_object()) {
    for (const auto& item : recorded["options"].items()) {
      if (!now["options"].contains(item.key()) || now["options"][item.key()] == item.value()) continue;
      throw CheckpointError(origin + ": the checkpoint was trained with " + printable(item.key()) + " = " +
                            printable(dump_json(item.value())) + ", but config.json now says " +
                            printable(dump_json(now["options"][item.key()])) +
                            " (edited under the checkpoint?): restore it, or start a new run");
    }
  }
  if (recorded.value("corpus", Json()) != now["corpus"]) {
    const auto describe = [](const Json& corpus) {
      return printable(dump_json(corpus.value("pairs", Json()))) + " pairs, digest " +
             printable(dump_json(corpus.value("digest", Json())));
    };
    throw CheckpointError(printable(s.config.data) + ": the corpus is not the one the checkpoint was trained on (" +
                          describe(now["corpus"]) + "; the checkpoint's: " +
                          describe(recorded.value("corpus", Json::object())) +
                          "): its splits would differ; restore it, or start a new run");
  }
}

// Every rank reads the corpus itself: one that read another than rank 0's would train on other
// batches without a word, so they compare before the first step.
void check_ranks_read_one_corpus(Session& s) {
  if (s.parallel == nullptr) return;
  const std::string mine = s.data.corpus_digest + "/" + std::to_string(s.data.corpus_pairs);
  const std::string main_corpus = s.parallel->share("corpus", mine);
  const double differing = s.parallel->sum({main_corpus == mine ? 0.0 : 1.0})[0];
  if (differing == 0) return;
  if (s.is_main()) {
    throw Error(s.parallel->me() + ": " + std::to_string(static_cast<int>(differing)) +
                " other rank(s) read a corpus different from rank 0's " + printable(s.config.data) +
                " (every rank must read the same corpus)");
  }
  throw Error(s.parallel->me() +
              ": this rank's corpus " + printable(s.config.data) + " differs from rank 0's (" + mine + " against " +
              printable(main_corpus) + "; every rank must read the same corpus)");
}

// Rank 0 draws from the process's one stream of random numbers, which rng.pt saves; every other
// rank's draws (its dropout) depend only on the seed, its rank and the batch, so that a resumed run
// draws what an uninterrupted one did.
void seed_follower(const Session& s, std::int64_t epoch, std::size_t batch) {
  if (s.is_main()) return;
  std::uint64_t x = static_cast<std::uint64_t>(s.config.seed) * 0x9E3779B97F4A7C15ULL ^
                    (static_cast<std::uint64_t>(s.parallel->rank()) << 48) ^ (static_cast<std::uint64_t>(epoch) << 24) ^
                    static_cast<std::uint64_t>(batch);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;  // SplitMix64's finaliser
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  torch::manual_seed(x ^ (x >> 31));
}

std::vector<std::vector<const data::EncodedPair*>> epoch_plan(const Session& s, std::int64_t epoch) {
  data::BatchingOptions batching;
  batching.batch_size = s.config.batch;
  batching.by_tokens = s.config.batch_by_tokens;
  batching.bucket = s.config.bucket;
  batching.shuffle = s.config.shuffle;
  batching.seed = static_cast<std::uint64_t>(s.config.seed) * 1000003ULL + static_cast<std::uint64_t>(epoch);
  return data::plan_batches(s.data.train, batching);
}

// The model and optimizer, from the checkpoint on --resume; every rank starts from rank 0's weights.
void build_model(Session& s, bool resume) {
  torch::manual_seed(static_cast<std::uint64_t>(s.config.seed));
  s.model = models::Seq2Seq(s.config.model_options(static_cast<int64_t>(s.data.source_vocab->size()),
                                                   static_cast<int64_t>(s.data.target_vocab->size())));
  if (s.config.param_init > 0) s.model->initialize_uniform(s.config.param_init);
  s.model->to(s.runtime.device, s.config.scalar_type());
  s.model->train();
  s.optimizer = make_optimizer(s.config, s.model->parameters());
  if (s.config.ema > 0) s.ema = std::make_unique<ExponentialAverage>(*s.model, s.config.ema);
  DataParallel* const dp = s.parallel.get();
  if (resume) {
    for (const std::string& file : Checkpointer::files()) {
      mirror_from_main(dp, "checkpoint/" + file, (fs::path(s.paths.checkpoint) / file).string(),
                       Checkpointer::file_size_limit(file, models::state_dict_size_limit(*s.model)));
    }
    const run::TrainConfig saved = s.is_main() ? run::TrainConfig::load(s.paths.config) : s.config;
    s.state = s.checkpointer().load(*s.model, *s.optimizer, saved.epochs, s.ema.get());
    if (s.state.batches_done > 0) {
      s.state.check_batches(static_cast<std::int64_t>(epoch_plan(s, s.state.epoch + 1).size()),
                            printable((fs::path(s.paths.checkpoint) / "state.json").string()));
    }
    s.resumed_after = s.state.epoch;
    check_data_record(s);
  }
  s.state.data = data_record(s);
  if (dp != nullptr) dp->broadcast_parameters(s.model->parameters());
}

// --precision bf16 on a CPU where it does not pay: bf16 emulated, or its products (a step's, timed
// now) no faster than float32's.
void note_slow_bf16(const Session& s) {
  if (s.config.precision != models::Precision::kBFloat16 || !s.runtime.device.is_cpu()) return;
  if (!models::cpu_has_native_bf16()) {
    std::fprintf(stderr, "luong train: note: this CPU has neither AVX512-BF16 nor AMX; bf16 products are emulated and "
                         "slower than float32\n");
    return;
  }
  const std::int64_t sentences =
      s.config.batch_by_tokens ? std::max<std::int64_t>(1, s.config.batch / s.config.max_len) : s.config.batch;
  const std::int64_t rows = sentences / models::row_block_count(sentences), k = s.config.hidden;
  const std::int64_t n = (s.config.cell == models::CellKind::kLstm ? 4 : 3) * k;  // the gates
  const std::optional<models::PanelProductRates> rates = models::measure_panel_product_rates(rows, k, n);
  if (!rates || !rates->bf16_slower()) return;
  std::fprintf(stderr,
               "luong train: note: bf16 products run slower than float32 on this CPU (%.0f against %.0f GFLOP/s for "
               "a step's [%lld, %lld] x [%lld, %lld], measured now); float32 trains faster here\n",
               rates->bf16, rates->float32, static_cast<long long>(rows), static_cast<long long>(k),
               static_cast<long long>(k), static_cast<long long>(n));
}

void print_start(const Session& s, bool resume, const DistributedOptions& distributed) {
  if (!s.is_main()) return;
  const DataParallel* dp = s.parallel.get();
  const std::string ranks = dp == nullptr ? std::string()
                                          : ", " + std::to_string(dp->world_size()) + " ranks (" +
                                                std::to_string(distributed.local_world_size) + " on this machine)";
  const std::string resuming =
      resume ? ", resuming after epoch " + std::to_string(s.state.epoch) +
                   (s.state.batches_done ? " + " + std::to_string(s.state.batches_done) + " batches" : "")
             : "";
  const data::DataSplits& splits = s.data.splits;
  std::fprintf(stderr,
               "luong train: %zu train / %zu dev / %zu test pairs (of %zu read, %zu within %lld tokens); "
               "vocabularies %zu / %zu; %s attention, %s decoder, %d thread%s, %s%s%s\n",
               splits.train.size(), splits.dev.size(), splits.test.size(), splits.read, splits.filtered,
               static_cast<long long>(s.config.max_len), s.data.source_vocab->size(), s.data.target_vocab->size(),
               options::enum_name(s.config.attention), options::enum_name(s.config.decoder), s.runtime.threads,
               s.runtime.threads == 1 ? "" : "s", s.runtime.device.str().c_str(), ranks.c_str(), resuming.c_str());
  note_slow_bf16(s);
}

// `where`: the last training the checkpoint holds ("epoch 3" or "epoch 2 batch 5").
void announce_interrupted(const Session& s, const std::string& where) {
  if (!s.is_main()) return;
  std::fprintf(stderr, "luong train: interrupted; checkpoint saved after %s (resume with --resume)\n", where.c_str());
}

// config.json's record of the resume's changes, then the checkpoint; weights that are no longer
// finite commit neither (the run ends with one line, the last good checkpoint kept).
void commit_checkpoint(Session& s, bool improved, bool epoch_end) {
  Checkpointer::check_finite(models::state_dict(*s.model), s.ema ? s.ema->state_dict() : models::StateDict(), s.state);
  record_resume(s.config, s.resume_changes, s.resumed_after, s.paths);
  s.checkpointer().save(*s.model, *s.optimizer, s.state, improved, epoch_end, s.ema.get());
}

void save_interrupted(Session& s, std::int64_t epoch, std::size_t batch, LossMeter& loss, std::int64_t tokens) {
  s.state.batches_done = static_cast<std::int64_t>(batch);
  s.state.partial_loss = loss.sum();
  s.state.partial_weight = loss.weight();
  s.state.partial_tokens = tokens;
  if (!s.is_main()) return;
  commit_checkpoint(s, false, false);
  announce_interrupted(s, "epoch " + std::to_string(epoch - 1) + " batch " + std::to_string(batch));
}

struct EpochOutcome {
  EpochRecord record;
  bool complete = true;      ///< every batch applied: the epoch's end (dev, checkpoint) is due
  bool interrupted = false;  ///< SIGINT; when complete, it came with the epoch's last batch
};

// --profile-steps: the table on stderr, once the window has run (the trace is already written).
void report_profile(Session& s, StepProfiler& profiler) {
  const StepProfile profile = profiler.finish();
  if (profile.steps == 0) return;
  s.profiled = true;
  print_step_profile(profile, stderr);
  std::fprintf(stderr, "profile: the Chrome trace of those steps is in %s\n", s.paths.profile.c_str());
}

// One epoch's batches, from where the checkpoint left off.
EpochOutcome run_epoch(Session& s, std::int64_t epoch, TrainStep& step) {
  const auto plan = epoch_plan(s, epoch);
  std::int64_t epoch_tokens = 0;
  for (const auto& rows : plan) epoch_tokens += data::target_tokens(rows);
  const bool token_average = s.config.loss_average == models::LossAverage::kToken;
  Progress progress("epoch " + std::to_string(epoch) + "/" + std::to_string(s.config.epochs), epoch_tokens, "tok",
                    s.is_main() ? stderr : nullptr);
  LossMeter loss(s.state.partial_loss, s.state.partial_weight, s.runtime.device);
  std::int64_t tokens_done = s.state.partial_tokens, timed_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  bool interrupted_at_end = false;
  const std::int64_t first_batch = s.state.batches_done;
  const std::int64_t warm_up = std::min<std::int64_t>(10, (static_cast<std::int64_t>(plan.size()) - first_batch) / 2);
  const torch::Device& device = s.runtime.device;
  StepProfiler profiler(first_batch + warm_up, (s.profiled || !s.is_main()) ? 0 : s.config.profile_steps,
                        s.paths.profile, device.is_cuda() ? std::optional<std::int64_t>(device.index()) : std::nullopt);
  for (std::size_t i = static_cast<std::size_t>(first_batch); i < plan.size(); ++i) {
    const std::int64_t batch_tokens = data::target_tokens(plan[i]);
    profiler.before_step(static_cast<std::int64_t>(i));
    seed_follower(s, epoch, i);
    set_learning_rate(*s.optimizer, learning_rate(s.config, epoch, s.state));
    const TrainStep::Result result = step.run(plan[i], g_interrupted.load(), i + 1 == plan.size());
    if (result.applied) {
      ++s.state.optimizer_steps;
      if (s.ema) s.ema->update();
    }
    if (!result.finite) {
      throw Error("non-finite loss at epoch " + std::to_string(epoch) + " batch " + std::to_string(i + 1) +
                  " (corpus lines " + describe_lines(plan[i]) + "); the last good checkpoint in " + s.paths.checkpoint +
                  " is kept");
    }
    // Token averaging weighs each batch by its tokens; step averaging takes the mean over batches.
    loss.add(result.loss, token_average ? static_cast<double>(batch_tokens) : 1.0);
    tokens_done += batch_tokens;
    timed_tokens += batch_tokens;
    progress.advance(batch_tokens, [&] {
      char detail[64];
      std::snprintf(detail, sizeof detail, "loss %.4f", loss.mean());
      return std::string(detail);
    });
    // A stop on the last batch ends the epoch as usual: a checkpoint cannot resume an epoch with no batch left.
    if (result.interrupted && i + 1 < plan.size()) {
      progress.finish();
      report_profile(s, profiler);
      save_interrupted(s, epoch, i + 1, loss, tokens_done);
      return {{}, false, true};
    }
    interrupted_at_end = result.interrupted;
  }
  progress.finish();
  report_profile(s, profiler);
  const double mean = loss.mean();
  if (!std::isfinite(mean)) {  // on a GPU, where the steps do not wait to check each loss
    throw Error("non-finite loss in epoch " + std::to_string(epoch) + "; the last good checkpoint in " +
                s.paths.checkpoint + " is kept");
  }
  EpochOutcome out;
  out.interrupted = interrupted_at_end;
  out.record.epoch = epoch;
  out.record.train_loss = mean;
  out.record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.record.tokens_per_second = out.record.seconds > 0 ? static_cast<double>(timed_tokens) / out.record.seconds : 0.0;
  return out;
}

// The dev evaluation, the checkpoint and the log line; returns whether training should stop.
bool end_epoch(Session& s, const EpochRecord& record, const std::string& communication) {
  s.state.epoch = record.epoch;
  s.state.batches_done = 0;
  s.state.partial_loss = s.state.partial_weight = 0;
  s.state.partial_tokens = 0;
  bool stop = false;
  if (s.is_main()) {
    const DevMetrics dev = evaluate_dev(*s.model, s.data, s.runtime.device);
    const bool improved = record_epoch(s.state, record, dev);
    std::string extra = communication;
    if (s.config.schedule == run::Schedule::kPlateau && update_plateau(s.state, dev.loss, s.config.plateau_patience)) {
      extra += ", dev loss stalled: learning rate now " + options::value_text(learning_rate(s.config, record.epoch, s.state));
    }
    commit_checkpoint(s, improved, true);
    log_epoch(s.state.history.back(), s.config.epochs, improved, extra);
    if (s.config.patience > 0 && s.state.bad_epochs >= s.config.patience) {
      std::fprintf(stderr, "luong train: dev BLEU has not improved for %lld epochs; stopping (best %.2f kept in %s)\n",
                   static_cast<long long>(s.config.patience), s.state.best_bleu, s.paths.best_model.c_str());
      stop = true;
    }
  } else {
    record_epoch(s.state, record, {});
    if (s.config.schedule == run::Schedule::kPlateau) update_plateau(s.state, NAN, s.config.plateau_patience);
  }
  if (s.parallel != nullptr) stop = s.parallel->sum({stop ? 1.0 : 0.0})[0] > 0;  // rank 0 decides for everyone
  return stop;
}

// --max-time: whether the next epoch, taking as long as the last one, would end past the budget.
bool out_of_time(const Session& s, std::chrono::steady_clock::time_point started) {
  if (s.config.max_time <= 0 || s.state.history.empty()) return false;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double next = s.state.history.back().seconds;
  if (elapsed + next <= static_cast<double>(s.config.max_time)) return false;
  if (s.is_main()) {
    std::fprintf(stderr, "luong train: stopping after epoch %lld: another would end past --max-time %lld s (%.0f s so far)\n",
                 static_cast<long long>(s.state.epoch), static_cast<long long>(s.config.max_time), elapsed);
  }
  return true;
}

std::string communication_summary(const DataParallel* dp, double seconds_before, std::int64_t calls_before) {
  if (dp == nullptr) return "";
  const std::int64_t calls = dp->allreduce_calls() - calls_before;
  char text[96];
  std::snprintf(text, sizeof text, ", all-reduce %.2f ms/step (%zu bucket%s)",
                calls > 0 ? 1000.0 * (dp->allreduce_seconds() - seconds_before) / static_cast<double>(calls) : 0.0,
                dp->bucket_count(), dp->bucket_count() == 1 ? "" : "s");
  return text;
}

}  // namespace

TrainResult train(const run::TrainConfig& requested, bool resume, const DistributedOptions& distributed, bool overwrite) {
  if (resume && overwrite) throw Error("--overwrite starts the run afresh; it cannot be used with --resume");
  Session s;
  open_session(s, requested, resume, overwrite, distributed);
  s.data = prepare_data(s.config, s.paths, resume, s.parallel.get());
  check_ranks_read_one_corpus(s);
  build_model(s, resume);
  print_start(s, resume, distributed);

  TrainResult result;
  result.train_pairs = s.data.train.size();
  result.source_vocab = s.data.source_vocab->size();
  result.target_vocab = s.data.target_vocab->size();
  result.history = s.state.history;
  TrainStep step(*s.model, *s.optimizer, s.config, s.runtime.device, s.parallel.get());
  InterruptGuard interrupt_guard;
  const auto started = std::chrono::steady_clock::now();
  for (std::int64_t epoch = s.state.epoch + 1; epoch <= s.config.epochs; ++epoch) {
    bool late = out_of_time(s, started);
    if (s.parallel != nullptr && s.config.max_time > 0) late = s.parallel->sum({late ? 1.0 : 0.0})[0] > 0;  // together
    if (late) {
      result.stopped_early = true;
      break;
    }
    const DataParallel* dp = s.parallel.get();
    const double allreduce_before = dp != nullptr ? dp->allreduce_seconds() : 0.0;
    const std::int64_t calls_before = dp != nullptr ? dp->allreduce_calls() : 0;
    const EpochOutcome outcome = run_epoch(s, epoch, step);
    if (!outcome.complete) {
      result.interrupted = true;
      return result;
    }
    const bool stop = end_epoch(s, outcome.record, communication_summary(dp, allreduce_before, calls_before));
    result.history = s.state.history;
    if (outcome.interrupted && !stop && epoch < s.config.epochs) {
      announce_interrupted(s, "epoch " + std::to_string(epoch));
      result.interrupted = true;
      return result;
    }
    if (stop) {
      result.stopped_early = true;
      break;
    }
  }
  return result;
}

}  // namespace luong::training
