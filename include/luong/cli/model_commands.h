#pragma once
// What evaluate, translate and trace share: --model and the runtime flags, and loading the run.
#include <cxxopts.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "luong/run/run_directory.h"
#include "luong/run/runtime_options.h"

namespace luong::cli {

/// Adds --model (one run, or several for an ensemble), --weights and the runtime flags.
void add_model_flags(cxxopts::Options& parser);

/// Applies the runtime flags and loads the runs named by --model (at least one).
std::vector<run::TrainedModel> load_models_from_flags(const cxxopts::ParseResult& result);

/// The models' addresses, as a Translator takes them.
std::vector<run::TrainedModel*> pointers(std::vector<run::TrainedModel>& models);

}  // namespace luong::cli
