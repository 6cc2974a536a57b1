#pragma once
// What evaluate, translate and trace share: --model and the runtime flags, and loading the run.
#include <cxxopts.hpp>

#include <iostream>
#include <string>

#include "luong/run/run_directory.h"
#include "luong/run/runtime_options.h"

namespace luong::cli {

/// Adds --model and the runtime flags.
void add_model_flags(cxxopts::Options& parser);

/// Applies the runtime flags and loads the run named by --model (required).
run::TrainedModel load_model_from_flags(const cxxopts::ParseResult& result);

/// Throws luong::Error("<what>: write error (...)") when `out` has failed (a full disk, a closed pipe).
void check_written(std::ostream& out, const std::string& what);

}  // namespace luong::cli
