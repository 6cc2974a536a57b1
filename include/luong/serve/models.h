#pragma once
// The models a server holds: each run loaded once onto the device with its Translator, shared by
// every connection. A reload makes new ones beside the old and swaps them in; requests in flight keep
// the model they started with.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "luong/evaluation/translator.h"
#include "luong/run/run_directory.h"
#include "luong/util/json.h"

namespace luong::serve {

/// A run to serve: `name` (what requests ask for) and its directory.
struct ModelSpec {
  std::string name;
  std::string run_dir;
};

/// `NAME=RUN_DIR`, or RUN_DIR named by its last component.
ModelSpec parse_model_spec(const std::string& text);

/// One loaded model. Immutable once loaded; the Translator holds the model's address, so it stays put.
struct ServedModel {
  ServedModel(const ModelSpec& spec, const torch::Device& device, run::WeightsChoice weights);
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  ModelSpec spec;
  run::TrainedModel model;
  evaluation::Translator translator;
  std::string loaded_at;  ///< UTC, ISO 8601
  Json describe() const;  ///< what GET /models says of it
};

class ModelRegistry {
 public:
  ModelRegistry(std::vector<ModelSpec> specs, torch::Device device, run::WeightsChoice weights);

  /// Loads every model (the server answers 503 until then). Throws luong::Error naming the run.
  void load();
  bool loaded() const;
  /// The model `name` asks for ("" = the first), or null.
  std::shared_ptr<ServedModel> find(const std::string& name) const;
  /// The model at `index` of --model's order, or the first where there is none (OpenNMT-py's ids).
  std::shared_ptr<ServedModel> at(std::size_t index) const;
  std::vector<std::shared_ptr<ServedModel>> all() const;
  /// Loads each run's newest weights beside the current model and swaps it in; a run that fails to
  /// load keeps its current model. Returns {"reloaded": [names], "failed": {name: error}}.
  Json reload();

 private:
  std::vector<ModelSpec> specs_;
  torch::Device device_;
  run::WeightsChoice weights_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<ServedModel>> models_;
  std::mutex reloading_;  // one reload at a time
};

}  // namespace luong::serve
