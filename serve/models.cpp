#include "luong/serve/models.h"

#include <ctime>
#include <exception>
#include <filesystem>
#include <thread>

#include "luong/util/error.h"

namespace luong::serve {
namespace {

// Runs `work` on a thread that ends with it. LibTorch's OpenMP team belongs to the thread that first
// computed, and lives as long as that thread: libgomp keeps a waiting worker spinning only while its
// teams' threads number at most the cores, so a team left by a loading thread that computes no more
// made the searches' workers sleep and be woken at every parallel region (docs/SERVING.md has the
// cost). Loads run here, and only the batcher's team lasts.
template <typename Work>
void on_a_passing_thread(const Work& work) {
  std::exception_ptr failure;
  std::thread([&] {
    try {
      work();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  ::gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace

ModelSpec parse_model_spec(const std::string& text) {
  const std::size_t equals = text.find('=');
  if (equals != std::string::npos && equals > 0) return {text.substr(0, equals), text.substr(equals + 1)};
  std::filesystem::path dir(text);
  if (dir.filename().empty()) dir = dir.parent_path();
  return {dir.filename().string(), text};
}

ServedModel::ServedModel(const ModelSpec& model_spec, const torch::Device& device, run::WeightsChoice weights)
    : spec(model_spec), model(run::load_trained_model(spec.run_dir, device, weights)), translator(model), loaded_at(utc_now()) {}

Json ServedModel::describe() const {
  return {{"name", spec.name},
          {"run", spec.run_dir},
          {"weights", model.weights},
          {"loaded_at", loaded_at},
          {"device", model.device.str()},
          {"tokenizer", options::enum_name(model.config.tokenizer)},
          {"source_vocabulary", model.source_vocab->size()},
          {"target_vocabulary", model.target_vocab->size()}};
}

ModelRegistry::ModelRegistry(std::vector<ModelSpec> specs, torch::Device device, run::WeightsChoice weights)
    : specs_(std::move(specs)), device_(device), weights_(weights) {
  if (specs_.empty()) throw Error("--model RUN_DIR is required");
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (specs_[i].name == specs_[j].name) {
        throw Error("two models are named '" + printable(specs_[i].name) + "' (name them: --model NAME=RUN_DIR)");
      }
    }
  }
}

void ModelRegistry::load() {
  std::vector<std::shared_ptr<ServedModel>> loaded;
  on_a_passing_thread([&] {
    for (const ModelSpec& spec : specs_) loaded.push_back(std::make_shared<ServedModel>(spec, device_, weights_));
  });
  std::lock_guard<std::mutex> lock(mutex_);
  models_ = std::move(loaded);
}

bool ModelRegistry::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !models_.empty();
}

std::shared_ptr<ServedModel> ModelRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (models_.empty()) return nullptr;
  if (name.empty()) return models_.front();
  for (const auto& model : models_) {
    if (model->spec.name == name) return model;
  }
  return nullptr;
}

std::shared_ptr<ServedModel> ModelRegistry::at(std::size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (models_.empty()) return nullptr;
  return index < models_.size() ? models_[index] : models_.front();
}

std::vector<std::shared_ptr<ServedModel>> ModelRegistry::all() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return models_;
}

Json ModelRegistry::reload() {
  std::lock_guard<std::mutex> one_at_a_time(reloading_);
  Json reloaded = Json::array(), failed = Json::object();
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    try {
      std::shared_ptr<ServedModel> fresh;
      on_a_passing_thread([&] { fresh = std::make_shared<ServedModel>(specs_[i], device_, weights_); });
      std::lock_guard<std::mutex> lock(mutex_);
      models_.at(i) = std::move(fresh);
      reloaded.push_back(specs_[i].name);
    } catch (const std::exception& e) {
      failed[specs_[i].name] = std::string(e.what()).substr(0, 2000);
    }
  }
  return {{"reloaded", reloaded}, {"failed", failed}};
}

}  // namespace luong::serve
