#pragma once
// JSON for config.json, trainer state, manifests and `luong evaluate`'s output line: nlohmann-json's
// ordered_json (keys keep their order; integers stay exact 64-bit integers).
#include <nlohmann/json.hpp>

#include <string>

namespace luong {

using Json = nlohmann::ordered_json;

/// Parses `text`. Malformed text throws luong::Error("<origin>: invalid JSON (...)"), one line.
Json parse_json(const std::string& text, const std::string& origin);
/// Reads and parses a file; a missing or unreadable file is a luong::Error naming it.
Json read_json_file(const std::string& path);
/// Pretty-printed (indent >= 0) or compact text; NaN and infinities become null, invalid UTF-8 in
/// strings is replaced rather than thrown on.
std::string dump_json(const Json& json, int indent = -1);
/// "object", "number", ...: for messages.
std::string json_type_name(const Json& json);

}  // namespace luong
