#pragma once
// Helpers shared by the subcommands' cxxopts parsers.
#include <cxxopts.hpp>

#include <string>

namespace luong::cli {

/// Parses argv; `--help` prints the help and returns false. Unknown options and bad values throw
/// luong::Error naming the option.
bool parse_or_help(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result);

/// Adds --threads and --device to a group; apply them with setup_runtime().
void add_runtime_options(cxxopts::Options& options);
/// Configures thread pools from --threads and returns the device from --device (cuda is checked).
std::string setup_runtime(const cxxopts::ParseResult& result);

}  // namespace luong::cli
