#pragma once
// The command line as a thin layer over the option tables (luong/util/options.h): every table row
// with a flag becomes a cxxopts option in its group, with its help, choices, range and default, and
// the flags given on the command line are written back into the struct, checked.
#include <cxxopts.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "luong/util/error.h"
#include "luong/util/options.h"

namespace luong::cli {

/// Adds a flag for every option of `defaults`' table that has one; --help shows `defaults`' values.
template <typename Config>
void add_flags(cxxopts::Options& parser, const Config& defaults) {
  Config::visit(defaults, [&](const options::Info& info, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if (info.flag[0] == '\0') return;
    auto add = parser.add_options(info.group);
    const std::string range = info.range.contains(-1e300) && info.range.contains(1e300) ? "" : " " + info.range.describe();
    if constexpr (std::is_same_v<T, bool>) {
      add(info.flag, info.help);
    } else if constexpr (options::IsEnumOption<T>::value) {
      add(info.flag, std::string(info.help) + ": " + options::enum_choices<T>(),
          cxxopts::value<std::string>()->default_value(options::enum_name(value)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (value.empty()) {
        add(info.flag, info.help, cxxopts::value<std::string>());
      } else {
        add(info.flag, info.help, cxxopts::value<std::string>()->default_value(value));
      }
    } else {
      // Numbers are read as text and parsed whole here (cxxopts would take "2e-3x" as 2e-3).
      add(info.flag, info.help + range, cxxopts::value<std::string>()->default_value(options::value_text(value)));
    }
  });
}

/// Whether the bool flag `name` was given and not given as false (`--resume=false`).
inline bool flag_given(const cxxopts::ParseResult& result, const std::string& name) {
  return result.count(name) > 0 && result[name].as<bool>();
}

/// The config.json keys of the options of `config`'s table that `result` gave a flag for.
template <typename Config>
std::vector<std::string> given_keys(const cxxopts::ParseResult& result, const Config& config) {
  std::vector<std::string> keys;
  Config::visit(config, [&](const options::Info& info, const auto&) {
    if (info.flag[0] != '\0' && result.count(info.flag) > 0) keys.push_back(info.key);
  });
  return keys;
}

/// Writes every flag given in `result` into `config`, checking enum names and ranges; throws
/// luong::Error("--<flag> <value> is outside [a, b]") and the like. Returns how many were given.
template <typename Config>
int apply_flags(const cxxopts::ParseResult& result, Config& config) {
  int given = 0;
  Config::visit(config, [&](const options::Info& info, auto& member) {
    using T = std::decay_t<decltype(member)>;
    if (info.flag[0] == '\0' || result.count(info.flag) == 0) return;
    ++given;
    const std::string flag = std::string("--") + info.flag;
    if constexpr (std::is_same_v<T, bool>) {
      member = result[info.flag].as<bool>() != info.negated;  // --reverse=false, --no-shuffle=false
    } else if constexpr (options::IsEnumOption<T>::value) {
      try {
        member = options::parse_enum<T>(result[info.flag].as<std::string>());
      } catch (const Error& e) {
        throw Error(flag + ": " + e.what());
      }
    } else if constexpr (std::is_same_v<T, std::string>) {
      member = result[info.flag].as<std::string>();
    } else {
      const std::string text = result[info.flag].as<std::string>();
      T value{};
      try {
        value = options::parse_number<T>(text);
      } catch (const Error& e) {
        throw Error(flag + ": " + e.what());
      }
      if (!info.range.contains(static_cast<double>(value))) {
        throw Error(flag + " " + options::value_text(value) + " is outside " + info.range.describe());
      }
      member = value;
    }
  });
  return given;
}

/// Parses argv; `--help` prints the help and returns false. Unknown options, stray arguments and
/// values that do not parse throw luong::Error naming the option.
bool parse_or_help(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result);

/// The current exception (call from a catch block) as one line: luong::Error's message, "out of
/// memory", or the first line of any other exception's what().
std::string describe_current_exception();
std::string first_line(const std::string& text);

/// Prints `luong <command>: <what>` on one line, control characters escaped; returns 2, the exit
/// status of bad input.
int report_failure(const char* command, const std::string& what);

/// Flushes `out` and throws luong::Error("<what>: write error (...)") when it has failed (a full disk,
/// a closed pipe). The commands check stdout where a failure should stop them early; main checks it
/// once more at the end for everything else.
void check_written(std::ostream& out, const std::string& what);

}  // namespace luong::cli
