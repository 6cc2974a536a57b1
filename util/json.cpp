#include "luong/util/json.h"

#include <algorithm>
#include <optional>

#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong {

namespace {

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops counting
// past `limit`.
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Json parse_json(const std::string& text, const std::string& origin) {
  if (nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    throw Error(origin + ": invalid JSON (nested deeper than " + std::to_string(kMaxJsonDepth) + " levels)");
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number no double holds (1E39861159).
    std::string what = e.what();
    const std::size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    throw Error(origin + ": invalid JSON (" + printable(what, 160) + ")");
  }
}

Json read_json_file(const std::string& path, std::uint64_t max_bytes) {
  const std::optional<std::string> text = read_text_file(path, max_bytes, "a luong JSON file");
  if (!text) throw Error(printable(path) + ": cannot open (no such file)");
  return parse_json(*text, printable(path));
}

std::string dump_json(const Json& json, int indent) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::string json_type_name(const Json& json) { return json.type_name(); }

}  // namespace luong
