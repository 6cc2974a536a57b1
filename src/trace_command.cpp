#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/model_commands.h"
#include "luong/cli/option_flags.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/evaluation/translator.h"
#include "luong/util/atomic_file.h"
#include "luong/util/error.h"
#include "luong/util/plot.h"

namespace luong::cli {
namespace {

// Pads a UTF-8 string to `width` code points (std::printf's %-10s counts bytes, not letters).
std::string pad(const std::string& text, std::size_t width) {
  std::size_t points = 0;
  for (unsigned char c : text) points += (c & 0xC0) != 0x80;
  return points >= width ? text + " " : text + std::string(width - points, ' ');
}

void print_steps(const evaluation::Translation& t, const std::string& sentence) {
  const auto& steps = t.hypothesis.attention;
  for (std::size_t step = 0; step < steps.size(); ++step) {
    const auto& w = steps[step];
    const std::size_t peak = static_cast<std::size_t>(std::max_element(w.begin(), w.end()) - w.begin());
    if (step < t.target_tokens.size()) {
      std::printf("\nstep %zu: produced '%s'", step, t.target_tokens[step].c_str());
    } else {
      std::printf("\nstep %zu: <eos> -> stop", step);
    }
    if (step < t.hypothesis.positions.size()) std::printf("   (p_t = %.2f)", t.hypothesis.positions[step]);
    std::printf("\n");
    for (std::size_t pos = 0; pos < w.size() && pos < t.source_tokens.size(); ++pos) {
      const int bar = static_cast<int>(std::lround(w[pos] * 30));
      std::printf("  %2zu %s %6.3f %s%s\n", pos, pad(t.source_tokens[pos], 10).c_str(), w[pos],
                  std::string(bar, '#').c_str(), pos == peak ? " <== peak" : "");
    }
  }
  std::printf("\nSource   : %s\nPredicted: %s\n", sentence.c_str(), t.text.c_str());
}

void write_csv(const evaluation::Translation& t, const std::string& path) {
  write_file_atomically(path, [&](std::ostream& out) {
    out << "q,k,w\n";
    char row[96];
    for (std::size_t q = 0; q < t.hypothesis.attention.size(); ++q) {
      for (std::size_t k = 0; k < t.hypothesis.attention[q].size(); ++k) {
        std::snprintf(row, sizeof row, "%zu,%zu,%.6f\n", q, k, t.hypothesis.attention[q][k]);
        out << row;
      }
    }
  }, WriteTarget::kNamedByUser);
}

void write_heat_map(const evaluation::Translation& t, const std::string& path) {
  HeatMap map;
  for (const auto& w : t.hypothesis.attention) map.values.emplace_back(w.begin(), w.end());
  map.row_labels = t.target_tokens;
  if (t.hypothesis.finished) map.row_labels.push_back("<eos>");
  map.column_labels = t.source_tokens;
  map.title = "attention";
  map.x_label = "source token";
  map.y_label = "produced token";
  save_heat_map(map, path, 30, WriteTarget::kNamedByUser);
}

}  // namespace

int trace_command(int argc, char** argv) {
  cxxopts::Options parser("luong trace",
                          "The notebook's 'tracing prediction path' table: each decoder step's word and attention.");
  add_model_flags(parser);
  evaluation::SearchOptions defaults;
  defaults.max_len = 20;
  add_flags(parser, defaults);
  parser.add_options("trace")
      ("sentence", "source sentence", cxxopts::value<std::string>())
      ("heatmap", "write the attention matrix as a labelled PNG", cxxopts::value<std::string>())
      ("csv", "write the attention as long-form q,k,w rows", cxxopts::value<std::string>());
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  if (!result.count("sentence")) throw Error("--sentence \"...\" is required");
  const std::string sentence = result["sentence"].as<std::string>();
  if (const auto bad = data::find_invalid_utf8(sentence)) {
    throw Error("--sentence: invalid UTF-8 at byte " + std::to_string(*bad + 1));
  }
  evaluation::SearchOptions search = defaults;
  apply_flags(result, search);
  search.keep_attention = true;
  std::vector<run::TrainedModel> models = load_models_from_flags(result);
  evaluation::Translator translator(pointers(models));
  const evaluation::Translation t = translator.translate({sentence}, search).front();
  if (t.source_tokens.empty()) throw Error("the sentence has no tokens");
  print_steps(t, sentence);
  check_written(std::cout, "stdout");
  if (result.count("csv")) {
    write_csv(t, result["csv"].as<std::string>());
    std::fprintf(stderr, "luong trace: wrote %s\n", printable(result["csv"].as<std::string>()).c_str());
  }
  if (result.count("heatmap")) {
    write_heat_map(t, result["heatmap"].as<std::string>());
    std::fprintf(stderr, "luong trace: wrote %s\n", printable(result["heatmap"].as<std::string>()).c_str());
  }
  return 0;
}

}  // namespace luong::cli
