#include "luong/serve/api.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "luong/util/error.h"
#include "luong/util/options.h"

namespace luong::serve {
namespace {

// The request keys that are not search options, and the search options a request may not set.
const std::vector<std::string> kRequestKeys = {"src", "model", "alignment", "scores"};
constexpr std::int64_t kMaxModelId = 2147483647;  // OpenNMT-py's ids are configured integers
const std::map<std::string, std::string> kServerOnly = {
    {"batch", "the server batches requests itself (--max-batch-tokens)"},
    {"dictionary", "the server reads no file a request names"}};

Json parse_body(const std::string& body) {
  try {
    return parse_json(body, "request body");
  } catch (const Error& e) {
    throw ApiError(400, "bad_json", e.what());
  }
}

std::size_t characters(const std::string& text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // every byte but UTF-8 continuations
  }));
}

void check_sentence_count(std::size_t count, const RequestLimits& limits) {
  if (count > limits.max_sentences) {
    throw ApiError(400, "too_many", std::to_string(count) + " sentences, more than " +
                                        std::to_string(limits.max_sentences) + " a request (--max-sentences)");
  }
}

std::string checked_source(const Json& item, std::size_t index, const RequestLimits& limits) {
  if (!item.is_string()) {
    throw ApiError(400, "bad_request", "src[" + std::to_string(index) + "] must be a string, not " + json_type_name(item));
  }
  std::string text = item.get<std::string>();
  if (characters(text) > limits.max_chars) {
    throw ApiError(400, "too_long", "src[" + std::to_string(index) + "] has more than " + std::to_string(limits.max_chars) +
                                        " characters (--max-chars)");
  }
  return text;
}

bool boolean_field(const Json& json, const char* key, bool fallback) {
  if (!json.contains(key)) return fallback;
  if (!json[key].is_boolean()) throw ApiError(400, "bad_request", std::string("'") + key + "' must be true or false");
  return json[key].get<bool>();
}

// The search options `json` sets over `defaults`, each checked against the decoding option table.
evaluation::SearchOptions search_options(const Json& json, const evaluation::SearchOptions& defaults) {
  for (const auto& [key, why] : kServerOnly) {
    if (json.contains(key)) throw ApiError(400, "bad_option", "'" + key + "' cannot be set per request: " + why);
  }
  evaluation::SearchOptions search = defaults;
  try {
    options::update_from_json(search, json, "request", kRequestKeys);
  } catch (const Error& e) {
    const std::string what = e.what();
    throw ApiError(400, what.find("unknown key") != std::string::npos ? "unknown_field" : "bad_option", what);
  }
  search.nbest = std::min(search.nbest, search.beam);  // as the schema says: at most beam translations
  return search;
}

TranslateRequest request_from(const Json& json, const evaluation::SearchOptions& defaults, const RequestLimits& limits) {
  if (!json.is_object()) throw ApiError(400, "bad_request", "the body must be a JSON object, not " + json_type_name(json));
  if (!json.contains("src") || !json["src"].is_array()) {
    throw ApiError(400, "bad_request", "'src' is required: a list of sentences");
  }
  const Json& src = json["src"];
  check_sentence_count(src.size(), limits);
  TranslateRequest request;
  for (std::size_t i = 0; i < src.size(); ++i) request.sources.push_back(checked_source(src[i], i, limits));
  if (json.contains("model")) {
    if (!json["model"].is_string()) throw ApiError(400, "bad_request", "'model' must be a string");
    request.model = json["model"].get<std::string>();
  }
  request.alignment = boolean_field(json, "alignment", false);
  request.scores = boolean_field(json, "scores", true);
  request.search = search_options(json, defaults);
  request.search.keep_attention = request.alignment || request.search.unk_replace;
  return request;
}

}  // namespace

TranslateRequest parse_translate_request(const std::string& body, const evaluation::SearchOptions& defaults,
                                         const RequestLimits& limits) {
  return request_from(parse_body(body), defaults, limits);
}

std::vector<OpenNmtInput> parse_opennmt_request(const std::string& body, const evaluation::SearchOptions& defaults,
                                                const RequestLimits& limits) {
  const Json json = parse_body(body);
  if (!json.is_array()) throw ApiError(400, "bad_request", "the body must be a list of {\"src\": ..., \"id\": N}");
  check_sentence_count(json.size(), limits);
  std::vector<OpenNmtInput> groups;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const Json& item = json[i];
    if (!item.is_object() || !item.contains("src")) {
      throw ApiError(400, "bad_request", "item " + std::to_string(i) + " must be {\"src\": ..., \"id\": N}");
    }
    for (const auto& field : item.items()) {
      if (field.key() != "src" && field.key() != "id") {
        throw ApiError(400, "unknown_field", "item " + std::to_string(i) + ": unknown key '" + printable(field.key()) + "'");
      }
    }
    std::size_t id = 0;
    if (item.contains("id")) {
      if (!item["id"].is_number_integer() || item["id"].get<std::int64_t>() < 0 ||
          item["id"].get<std::int64_t>() > kMaxModelId) {
        throw ApiError(400, "bad_request", "item " + std::to_string(i) + ": 'id' must be an integer in [0, " +
                                               std::to_string(kMaxModelId) + "]");
      }
      id = item["id"].get<std::size_t>();
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const OpenNmtInput& g) { return g.model_id == id; });
    if (group == groups.end()) {
      groups.push_back({id, {}, {}});
      group = groups.end() - 1;
      group->request.search = defaults;
    }
    group->positions.push_back(i);
    group->request.sources.push_back(checked_source(item["src"], i, limits));
  }
  return groups;
}

