#include "luong/training/trainer_state.h"

#include <cmath>
#include <limits>

#include "luong/util/error.h"

namespace luong::training {
namespace {

Json number_or_null(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

// The schema of state.json, one field at a time.
class StateReader {
 public:
  StateReader(const Json& json, std::string origin) : json_(json), origin_(std::move(origin)) {
    if (!json_.is_object()) fail("", "must be a JSON object");
  }
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw CheckpointError(origin_ + ": " + (field.empty() ? "" : "'" + field + "' ") + why);
  }
  const Json& field(const Json& object, const std::string& name, const std::string& path) const {
    if (!object.contains(name)) fail(path + name, "is missing");
    return object[name];
  }
  std::int64_t integer(const Json& object, const std::string& name, std::int64_t min, std::int64_t max,
                       const std::string& path = "") const {
    const Json& v = field(object, name, path);
    if (!v.is_number_integer()) fail(path + name, "must be an integer, not " + printable(dump_json(v)));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      fail(path + name, printable(dump_json(v)) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    const auto value = v.get<std::int64_t>();
    if (value < min || value > max) {
      fail(path + name, std::to_string(value) + " is outside [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return value;
  }
  /// A number >= min (null reads as NaN where `nullable`).
  double number(const Json& object, const std::string& name, double min, bool nullable, const std::string& path = "") const {
    const Json& v = field(object, name, path);
    if (nullable && v.is_null()) return NAN;
    if (!v.is_number()) fail(path + name, "must be a number, not " + printable(dump_json(v)));
    const double value = v.get<double>();
    if (!std::isfinite(value) || value < min) fail(path + name, printable(dump_json(v)) + " is out of range");
    return value;
  }
  const Json& json() const { return json_; }

 private:
  const Json& json_;
  std::string origin_;
};

}  // namespace

Json TrainerState::to_json() const {
  Json rows = Json::array();
  for (const auto& r : history) {
    rows.push_back({{"epoch", r.epoch},
                    {"train_loss", number_or_null(r.train_loss)},
                    {"dev_loss", number_or_null(r.dev_loss)},
                    {"dev_bleu", number_or_null(r.dev_bleu)},
                    {"tokens_per_second", number_or_null(r.tokens_per_second)},
                    {"seconds", number_or_null(r.seconds)}});
  }
  Json out = {{"epoch", epoch},
          {"batches_done", batches_done},
          {"partial_loss", partial_loss},
          {"partial_weight", partial_weight},
          {"partial_tokens", partial_tokens},
          {"best_bleu", best_bleu},
          {"bad_epochs", bad_epochs},
          {"optimizer_steps", optimizer_steps},
          {"lr_scale", lr_scale},
          {"best_dev_loss", best_dev_loss},
          {"plateau_epochs", plateau_epochs},
          {"history", rows}};
  if (!data.empty()) out["data"] = data;
  return out;
}

TrainerState TrainerState::from_json(const Json& json, const std::string& origin, std::int64_t max_epochs) {
  const StateReader in(json, origin);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  TrainerState s;
  s.epoch = in.integer(json, "epoch", 0, max_epochs);
  s.batches_done = in.integer(json, "batches_done", 0, kMax);
  s.partial_loss = in.number(json, "partial_loss", 0, false);
  s.partial_weight = in.number(json, "partial_weight", 0, false);
  s.partial_tokens = in.integer(json, "partial_tokens", 0, kMax);
  s.best_bleu = in.number(json, "best_bleu", -1, false);
  s.bad_epochs = in.integer(json, "bad_epochs", 0, s.epoch);
  s.optimizer_steps = in.integer(json, "optimizer_steps", 0, kMax);
  s.lr_scale = in.number(json, "lr_scale", 0, false);
  if (s.lr_scale <= 0 || s.lr_scale > 1) in.fail("lr_scale", std::to_string(s.lr_scale) + " is outside (0, 1]");
  s.best_dev_loss = in.number(json, "best_dev_loss", -1, false);
  s.plateau_epochs = in.integer(json, "plateau_epochs", 0, s.epoch);
  const Json& history = in.field(json, "history", "");
  if (!history.is_array()) in.fail("history", "must be a list of epoch records");
  if (static_cast<std::int64_t>(history.size()) != s.epoch) {
    in.fail("history", "has " + std::to_string(history.size()) + " records for " + std::to_string(s.epoch) + " epochs");
  }
  for (std::size_t i = 0; i < history.size(); ++i) {
    const Json& row = history[i];
    const std::string path = "history[" + std::to_string(i) + "].";
    if (!row.is_object()) in.fail(path.substr(0, path.size() - 1), "must be an object");
    EpochRecord r;
    r.epoch = in.integer(row, "epoch", static_cast<std::int64_t>(i) + 1, static_cast<std::int64_t>(i) + 1, path);
    r.train_loss = in.number(row, "train_loss", 0, true, path);
    r.dev_loss = in.number(row, "dev_loss", 0, true, path);
    r.dev_bleu = in.number(row, "dev_bleu", 0, true, path);
    r.tokens_per_second = in.number(row, "tokens_per_second", 0, true, path);
    r.seconds = in.number(row, "seconds", 0, true, path);
    s.history.push_back(r);
  }
  if (json.contains("data")) {
    if (!json["data"].is_object()) in.fail("data", "must be an object");
    s.data = json["data"];
  }
  return s;
}

void TrainerState::check_batches(std::int64_t batches, const std::string& origin) const {
  if (batches_done < 0 || batches_done >= std::max<std::int64_t>(batches, 1)) {
    throw CheckpointError(origin + ": 'batches_done' " + std::to_string(batches_done) + " is outside [0, " +
                          std::to_string(batches - 1) + "] (an epoch has " + std::to_string(batches) + " batches)");
  }
}

}  // namespace luong::training
