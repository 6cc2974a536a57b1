#pragma once
// The server's JSON: requests read and checked (each a 4xx ApiError naming what is wrong), responses
// written, and the OpenAPI 3 document of the whole API, its search options drawn from the decoding
// option table.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "luong/evaluation/translator.h"
#include "luong/util/json.h"

namespace luong::serve {

/// A request refused: its HTTP status, a kind for the metrics and a one-line message.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string kind, const std::string& message)
      : std::runtime_error(message), status(status), kind(std::move(kind)) {}
  int status;
  std::string kind;
};

/// What one request may hold.
struct RequestLimits {
  std::size_t max_sentences = 256;
  std::size_t max_chars = 4096;  ///< per sentence, in Unicode characters
};

struct TranslateRequest {
  std::vector<std::string> sources;
  evaluation::SearchOptions search;
  bool alignment = false;  ///< each translation's hard alignment, Moses' "src-tgt" pairs
  bool scores = true;
  std::string model;       ///< "" = the first
};

/// POST /translate's body: {"src": [...], "model": ..., "alignment": ..., "scores": ..., and any
/// search option by its config key ("beam", "nbest", ...), each within its range}. `defaults` are
/// the server's search options. Throws ApiError (400) for anything else.
TranslateRequest parse_translate_request(const std::string& body, const evaluation::SearchOptions& defaults,
                                         const RequestLimits& limits);

/// OpenNMT-py's POST /translator/translate body: [{"src": "...", "id": N}, ...] (its server's
/// shape), as one request per model id in their order of first appearance, with the indices of the
/// inputs each one holds.
struct OpenNmtInput {
  std::size_t model_id = 0;
  std::vector<std::size_t> positions;
  TranslateRequest request;
};
std::vector<OpenNmtInput> parse_opennmt_request(const std::string& body, const evaluation::SearchOptions& defaults,
                                                const RequestLimits& limits);

/// One translation as POST /translate answers it.
Json translation_json(const evaluation::Translation& translation, const TranslateRequest& request, bool reverse_source);
/// The hard alignment of the best hypothesis: for each target token its most attended source token,
/// "s-t" pairs in target order, positions in the source as written (not as reversed for the encoder).
std::string hard_alignment(const evaluation::Translation& translation, bool reverse_source);

/// {"error": message, "status": status}
Json error_json(int status, const std::string& message);

/// The OpenAPI 3.0 document of every route.
Json openapi_document(const evaluation::SearchOptions& defaults, const RequestLimits& limits,
                      const std::vector<std::string>& model_names);

}  // namespace luong::serve
