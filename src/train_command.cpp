#include <filesystem>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/training/run_directory.h"
#include "luong/training/trainer.h"
#include "luong/util/error.h"

namespace luong::cli {
namespace {

// Command-line flag -> config.json key, and how to read the flag's value.
enum class Kind { kString, kInt, kDouble, kBool, kNegatedBool };
struct Flag {
  const char* flag;
  const char* key;
  Kind kind;
};

const Flag kFlags[] = {
    {"data", "data", Kind::kString},           {"format", "format", Kind::kString},
    {"reverse", "reverse", Kind::kBool},       {"max-len", "max_len", Kind::kInt},
    {"train-size", "train_size", Kind::kInt},  {"test-size", "test_size", Kind::kInt},
    {"dev-size", "dev_size", Kind::kInt},      {"dedupe", "deduplicate", Kind::kBool},
    {"tokenizer", "tokenizer", Kind::kString}, {"spm-vocab", "spm_vocab", Kind::kInt},
    {"spm-type", "spm_type", Kind::kString},   {"min-freq", "min_frequency", Kind::kInt},
    {"max-vocab", "max_vocab", Kind::kInt},    {"attention", "attention", Kind::kString},
    {"score", "score", Kind::kString},         {"window", "window", Kind::kInt},
    {"renormalize", "renormalize", Kind::kBool}, {"no-scale", "scale", Kind::kNegatedBool},
    {"decoder", "decoder", Kind::kString},     {"hidden", "hidden", Kind::kInt},
    {"embed", "embed", Kind::kInt},            {"layers", "layers", Kind::kInt},
    {"dropout", "dropout", Kind::kDouble},     {"bidirectional", "bidirectional", Kind::kBool},
    {"batch", "batch", Kind::kInt},            {"batch-by-tokens", "batch_by_tokens", Kind::kBool},
    {"bucket", "bucket", Kind::kBool},         {"no-shuffle", "shuffle", Kind::kNegatedBool},
    {"epochs", "epochs", Kind::kInt},          {"lr", "lr", Kind::kDouble},
    {"clip", "clip", Kind::kDouble},           {"loss-average", "loss_average", Kind::kString},
    {"patience", "patience", Kind::kInt},      {"device", "device", Kind::kString},
    {"threads", "threads", Kind::kInt},        {"seed", "seed", Kind::kInt},
    {"out", "out", Kind::kString},             {"dtype", "dtype", Kind::kString},
    {"unfused", "fused", Kind::kNegatedBool},
};

}  // namespace

int train_command(int argc, char** argv) {
  const training::TrainConfig d;  // the defaults shown in --help
  cxxopts::Options options("luong train", "Train an attention-based translation model (Luong et al. 2015).");
  options.add_options("data")
      ("data", "corpus: a TSV file (english<TAB>arabic[<TAB>...]), an OPUS directory or prefix, or builtin:numbers",
       cxxopts::value<std::string>())
      ("format", "tsv or opus", cxxopts::value<std::string>()->default_value(d.format))
      ("reverse", "translate Arabic -> English")
      ("max-len", "longest sentence kept, in words", cxxopts::value<int>()->default_value(std::to_string(d.max_len)))
      ("train-size", "training pairs", cxxopts::value<int>()->default_value(std::to_string(d.train_size)))
      ("test-size", "test pairs", cxxopts::value<int>()->default_value(std::to_string(d.test_size)))
      ("dev-size", "dev pairs (for dev loss, BLEU, early stopping)", cxxopts::value<int>()->default_value(std::to_string(d.dev_size)))
      ("dedupe", "drop repeated sentence pairs")
      ("tokenizer", "word (the notebook's) or spm (sentencepiece trained on the training split)",
       cxxopts::value<std::string>()->default_value(d.tokenizer))
      ("spm-vocab", "sentencepiece vocabulary size per side", cxxopts::value<int>()->default_value(std::to_string(d.spm_vocab)))
      ("spm-type", "unigram or bpe", cxxopts::value<std::string>()->default_value(d.spm_type))
      ("min-freq", "rarer tokens become <unk>", cxxopts::value<int>()->default_value("1"))
      ("max-vocab", "largest vocabulary per side (0 = all)", cxxopts::value<int>()->default_value("0"));
  options.add_options("model")
      ("attention", "dot, general, concat (global), local-m or local-p", cxxopts::value<std::string>()->default_value(d.attention))
      ("score", "score of local attention: dot, general or concat", cxxopts::value<std::string>()->default_value("dot"))
      ("window", "local window half-width D", cxxopts::value<int>()->default_value(std::to_string(d.window)))
      ("renormalize", "local-p as in the notebook (clamped centre, weights renormalised)")
      ("no-scale", "do not divide dot/general scores by sqrt(hidden)")
      ("decoder", "luong (input feeding) or bahdanau (the notebook's first Decoder)",
       cxxopts::value<std::string>()->default_value(d.decoder))
      ("hidden", "GRU size", cxxopts::value<int>()->default_value(std::to_string(d.hidden)))
      ("embed", "decoder embedding size", cxxopts::value<int>()->default_value(std::to_string(d.embed)))
      ("layers", "GRU layers", cxxopts::value<int>()->default_value("1"))
      ("dropout", "dropout between GRU layers", cxxopts::value<double>()->default_value("0"))
      ("bidirectional", "bidirectional encoder (bridged to the decoder size)")
      ("unfused", "run the recurrences as LibTorch modules instead of the fused kernels (same model; for comparison)")
      ("dtype", "float32, or float64 for numerical checks", cxxopts::value<std::string>()->default_value(d.dtype));
  options.add_options("training")
      ("batch", "sentences per batch (or tokens with --batch-by-tokens)", cxxopts::value<int>()->default_value(std::to_string(d.batch)))
      ("batch-by-tokens", "--batch counts target tokens")
      ("bucket", "group sentences of similar length")
      ("no-shuffle", "keep the corpus order (the Python reference's)")
      ("epochs", "epochs", cxxopts::value<int>()->default_value(std::to_string(d.epochs)))
      ("lr", "Adam learning rate", cxxopts::value<double>()->default_value("0.001"))
      ("clip", "gradient-norm clipping (0 = off)", cxxopts::value<double>()->default_value("1"))
      ("loss-average", "token (per target token) or step (the notebook's per-step mean)",
       cxxopts::value<std::string>()->default_value(d.loss_average))
      ("patience", "stop after this many epochs without a better dev BLEU (0 = never)", cxxopts::value<int>()->default_value("0"))
      ("seed", "random seed (split, initialisation, batch order)", cxxopts::value<int>()->default_value("0"))
      ("out", "run directory", cxxopts::value<std::string>()->default_value(d.out))
      ("config", "start from this config.json (flags given here override it)", cxxopts::value<std::string>())
      ("resume", "continue the run in --out from its last checkpoint");
  const training::DistributedOptions env = training::DistributedOptions::from_environment();
  options.add_options("distributed (flags override torchrun's WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT)")
      ("world-size", "processes in the data-parallel job; --batch is the global batch",
       cxxopts::value<int>()->default_value(std::to_string(env.world_size)))
      ("rank", "this process's rank, 0..world-size-1 (rank 0 writes the run directory)",
       cxxopts::value<int>()->default_value(std::to_string(env.rank)))
      ("master-addr", "address of rank 0", cxxopts::value<std::string>()->default_value(env.master_addr))
      ("master-port", "port rank 0 listens on", cxxopts::value<int>()->default_value(std::to_string(env.master_port)))
      ("dist-timeout", "seconds to wait for the other ranks before giving up",
       cxxopts::value<int>()->default_value(std::to_string(env.timeout.count())));
  add_runtime_options(options);
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;

  training::DistributedOptions distributed = env;
  distributed.world_size = result["world-size"].as<int>();
  distributed.rank = result["rank"].as<int>();
  distributed.master_addr = result["master-addr"].as<std::string>();
  distributed.master_port = result["master-port"].as<int>();
  distributed.timeout = std::chrono::seconds(result["dist-timeout"].as<int>());
  distributed.validate();

  Json config = training::TrainConfig().to_json();
  const bool resume = result.count("resume") > 0;
  // Ranks other than 0 take the run's configuration from rank 0 and need no run directory.
  const bool follower = distributed.enabled() && distributed.rank != 0;
  if (resume && !follower) {
    const std::string out = result["out"].as<std::string>();
    const training::RunPaths paths(out);
    if (!std::filesystem::exists(paths.config)) throw Error(out + ": nothing to resume (no config.json)");
    config = training::TrainConfig::load(paths.config).to_json();
    if (result.count("config")) throw Error("--resume continues the run's own config.json; drop --config");
  } else if (result.count("config") && !follower) {
    config = training::TrainConfig::load(result["config"].as<std::string>()).to_json();
  }
  for (const Flag& flag : kFlags) {
    if (!result.count(flag.flag)) continue;
    switch (flag.kind) {
      case Kind::kString: config.set(flag.key, result[flag.flag].as<std::string>()); break;
      case Kind::kInt: config.set(flag.key, result[flag.flag].as<int>()); break;
      case Kind::kDouble: config.set(flag.key, result[flag.flag].as<double>()); break;
      case Kind::kBool: config.set(flag.key, true); break;
      case Kind::kNegatedBool: config.set(flag.key, false); break;
    }
  }
  training::TrainConfig train_config = training::TrainConfig::from_json(config, "command line");
  setup_runtime(result);  // validates --device; --device and --threads reach the config through kFlags
  const training::TrainResult trained = training::train(train_config, resume, distributed);
  if (trained.interrupted) return 130;
  if (!follower) std::cerr << "luong train: done; model in " << train_config.out << "/model.pt" << std::endl;
  return 0;
}

}  // namespace luong::cli
