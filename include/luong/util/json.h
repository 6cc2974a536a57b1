#pragma once
// JSON for config.json, trainer state, manifests and `luong evaluate`'s output line: nlohmann-json's
// ordered_json (keys keep their order; integers stay exact 64-bit integers).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace luong {

using Json = nlohmann::ordered_json;

/// No file luong reads nests its values deeper than this; deeper text is refused before it is parsed
/// (nlohmann's parser and its values' destructors recurse once a level: 100,000 levels overflow the stack).
inline constexpr int kMaxJsonDepth = 64;
/// The largest JSON file luong reads by default (config.json, manifest.json).
inline constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{1} << 20;

/// Parses `text`. Malformed or too deeply nested text throws luong::Error("<origin>: invalid JSON
/// (...)"), one line.
Json parse_json(const std::string& text, const std::string& origin);
/// Reads (at most `max_bytes`: read_text_file) and parses a regular file; a missing, unreadable,
/// oversized or malformed file is a luong::Error naming it.
Json read_json_file(const std::string& path, std::uint64_t max_bytes = kMaxJsonFileBytes);
/// Pretty-printed (indent >= 0) or compact text; NaN and infinities become null, invalid UTF-8 in
/// strings is replaced rather than thrown on.
std::string dump_json(const Json& json, int indent = -1);
/// "object", "number", ...: for messages.
std::string json_type_name(const Json& json);

}  // namespace luong
