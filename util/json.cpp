#include "luong/util/json.h"

#include <fstream>
#include <sstream>

#include "luong/util/error.h"

namespace luong {

Json parse_json(const std::string& text, const std::string& origin) {
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

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(printable(path) + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(printable(path) + ": cannot read");
  return parse_json(text.str(), printable(path));
}

std::string dump_json(const Json& json, int indent) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::string json_type_name(const Json& json) { return json.type_name(); }

}  // namespace luong
