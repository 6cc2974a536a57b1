#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>

#include "luong/cli/option_flags.h"
#include "luong/util/error.h"

namespace luong::cli {
namespace {

// cxxopts says "Argument ‘2’ failed to parse" without the flag: find the flag that was given that
// value ("--flag=2" or "--flag 2") and name it.
std::string with_the_flag(const cxxopts::exceptions::incorrect_argument_type& e, int argc, char** argv) {
  const std::string what = e.what(), open = "\u2018", close = "\u2019";
  const std::size_t start = what.find(open), end = what.rfind(close);
  if (start == std::string::npos || end == std::string::npos || end < start) return what;
  const std::string value = what.substr(start + open.size(), end - start - open.size());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t equals = arg.find('=');
    if (arg.rfind("--", 0) == 0 && equals != std::string::npos && arg.substr(equals + 1) == value) {
      return arg.substr(0, equals) + ": '" + value + "' is not a valid value";
    }
    if (arg == value && i > 1 && std::string(argv[i - 1]).rfind("-", 0) == 0) {
      return std::string(argv[i - 1]) + ": '" + value + "' is not a valid value";
    }
  }
  return what;
}

}  // namespace

bool parse_or_help(cxxopts::Options& options, int argc, char** argv, cxxopts::ParseResult& result) {
  options.add_options("help")("h,help", "show this help");
  const std::string command = argc > 0 ? argv[0] : "";
  try {
    result = options.parse(argc, argv);
    const std::vector<std::string> extra = result.unmatched();
    if (!extra.empty()) throw Error("unexpected argument '" + printable(extra.front()) + "'");
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    throw Error(printable(with_the_flag(e, argc, argv), 300) + " (see 'luong " + command + " --help')");
  } catch (const cxxopts::exceptions::exception& e) {
    throw Error(printable(e.what(), 300) + " (see 'luong " + command + " --help')");
  }
  if (result.count("help")) {
    std::cout << options.help() << std::endl;
    return false;
  }
  return true;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string describe_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& e) {
    return first_line(e.what());
  } catch (...) {
    return "unknown error";
  }
}

int report_failure(const char* command, const std::string& what) {
  std::cerr << "luong " << command << ": " << printable(what, 2000) << std::endl;
  return 2;
}

void check_written(std::ostream& out, const std::string& what) {
  out.flush();
  if (!out) throw Error(what + ": write error (" + std::strerror(errno != 0 ? errno : EIO) + ")");
}

}  // namespace luong::cli
