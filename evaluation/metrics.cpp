#include "luong/evaluation/metrics.h"

#include <cmath>
#include <map>
#include <sstream>

#include "luong/data_pipeline/unicode.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/util/error.h"

namespace luong::evaluation {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The ASCII class [\{-\~\[-\` -\&\(-\+\:-\@\/] of the first 13a rule.
bool is_13a_symbol(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

std::vector<std::string> split_whitespace(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string token; in >> token;) out.push_back(token);
  return out;
}

using NgramCounts = std::map<std::vector<std::string>, long>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens, std::size_t n) {
  NgramCounts counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
    ++counts[std::vector<std::string>(tokens.begin() + static_cast<std::ptrdiff_t>(i),
                                      tokens.begin() + static_cast<std::ptrdiff_t>(i + n))];
  }
  return counts;
}

}  // namespace

std::vector<std::string> tokenize_13a(const std::string& input) {
  std::string line = replace_all(input, "<skipped>", "");
  line = replace_all(line, "-\n", "");
  line = replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    line = replace_all(line, "&quot;", "\"");
    line = replace_all(line, "&amp;", "&");
    line = replace_all(line, "&lt;", "<");
    line = replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // Each rule is one left-to-right, non-overlapping regex substitution, as Python's re.sub.
  std::string a;
  for (char c : line) {
    if (is_13a_symbol(c)) {
      a += ' ';
      a += c;
      a += ' ';
    } else {
      a += c;
    }
  }
  std::string b;  // ([^0-9])([\.,]) -> \1 \2 (space after)
  for (std::size_t i = 0; i < a.size();) {
    if (i + 1 < a.size() && !is_digit(a[i]) && (a[i + 1] == '.' || a[i + 1] == ',')) {
      b += a[i];
      b += ' ';
      b += a[i + 1];
      b += ' ';
      i += 2;
    } else {
      b += a[i++];
    }
  }
  std::string c;  // ([\.,])([^0-9]) -> ' \1 \2'
  for (std::size_t i = 0; i < b.size();) {
    if (i + 1 < b.size() && (b[i] == '.' || b[i] == ',') && !is_digit(b[i + 1])) {
      c += ' ';
      c += b[i];
      c += ' ';
      c += b[i + 1];
      i += 2;
    } else {
      c += b[i++];
    }
  }
  std::string d;  // ([0-9])(-) -> \1 \2 (space after)
  for (std::size_t i = 0; i < c.size();) {
    if (i + 1 < c.size() && is_digit(c[i]) && c[i + 1] == '-') {
      d += c[i];
      d += ' ';
      d += '-';
      d += ' ';
      i += 2;
    } else {
      d += c[i++];
    }
  }
  return split_whitespace(d);
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) {
    throw Error("BLEU: " + std::to_string(hypotheses.size()) + " hypotheses but " + std::to_string(references.size()) +
                " references");
  }
  BleuScore s;
  for (std::size_t k = 0; k < hypotheses.size(); ++k) {
    const auto hyp = tokenize_13a(hypotheses[k]);
    const auto ref = tokenize_13a(references[k]);
    s.hypothesis_length += static_cast<long>(hyp.size());
    s.reference_length += static_cast<long>(ref.size());
    for (std::size_t n = 1; n <= 4; ++n) {
      const NgramCounts h = count_ngrams(hyp, n);
      const NgramCounts r = count_ngrams(ref, n);
      for (const auto& [gram, count] : h) {
        const auto it = r.find(gram);
        if (it != r.end()) s.matches[n - 1] += std::min(count, it->second);
      }
      s.totals[n - 1] += hyp.size() >= n ? static_cast<long>(hyp.size() - n + 1) : 0;
    }
  }
  // sacreBLEU's 'exp' smoothing: the k-th zero-match order gets precision 100 / (2^k * total).
  double smooth = 1.0;
  bool all_orders = true;
  for (std::size_t n = 0; n < 4; ++n) {
    if (s.totals[n] == 0) {
      all_orders = false;
      break;
    }
    if (s.matches[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * static_cast<double>(s.totals[n]));
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(s.matches[n]) / static_cast<double>(s.totals[n]);
    }
  }
  if (s.hypothesis_length < s.reference_length) {
    s.brevity_penalty =
        s.hypothesis_length > 0 ? std::exp(1.0 - static_cast<double>(s.reference_length) / s.hypothesis_length) : 0.0;
  } else {
    s.brevity_penalty = 1.0;
  }
  if (!all_orders) {
    s.score = 0.0;
    return s;
  }
  double log_sum = 0;
  for (double p : s.precisions) log_sum += std::log(p);
  s.score = s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) {
    throw Error("chrF: " + std::to_string(hypotheses.size()) + " hypotheses but " + std::to_string(references.size()) +
                " references");
  }
  constexpr int kOrder = 6;
  constexpr double kBeta = 2.0;
  std::array<long, kOrder> hyp_total{}, ref_total{}, match_total{};
  const auto characters = [](const std::string& text) {
    std::u32string out;
    for (char32_t cp : data::decode_utf8(text)) {
      if (!data::is_space_char(cp)) out.push_back(cp);
    }
    return out;
  };
  for (std::size_t k = 0; k < hypotheses.size(); ++k) {
    const std::u32string hyp = characters(hypotheses[k]);
    const std::u32string ref = characters(references[k]);
    for (int n = 1; n <= kOrder; ++n) {
      std::map<std::u32string, long> h, r;
      for (std::size_t i = 0; i + n <= hyp.size(); ++i) ++h[hyp.substr(i, static_cast<std::size_t>(n))];
      for (std::size_t i = 0; i + n <= ref.size(); ++i) ++r[ref.substr(i, static_cast<std::size_t>(n))];
      long matches = 0;
      for (const auto& [gram, count] : h) {
        const auto it = r.find(gram);
        if (it != r.end()) matches += std::min(count, it->second);
      }
      const std::size_t order = static_cast<std::size_t>(n);
      // As sacreBLEU: a hypothesis n-gram counts only where the reference has n-grams of that order.
      if (ref.size() >= order && hyp.size() >= order) hyp_total[order - 1] += static_cast<long>(hyp.size() - order + 1);
      if (ref.size() >= order) ref_total[order - 1] += static_cast<long>(ref.size() - order + 1);
      match_total[static_cast<std::size_t>(n - 1)] += matches;
    }
  }
  double avg_precision = 0, avg_recall = 0;
  int effective_order = 0;
  for (std::size_t i = 0; i < kOrder; ++i) {
    if (hyp_total[i] > 0 && ref_total[i] > 0) {
      avg_precision += static_cast<double>(match_total[i]) / hyp_total[i];
      avg_recall += static_cast<double>(match_total[i]) / ref_total[i];
      ++effective_order;
    }
  }
  if (effective_order == 0) return 0.0;
  avg_precision /= effective_order;
  avg_recall /= effective_order;
  if (avg_precision + avg_recall == 0) return 0.0;
  const double factor = kBeta * kBeta;
  return 100.0 * (1 + factor) * avg_precision * avg_recall / (factor * avg_precision + avg_recall);
}

std::string bleu_signature() {
  return std::string("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:") + kSacrebleuVersion;
}

std::string chrf_signature() { return std::string("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:") + kSacrebleuVersion; }

}  // namespace luong::evaluation