std::string hard_alignment(const evaluation::Translation& translation, bool reverse_source) {
  const std::size_t words = translation.source_tokens.empty() ? 0 : translation.source_tokens.size() - 1;  // less <eos>
  std::string out;
  const auto& attention = translation.hypothesis.attention;
  for (std::size_t t = 0; t < translation.target_tokens.size() && t < attention.size(); ++t) {
    const std::size_t span = std::min(words, attention[t].size());
    if (span == 0) continue;
    const auto peak = static_cast<std::size_t>(std::max_element(attention[t].begin(), attention[t].begin() + static_cast<std::ptrdiff_t>(span)) -
                                               attention[t].begin());
    const std::size_t source = reverse_source ? words - 1 - peak : peak;
    out += (out.empty() ? "" : " ") + std::to_string(source) + "-" + std::to_string(t);
  }
  return out;
}

Json translation_json(const evaluation::Translation& translation, const TranslateRequest& request, bool reverse_source) {
  Json out = {{"tgt", translation.text}};
  const bool any = !translation.nbest.empty();
  if (request.scores) out["score"] = any ? Json(translation.hypothesis.score) : Json(nullptr);
  if (request.search.nbest > 1) {
    Json list = Json::array();
    for (std::size_t r = 0; r < translation.nbest.size(); ++r) {
      Json entry = {{"tgt", translation.nbest_texts[r]}};
      if (request.scores) entry["score"] = translation.nbest[r].score;
      list.push_back(entry);
    }
    out["nbest"] = list;
  }
  if (request.alignment) out["alignment"] = hard_alignment(translation, reverse_source);
  return out;
}

Json error_json(int status, const std::string& message) { return {{"error", message}, {"status", status}}; }

namespace {

// The JSON schema of one search option, from its row of the table.
template <typename T>
Json option_schema(const options::Info& info, const T& value) {
  Json schema = {{"description", info.help}};
  if constexpr (std::is_same_v<T, bool>) {
    schema["type"] = "boolean";
  } else if constexpr (options::IsEnumOption<T>::value) {
    schema["type"] = "string";
    Json names = Json::array();
    for (const auto& [v, name] : options::EnumNames<T>::values) names.push_back(name);
    schema["enum"] = names;
  } else if constexpr (std::is_same_v<T, std::string>) {
    schema["type"] = "string";
  } else {
    schema["type"] = std::is_integral_v<T> ? "integer" : "number";
    if (std::isfinite(info.range.min)) {
      schema["minimum"] = info.range.min;
      if (info.range.min_open) schema["exclusiveMinimum"] = true;
    }
    if (std::isfinite(info.range.max)) {
      schema["maximum"] = info.range.max;
      if (info.range.max_open) schema["exclusiveMaximum"] = true;
    }
  }
  schema["default"] = options::value_to_json(value);
  return schema;
}

Json translate_request_schema(const evaluation::SearchOptions& defaults, const RequestLimits& limits,
                              const std::vector<std::string>& model_names) {
  Json properties = {
      {"src",
       {{"type", "array"},
        {"maxItems", limits.max_sentences},
        {"items", {{"type", "string"}, {"maxLength", limits.max_chars}}},
        {"description", "sentences to translate, one translation each, in order"}}},
      {"model", {{"type", "string"}, {"enum", model_names}, {"description", "which model (default: the first)"}}},
      {"alignment", {{"type", "boolean"}, {"default", false}, {"description", "each translation's hard alignment"}}},
      {"scores", {{"type", "boolean"}, {"default", true}, {"description", "each translation's score"}}}};
  evaluation::SearchOptions::visit(defaults, [&](const options::Info& info, const auto& value) {
    if (kServerOnly.count(info.key) == 0) properties[info.key] = option_schema(info, value);
  });
  properties["nbest"]["description"] = "translations per sentence, best first: at most beam (larger values are cut to it)";
  return {{"type", "object"}, {"required", {"src"}}, {"additionalProperties", false}, {"properties", properties}};
}

Json json_content(const Json& schema) { return {{"application/json", {{"schema", schema}}}}; }

Json error_responses(std::initializer_list<std::pair<const char*, const char*>> statuses) {
  Json out = Json::object();
  for (const auto& [status, description] : statuses) {
    out[status] = {{"description", description}, {"content", json_content({{"$ref", "#/components/schemas/Error"}})}};
  }
  return out;
}

}  // namespace

