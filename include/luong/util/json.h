#pragma once
// A small JSON value for config.json, trainer state and `luong evaluate`'s output line.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace luong {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;
  Json(bool v) : type_(Type::kBool), bool_(v) {}                        // NOLINT
  Json(double v) : type_(Type::kNumber), number_(v) {}                 // NOLINT
  Json(int v) : Json(static_cast<double>(v)) {}                         // NOLINT
  Json(std::int64_t v) : Json(static_cast<double>(v)) {}                // NOLINT
  Json(std::uint64_t v) : Json(static_cast<double>(v)) {}               // NOLINT
  Json(const char* v) : type_(Type::kString), string_(v) {}             // NOLINT
  Json(std::string v) : type_(Type::kString), string_(std::move(v)) {}  // NOLINT
  static Json array();
  static Json object();

  /// Throws luong::Error("<origin>: invalid JSON at offset N: ...") on malformed text.
  static Json parse(const std::string& text, const std::string& origin = "JSON");

  Type type() const { return type_; }
  bool is_object() const { return type_ == Type::kObject; }
  bool as_bool() const;
  double as_number() const;
  std::int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const { return array_; }
  /// Object members in insertion order.
  const std::vector<std::pair<std::string, Json>>& members() const { return object_; }

  bool contains(const std::string& key) const;
  /// Throws luong::Error when missing.
  const Json& at(const std::string& key) const;
  /// Inserts or replaces (objects only).
  Json& set(const std::string& key, Json value);
  Json& push_back(Json value);

  /// Compact (indent < 0) or pretty-printed text. Numbers use the shortest round-trip form.
  std::string dump(int indent = -1) const;

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace luong
