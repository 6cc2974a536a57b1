#include "luong/run/train_config.h"

#include <cmath>

#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::run {
namespace {

std::string flag_name(const options::Info& info) { return std::string("--") + info.flag; }

}  // namespace

void TrainConfig::validate() const {
  options::check_ranges(*this, flag_name);
  if (data.empty()) throw Error("no corpus: give --data FILE|DIR or --data builtin:numbers");
  if (attention == AttentionChoice::kLocalPredictive && window < 1) throw Error("--window: local-p needs D >= 1");
  if (patience > 0 && dev_size == 0) throw Error("--patience needs a dev split (--dev-size > 0)");
  if (schedule == Schedule::kPlateau && dev_size == 0) throw Error("--schedule plateau needs a dev split (--dev-size > 0)");
  if (tie_embeddings && embed != hidden) {
    throw Error("--tie-embeddings needs --embed (" + std::to_string(embed) + ") equal to --hidden (" +
                std::to_string(hidden) + ")");
  }
  if (precision == models::Precision::kBFloat16 && dtype != DType::kFloat32) {
    throw Error("--precision bf16 needs --dtype float32 (the master weights)");
  }
  if (!resumed.is_array()) throw Error("config key 'resumed' must be an array");
}

torch::ScalarType TrainConfig::scalar_type() const {
  return dtype == DType::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

RuntimeOptions TrainConfig::runtime() const { return options::subset_of<RuntimeOptions>(*this); }

models::Seq2SeqOptions TrainConfig::model_options(std::int64_t source_vocab, std::int64_t target_vocab) const {
  models::AttentionConfig a;
  switch (attention) {
    case AttentionChoice::kDot: a.score = models::ScoreKind::kDot; break;
    case AttentionChoice::kGeneral: a.score = models::ScoreKind::kGeneral; break;
    case AttentionChoice::kConcat: a.score = models::ScoreKind::kConcat; break;
    case AttentionChoice::kLocation: a.score = models::ScoreKind::kLocation; break;
    case AttentionChoice::kLocalMonotonic:
      a.kind = models::AttentionKind::kLocalMonotonic;
      a.score = score;
      break;
    case AttentionChoice::kLocalPredictive:
      a.kind = models::AttentionKind::kLocalPredictive;
      a.score = score;
      break;
  }
  a.scale = scale;
  a.window = window;
  a.renormalize = renormalize;
  a.positions = location_positions;
  return models::Seq2SeqOptions(source_vocab, target_vocab)
      .embed_size(embed)
      .hidden_size(hidden)
      .cell(cell)
      .layers(layers)
      .dropout(dropout)
      .bidirectional(bidirectional)
      .tie_embeddings(tie_embeddings)
      .fused(fused)
      .decoder(decoder)
      .attention(a);
}

Json TrainConfig::to_json() const {
  Json json = options::to_json(*this);
  if (!resumed.empty()) json["resumed"] = resumed;
  return json;
}

TrainConfig TrainConfig::from_json(const Json& json, const std::string& origin) {
  TrainConfig config;
  options::update_from_json(config, json, origin, {"resumed"});
  if (json.contains("resumed")) {
    config.resumed = json["resumed"];
    if (!config.resumed.is_array()) throw Error(origin + ": key 'resumed': expected an array");
  }
  return config;
}

TrainConfig TrainConfig::load(const std::string& path) { return from_json(read_json_file(path), printable(path)); }

void TrainConfig::save(const std::string& path) const {
  write_file_atomically(path, [&](std::ostream& out) { out << dump_json(to_json(), 2) << "\n"; });
}

}  // namespace luong::run
