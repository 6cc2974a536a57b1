#pragma once
// Options declared once. A configuration struct lists its options in one X-macro table, each as
//   X(type, name, default, flag, group, help, range, on_resume)
// and the table alone gives the struct's members (LUONG_OPTION_MEMBER), and through visit() its
// config.json reading and writing, its range checks, its command-line flags with their help and
// defaults (cli/option_flags.h) and what --resume may change. Types: bool, std::int64_t, double,
// std::string, and enums with EnumNames (stored as their names).
//
// `flag` is the command-line spelling without "--" ("" for none); a leading '!' marks a flag that
// turns a default-true bool off ("!no-shuffle" for `shuffle`).
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "luong/util/error.h"
#include "luong/util/json.h"

namespace luong::options {

enum class OnResume {
  kFixed,      ///< changes the data, model or batch order: --resume refuses a different value
  kMayChange,  ///< --resume may change it; the change is recorded in config.json
};

/// Valid values of a number: [min, max], either end open where said.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;
  bool contains(double value) const {
    return !std::isnan(value) && (min_open ? value > min : value >= min) && (max_open ? value < max : value <= max);
  }
  std::string describe() const;
};
inline constexpr Range kAnyValue{};
/// [min, max]
constexpr Range closed(double min, double max) { return {min, max, false, false}; }
/// [min, max)
constexpr Range right_open(double min, double max) { return {min, max, false, true}; }
/// (min, max]
constexpr Range left_open(double min, double max) { return {min, max, true, false}; }

/// What the table says of one option.
struct Info {
  const char* key;    ///< config.json key, snake_case
  const char* flag;   ///< command-line flag without "--" (a leading '!' stripped), "" for none
  bool negated;       ///< the flag sets the bool to false
  const char* group;  ///< --help group
  const char* help;
  Range range;
  OnResume on_resume;
};
constexpr Info make_info(const char* key, const char* flag, const char* group, const char* help, Range range,
                         OnResume on_resume) {
  const bool negated = flag[0] == '!';
  return {key, negated ? flag + 1 : flag, negated, group, help, range, on_resume};
}

/// Specialise for each enum used in a table: a static `values` array of {value, name} pairs.
template <typename Enum>
struct EnumNames;

template <typename Enum>
const char* enum_name(Enum value) {
  for (const auto& [v, name] : EnumNames<Enum>::values) {
    if (v == value) return name;
  }
  return "?";
}

/// "a, b or c"
template <typename Enum>
std::string enum_choices() {
  std::string out;
  const auto& values = EnumNames<Enum>::values;
  const std::size_t count = std::size(values);
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += values[i].second;
  }
  return out;
}

/// Throws luong::Error("'<text>' is not one of a, b or c") for an unknown name.
template <typename Enum>
Enum parse_enum(const std::string& text) {
  for (const auto& [v, name] : EnumNames<Enum>::values) {
    if (text == name) return v;
  }
  throw Error("'" + printable(text) + "' is not one of " + enum_choices<Enum>());
}

/// `text` as a number of type T, parsed whole: an optional sign and decimal digits, for a floating-point
/// T also a fraction and a decimal exponent. Anything else (a unit after it, a second number,
/// hexadecimal, inf, nan, an integer out of T's range) throws luong::Error("'<text>' is not ...").
template <typename T>
T parse_number(const std::string& text) {
  const char* begin = text.data();
  const char* const end = text.data() + text.size();
  if (begin != end && *begin == '+' && end - begin > 1 && begin[1] != '-') ++begin;
  T value{};
  const std::from_chars_result parsed = [&] {
    if constexpr (std::is_floating_point_v<T>) {
      // chars_format::general takes no hexadecimal; inf and nan are refused below
      return std::from_chars(begin, end, value, std::chars_format::general);
    } else {
      return std::from_chars(begin, end, value, 10);
    }
  }();
  const char* kind = std::is_floating_point_v<T> ? "a number" : "an integer";
  if (parsed.ec == std::errc::result_out_of_range) throw Error("'" + printable(text) + "' is out of range");
  if (parsed.ec != std::errc() || parsed.ptr != end || begin == end) {
    throw Error("'" + printable(text) + "' is not " + kind);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) throw Error("'" + printable(text) + "' is not a finite number");
  }
  return value;
}

template <typename T, typename = void>
struct IsEnumOption : std::false_type {};
template <typename T>
struct IsEnumOption<T, std::void_t<decltype(EnumNames<T>::values)>> : std::true_type {};

// ---- one value ----------------------------------------------------------------------------------

template <typename T>
Json value_to_json(const T& value) {
  if constexpr (IsEnumOption<T>::value) {
    return enum_name(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isfinite(value) ? Json(value) : Json(nullptr);
  } else {
    return value;
  }
}

/// Reads one value, checking its JSON type and the range; throws luong::Error with the reason.
template <typename T>
T value_from_json(const Json& json, const Range& range) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!json.is_boolean()) throw Error("expected true or false, not " + json_type_name(json));
    return json.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!json.is_string()) throw Error("expected a string, not " + json_type_name(json));
    return json.get<std::string>();
  } else if constexpr (IsEnumOption<T>::value) {
    if (!json.is_string()) throw Error("expected one of " + enum_choices<T>() + ", not " + json_type_name(json));
    return parse_enum<T>(json.get<std::string>());
  } else if constexpr (std::is_integral_v<T>) {
    if (!json.is_number_integer()) throw Error("expected an integer, not " + printable(dump_json(json)));
    if (json.is_number_unsigned() && json.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      throw Error(printable(dump_json(json)) + " is outside " + range.describe());
    }
    const T value = json.get<T>();
    if (!range.contains(static_cast<double>(value))) throw Error(std::to_string(value) + " is outside " + range.describe());
    return value;
  } else {
    if (!json.is_number()) throw Error("expected a number, not " + json_type_name(json));
    const T value = json.get<T>();
    if (!range.contains(value)) throw Error(printable(dump_json(json)) + " is outside " + range.describe());
    return value;
  }
}