Json openapi_document(const evaluation::SearchOptions& defaults, const RequestLimits& limits,
                      const std::vector<std::string>& model_names) {
  const Json translation = {
      {"type", "object"},
      {"required", {"tgt"}},
      {"properties",
       {{"tgt", {{"type", "string"}}},
        {"score", {{"type", "number"}, {"nullable", true}}},
        {"nbest", {{"type", "array"}, {"items", {{"type", "object"}, {"properties", {{"tgt", {{"type", "string"}}}, {"score", {{"type", "number"}}}}}}}}},
        {"alignment", {{"type", "string"}, {"description", "Moses-style src-tgt pairs"}}}}}};
  Json translate_responses = error_responses({{"400", "a malformed request or an option out of its range"},
                                              {"413", "a body larger than --max-body"},
                                              {"429", "the queue is full (--max-queue)"},
                                              {"503", "the models are still loading, or the server is stopping"}});
  translate_responses["200"] = {
      {"description", "the translations, in the order of src"},
      {"content", json_content({{"type", "object"},
                                {"required", {"translations", "model", "elapsed_ms"}},
                                {"properties",
                                 {{"translations", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/Translation"}}}}},
                                  {"model", {{"type", "string"}}},
                                  {"elapsed_ms", {{"type", "number"}}}}}})}};
  Json opennmt_responses = translate_responses;
  opennmt_responses["200"] = {
      {"description", "OpenNMT-py's answer: one list per n-best rank, each with an entry per input"},
      {"content", json_content({{"type", "array"}, {"items", {{"type", "array"}, {"items", {{"type", "object"}}}}}})}};
  const Json opennmt_request = {
      {"type", "array"},
      {"maxItems", limits.max_sentences},
      {"items",
       {{"type", "object"},
        {"required", {"src"}},
        {"additionalProperties", false},
        {"properties",
         {{"src", {{"type", "string"}, {"maxLength", limits.max_chars}}},
          {"id", {{"type", "integer"}, {"minimum", 0}, {"maximum", kMaxModelId}}}}}}}};
  Json paths = {
      {"/translate",
       {{"post",
         {{"summary", "Translate sentences (batched with concurrent requests)"},
          {"requestBody", {{"required", true}, {"content", json_content(translate_request_schema(defaults, limits, model_names))}}},
          {"responses", translate_responses}}}}},
      {"/translator/translate",
       {{"post",
         {{"summary", "OpenNMT-py's route: [{\"src\": ..., \"id\": N}]"},
          {"requestBody", {{"required", true}, {"content", json_content(opennmt_request)}}},
          {"responses", opennmt_responses}}}}},
      {"/health",
       {{"get",
         {{"summary", "ready once the models are loaded"},
          {"responses",
           {{"200", {{"description", "ready"}, {"content", json_content({{"type", "object"}})}}},
            {"503", {{"description", "loading or stopping"}, {"content", json_content({{"type", "object"}})}}}}}}}}},
      {"/models",
       {{"get", {{"summary", "the models served"}, {"responses", {{"200", {{"description", "one entry per model"}, {"content", json_content({{"type", "array"}, {"items", {{"type", "object"}}}})}}}}}}}}},
      {"/metrics",
       {{"get",
         {{"summary", "Prometheus metrics"},
          {"responses", {{"200", {{"description", "text exposition format 0.0.4"}, {"content", {{"text/plain", {{"schema", {{"type", "string"}}}}}}}}}}}}}}},
      {"/openapi.json",
       {{"get", {{"summary", "this document"}, {"responses", {{"200", {{"description", "OpenAPI 3.0"}, {"content", json_content({{"type", "object"}})}}}}}}}}},
      {"/reload",
       {{"post",
         {{"summary", "load each run's newest weights and swap them in (a run that fails keeps its model)"},
          {"responses",
           {{"200", {{"description", "every model reloaded"}, {"content", json_content({{"type", "object"}})}}},
            {"500", {{"description", "a model failed to load and keeps serving its old weights"},
                     {"content", json_content({{"type", "object"}})}}},
            {"503", {{"description", "the models are still loading"}, {"content", json_content({{"$ref", "#/components/schemas/Error"}})}}}}}}}}}};
  return {{"openapi", "3.0.3"},
          {"info", {{"title", "luong serve"}, {"version", "1"}, {"description", "Translation with luong's trained models"}}},
          {"paths", paths},
          {"components",
           {{"schemas",
             {{"Translation", translation},
              {"Error",
               {{"type", "object"},
                {"required", {"error", "status"}},
                {"properties", {{"error", {{"type", "string"}}}, {"status", {{"type", "integer"}}}}}}}}}}}};
}

}  // namespace luong::serve
