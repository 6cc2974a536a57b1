#include "luong/cli/options.h"

#include <iostream>

#include "luong/util/error.h"

// cxxopts 3 (Debian 12) renamed the exception base of cxxopts 2 (Ubuntu 22.04, CUDA images).
#if CXXOPTS__VERSION_MAJOR >= 3
#define LUONG_CXXOPTS_EXCEPTION cxxopts::exceptions::exception
#else
#define LUONG_CXXOPTS_EXCEPTION cxxopts::OptionException
#endif

namespace luong::cli {

bool parse_or_help(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result) {
  options.add_options("help")("h,help", "show this help");
  const std::string command = argc > 0 ? argv[0] : "";
  try {
#if CXXOPTS__VERSION_MAJOR >= 3
    result = options.parse(argc, argv);
    const std::vector<std::string> extra = result.unmatched();
#else
    // cxxopts 2 removes what it parsed from argc/argv and leaves the rest.
    result = options.parse(argc, argv);
    const std::vector<std::string> extra(argv + 1, argv + argc);
#endif
    if (!extra.empty()) throw Error("unexpected argument '" + extra.front() + "'");
  } catch (const LUONG_CXXOPTS_EXCEPTION& e) {
    throw Error(std::string(e.what()) + " (see 'luong " + command + " --help')");
  }
  if (result.count("help")) {
    std::cout << options.help() << std::endl;
    return false;
  }
  return true;
}

}  // namespace luong::cli
