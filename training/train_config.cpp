#include "luong/training/train_config.h"

#include <algorithm>
#include <fstream>
#include <type_traits>
#include <functional>
#include <sstream>

#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong::training {
namespace {

// One table drives to_json and from_json so the two can never disagree.
struct Field {
  const char* name;
  std::function<Json(const TrainConfig&)> get;
  std::function<void(TrainConfig&, const Json&)> set;
};

template <typename T>
Field field(const char* name, T TrainConfig::*member) {
  return {name, [member](const TrainConfig& c) { return Json(c.*member); },
          [member](TrainConfig& c, const Json& j) {
            if constexpr (std::is_same_v<T, bool>) {
              c.*member = j.as_bool();
            } else if constexpr (std::is_same_v<T, std::string>) {
              c.*member = j.as_string();
            } else if constexpr (std::is_floating_point_v<T>) {
              c.*member = j.as_number();
            } else {
              if (j.as_int() < 0 && std::is_unsigned_v<T>) throw Error(std::string(" must not be negative"));
              c.*member = static_cast<T>(j.as_int());
            }
          }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      field("data", &TrainConfig::data),           field("format", &TrainConfig::format),
      field("reverse", &TrainConfig::reverse),     field("max_len", &TrainConfig::max_len),
      field("train_size", &TrainConfig::train_size), field("test_size", &TrainConfig::test_size),
      field("dev_size", &TrainConfig::dev_size),   field("deduplicate", &TrainConfig::deduplicate),
      field("tokenizer", &TrainConfig::tokenizer), field("spm_vocab", &TrainConfig::spm_vocab),
      field("spm_type", &TrainConfig::spm_type),   field("min_frequency", &TrainConfig::min_frequency),
      field("max_vocab", &TrainConfig::max_vocab), field("attention", &TrainConfig::attention),
      field("score", &TrainConfig::score),         field("window", &TrainConfig::window),
      field("renormalize", &TrainConfig::renormalize), field("scale", &TrainConfig::scale),
      field("decoder", &TrainConfig::decoder),     field("hidden", &TrainConfig::hidden),
      field("embed", &TrainConfig::embed),         field("layers", &TrainConfig::layers),
      field("dropout", &TrainConfig::dropout),     field("bidirectional", &TrainConfig::bidirectional),
      field("batch", &TrainConfig::batch),         field("batch_by_tokens", &TrainConfig::batch_by_tokens),
      field("bucket", &TrainConfig::bucket),       field("shuffle", &TrainConfig::shuffle),
      field("epochs", &TrainConfig::epochs),       field("lr", &TrainConfig::lr),
      field("clip", &TrainConfig::clip),           field("loss_average", &TrainConfig::loss_average),
      field("patience", &TrainConfig::patience),   field("device", &TrainConfig::device),
      field("threads", &TrainConfig::threads),     field("seed", &TrainConfig::seed),
      field("out", &TrainConfig::out),             field("dtype", &TrainConfig::dtype),
      field("fused", &TrainConfig::fused),
  };
  return table;
}

}  // namespace

void TrainConfig::validate() const {
  if (data.empty()) throw Error("no corpus: give --data FILE|DIR or --data builtin:numbers");
  if (format != "tsv" && format != "opus") throw Error("format must be tsv or opus, not '" + format + "'");
  if (tokenizer != "word" && tokenizer != "spm") throw Error("tokenizer must be word or spm, not '" + tokenizer + "'");
  if (decoder != "luong" && decoder != "bahdanau") throw Error("decoder must be luong or bahdanau, not '" + decoder + "'");
  if (loss_average != "token" && loss_average != "step") throw Error("loss average must be token or step");
  models::parse_attention_kind(attention);
  if (!score.empty()) models::parse_score_kind(score);
  if (max_len < 1) throw Error("max_len must be at least 1");
  if (train_size < 1) throw Error("train_size must be at least 1");
  if (hidden < 1 || embed < 1 || layers < 1) throw Error("hidden, embed and layers must be positive");
  if (dropout < 0 || dropout >= 1) throw Error("dropout must be in [0, 1)");
  if (batch < 1) throw Error("batch must be at least 1");
  if (epochs < 0) throw Error("epochs must be >= 0");
  if (!(lr > 0)) throw Error("lr must be positive");
  if (clip < 0) throw Error("clip must be >= 0 (0 turns clipping off)");
  if (spm_vocab < 8) throw Error("spm_vocab must be at least 8");
  if (window < 0) throw Error("window must be >= 0");
  if (attention == "local-p" && window < 1) throw Error("local-p needs --window >= 1");
  if (dtype != "float32" && dtype != "float64") throw Error("dtype must be float32 or float64, not '" + dtype + "'");
  if (patience < 0) throw Error("patience must be >= 0");
  if (patience > 0 && dev_size == 0) throw Error("--patience needs a dev split (--dev-size > 0)");
}

torch::ScalarType TrainConfig::scalar_type() const {
  return dtype == "float64" ? torch::kFloat64 : torch::kFloat32;
}

models::Seq2SeqOptions TrainConfig::model_options(std::int64_t source_vocab, std::int64_t target_vocab) const {
  models::AttentionConfig a;
  a.kind = models::parse_attention_kind(attention);
  if (!score.empty()) {
    a.score = models::parse_score_kind(score);
  } else if (attention == "general" || attention == "concat") {
    a.score = models::parse_score_kind(attention);
  }
  a.scale = scale;
  a.window = window;
  a.renormalize = renormalize;
  return models::Seq2SeqOptions(source_vocab, target_vocab)
      .embed_size(embed)
      .hidden_size(hidden)
      .layers(layers)
      .dropout(dropout)
      .bidirectional(bidirectional)
      .fused(fused)
      .decoder(models::parse_decoder_kind(decoder))
      .attention(a);
}

Json TrainConfig::to_json() const {
  Json json = Json::object();
  for (const auto& f : fields()) json.set(f.name, f.get(*this));
  return json;
}

TrainConfig TrainConfig::from_json(const Json& json, const std::string& origin) {
  if (!json.is_object()) throw Error(origin + ": a configuration must be a JSON object");
  TrainConfig config;
  for (const auto& [key, value] : json.members()) {
    const auto it = std::find_if(fields().begin(), fields().end(), [&](const Field& f) { return key == f.name; });
    if (it == fields().end()) throw Error(origin + ": unknown configuration key '" + key + "'");
    try {
      it->set(config, value);
    } catch (const Error& e) {
      throw Error(origin + ": key '" + key + "': " + e.what());
    }
  }
  return config;
}

TrainConfig TrainConfig::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open configuration");
  std::stringstream text;
  text << in.rdbuf();
  return from_json(Json::parse(text.str(), path), path);
}

void TrainConfig::save(const std::string& path) const {
  write_file_atomically(path, [&](std::ostream& out) { out << to_json().dump(2) << "\n"; });
}

}  // namespace luong::training