/// A value as --help and messages show it.
template <typename T>
std::string value_text(const T& value) {
  if constexpr (IsEnumOption<T>::value) {
    return enum_name(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_floating_point_v<T>) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, static_cast<double>(value)).ptr;
    return std::string(text, end);
  } else {
    return std::to_string(value);
  }
}

// ---- a whole table --------------------------------------------------------------------------------
// Config has `template <typename Self, typename Visitor> static void visit(Self&, Visitor&&)`,
// which calls visitor(const Info&, member&) for every option in table order.

template <typename Config>
Json to_json(const Config& config) {
  Json json = Json::object();
  Config::visit(config, [&](const Info& info, const auto& value) { json[info.key] = value_to_json(value); });
  return json;
}

/// Sets the options `json` names (others keep their values). An unknown key, a wrong type or a value
/// out of range throws luong::Error("<origin>: key '<key>': <why>"). Keys in `extra_keys` are skipped.
template <typename Config>
void update_from_json(Config& config, const Json& json, const std::string& origin,
                      const std::vector<std::string>& extra_keys = {}) {
  if (!json.is_object()) throw Error(origin + ": expected a JSON object, not " + json_type_name(json));
  for (const auto& item : json.items()) {
    // (not a structured binding: C++17 lambdas cannot capture those)
    const std::string& key = item.key();
    const Json& value = item.value();
    bool known = false;
    for (const auto& extra : extra_keys) known = known || key == extra;
    Config::visit(config, [&](const Info& info, auto& member) {
      if (key != info.key) return;
      known = true;
      try {
        member = value_from_json<std::decay_t<decltype(member)>>(value, info.range);
      } catch (const Error& e) {
        throw Error(origin + ": key '" + info.key + "': " + e.what());
      }
    });
    if (!known) throw Error(origin + ": unknown key '" + printable(key) + "'");
  }
}

/// Copies every option of `from` to the option of `to` with the same key and type; returns how many.
template <typename From, typename To>
std::size_t copy_by_key(const From& from, To& to) {
  std::size_t copied = 0;
  To::visit(to, [&](const Info& target, auto& member) {
    From::visit(from, [&](const Info& source, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(member)>, std::decay_t<decltype(value)>>) {
        if (std::strcmp(target.key, source.key) == 0) {
          member = value;
          ++copied;
        }
      }
    });
  });
  return copied;
}

template <typename Config>
std::size_t option_count() {
  std::size_t count = 0;
  const Config config{};
  Config::visit(config, [&](const Info&, const auto&) { ++count; });
  return count;
}

/// The options of a subset table (a command's runtime options, say) as a larger table holds them.
/// Every option of `Subset` must be `Whole`'s too, by key and type.
template <typename Subset, typename Whole>
Subset subset_of(const Whole& whole) {
  Subset part;
  if (copy_by_key(whole, part) != option_count<Subset>()) throw std::logic_error("subset_of: a table is not a subset");
  return part;
}

/// Sets `whole`'s options to those of the subset `part` (the reverse of subset_of).
template <typename Whole, typename Subset>
void assign_subset(Whole& whole, const Subset& part) {
  if (copy_by_key(part, whole) != option_count<Subset>()) throw std::logic_error("assign_subset: a table is not a subset");
}

/// Throws luong::Error("<name of the option>: <value> is outside <range>") for the first number
/// out of its range; `name` maps an option to how the user wrote it (a flag or a key).
template <typename Config, typename Name>
void check_ranges(const Config& config, const Name& name) {
  Config::visit(config, [&](const Info& info, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (!info.range.contains(static_cast<double>(value))) {
        throw Error(name(info) + ": " + value_text(value) + " is outside " + info.range.describe());
      }
    }
  });
}

/// A change between two configurations. `info` points at the table's own (static) row.
struct Change {
  const Info* info;
  std::string from, to;
};

/// The options whose values differ between `a` and `b`, in table order.
template <typename Config>
std::vector<Change> differences(const Config& a, const Config& b) {
  std::vector<std::string> before;
  Config::visit(a, [&](const Info&, const auto& value) { before.push_back(value_text(value)); });
  std::vector<Change> out;
  std::size_t i = 0;
  Config::visit(b, [&](const Info& info, const auto& value) {
    std::string after = value_text(value);
    if (after != before[i]) out.push_back({&info, before[i], std::move(after)});
    ++i;
  });
  return out;
}

}  // namespace luong::options

/// The member declaration of one table row.
#define LUONG_OPTION_MEMBER(type, name, default_value, flag, group, help, range, on_resume) \
  type name = default_value;
/// The visit() call of one table row.
#define LUONG_OPTION_VISIT(type, name, default_value, flag, group, help, range, on_resume)                     \
  {                                                                                                        \
    static constexpr ::luong::options::Info info_##name =                                                 \
        ::luong::options::make_info(#name, flag, group, help, range, ::luong::options::OnResume::on_resume); \
    visitor(info_##name, self.name);                                                                       \
  }
/// Declares a table's members and its visit().
#define LUONG_OPTIONS_STRUCT_BODY(TABLE)                     \
  TABLE(LUONG_OPTION_MEMBER)                                 \
  template <typename Self, typename Visitor>                 \
  static void visit(Self& self, Visitor&& visitor) {         \
    TABLE(LUONG_OPTION_VISIT)                                \
  }
