#include <cmath>
#include <cstdio>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/data_pipeline/transliterate.h"
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

}  // namespace

int trace_command(int argc, char** argv) {
  cxxopts::Options options("luong trace",
                           "The notebook's 'tracing prediction path' table: each decoder step's word and attention.");
  options.add_options()
      ("model", "run directory written by luong train", cxxopts::value<std::string>())
      ("sentence", "source sentence", cxxopts::value<std::string>())
      ("max-len", "most decoder steps", cxxopts::value<int>()->default_value("20"))
      ("heatmap", "write the attention matrix as a labelled PNG", cxxopts::value<std::string>())
      ("csv", "write the attention as long-form q,k,w rows", cxxopts::value<std::string>());
  add_runtime_options(options);
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  if (!result.count("sentence")) throw Error("--sentence \"...\" is required");
  const std::string device = setup_runtime(result);
  training::TrainedModel trained = training::load_trained_model(result["model"].as<std::string>(), device);
  const std::string sentence = result["sentence"].as<std::string>();

  evaluation::SearchOptions search;
  search.beam = 1;
  search.max_len = result["max-len"].as<int>();
  search.keep_attention = true;
  evaluation::Translator translator(trained);
  const evaluation::Translation t = translator.translate({sentence}, search).front();
  if (t.source_tokens.empty()) throw Error("the sentence has no tokens");

  const auto& steps = t.hypothesis.attention;
  std::vector<std::string> produced = t.target_tokens;
  if (t.hypothesis.finished) produced.push_back("<eos>");
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
      std::printf("  %2zu %s %6.3f %s%s\n", pos, pad(t.source_tokens[pos], 10).c_str(), w[pos], std::string(bar, '#').c_str(),
                  pos == peak ? " <== peak" : "");
    }
  }
  std::printf("\nSource   : %s\nPredicted: %s\n", sentence.c_str(), t.text.c_str());

  if (result.count("csv")) {
    const std::string path = result["csv"].as<std::string>();
    write_file_atomically(path, [&](std::ostream& out) {
      out << "q,k,w\n";
      char row[96];
      for (std::size_t q = 0; q < steps.size(); ++q) {
        for (std::size_t k = 0; k < steps[q].size(); ++k) {
          std::snprintf(row, sizeof row, "%zu,%zu,%.6f\n", q, k, steps[q][k]);
          out << row;
        }
      }
    });
    std::fprintf(stderr, "luong trace: wrote %s\n", path.c_str());
  }
  if (result.count("heatmap")) {
    const std::string path = result["heatmap"].as<std::string>();
    std::vector<std::vector<double>> matrix;
    for (const auto& w : steps) matrix.emplace_back(w.begin(), w.end());
    std::vector<std::string> rows, columns;
    for (const auto& token : produced) rows.push_back(data::transliterate(token));
    for (const auto& token : t.source_tokens) columns.push_back(data::transliterate(token));
    int label = 0;
    for (const auto& l : rows) label = std::max(label, Canvas::text_width(l));
    int column_label = 0;
    for (const auto& l : columns) column_label = std::max(column_label, Canvas::text_width(l));
    const int cell = 28;
    const int width = 60 + label + cell * static_cast<int>(columns.size()) + 90;
    const int height = 60 + cell * static_cast<int>(rows.size()) + column_label + 40;
    Canvas canvas(std::max(width, 320), std::max(height, 200));
    draw_heatmap(canvas, {0, 0, canvas.width(), canvas.height()}, matrix, rows, columns,
                 "attention (target in Buckwalter transliteration)", "source token", "produced token");
    canvas.save_png(path);
    std::fprintf(stderr, "luong trace: wrote %s\n", path.c_str());
  }
  return 0;
}

}  // namespace luong::cli
