#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/cli/model_commands.h"
#include "luong/cli/option_flags.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/evaluation/translator.h"
#include "luong/util/error.h"
#include "luong/util/line_reader.h"

namespace luong::cli {

int translate_command(int argc, char** argv) {
  cxxopts::Options parser("luong translate",
                          "Translate sentences read from stdin, one per line, to stdout: one output line per input "
                          "line (with --nbest N: N lines of line<TAB>rank<TAB>score<TAB>translation). Lines over "
                          "1 MiB give an empty translation and a warning; a source is cut at 400 tokens.");
  add_model_flags(parser);
  add_flags(parser, evaluation::SearchOptions{});
  parser.add_options("output")("stats", "print the sentences per second of the translation itself (after loading) on stderr");
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  evaluation::SearchOptions search;
  apply_flags(result, search);
  std::vector<run::TrainedModel> models = load_models_from_flags(result);
  evaluation::Translator translator(pointers(models));

  // Lines are read in chunks so that memory stays bounded however long the input is; every input
  // line gives exactly one output line. A chunk holds 16 batches, which the translator groups by
  // source length, or 8 MiB of text, whichever comes first (16 batches of long lines would be gigabytes).
  constexpr std::size_t kChunkBytes = std::size_t{8} << 20;
  std::size_t chunk_bytes = 0;
  std::ios::sync_with_stdio(false);
  std::vector<std::string> chunk;
  std::string line;
  std::size_t sentences = 0, too_long = 0;
  double seconds = 0;
  const auto flush = [&] {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<evaluation::Translation> translations = translator.translate(chunk, search);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::size_t i = 0; i < translations.size(); ++i) {
      const auto& t = translations[i];
      if (search.nbest == 1) {
        std::cout << t.text << '\n';
        continue;
      }
      // n-best: line number, rank, score and translation, tab-separated, best first.
      for (std::size_t r = 0; r < t.nbest_texts.size(); ++r) {
        std::cout << sentences + i + 1 << '\t' << r + 1 << '\t' << t.nbest[r].score << '\t' << t.nbest_texts[r] << '\n';
      }
    }
    sentences += chunk.size();
    check_written(std::cout, "stdout");
    chunk.clear();
    chunk_bytes = 0;
  };
  for (LineStatus status; (status = read_line(std::cin, line)) != LineStatus::kEnd;) {
    if (status == LineStatus::kTooLong) {
      skip_line(std::cin);
      if (too_long++ == 0) {
        std::fprintf(stderr, "luong translate: warning: input line %zu is longer than 1 MiB; its translation is empty\n",
                     sentences + chunk.size() + 1);
      }
      line.clear();
    }
    chunk.push_back(data::sanitize_utf8(line));
    chunk_bytes += chunk.back().size();
    if (static_cast<std::int64_t>(chunk.size()) >= search.batch * 16 || chunk_bytes >= kChunkBytes) flush();
  }
  if (std::cin.bad()) throw Error("stdin: read error");
  flush();
  if (too_long > 1) std::fprintf(stderr, "luong translate: warning: %zu lines were longer than 1 MiB\n", too_long);
  if (flag_given(result, "stats")) {
    std::fprintf(stderr, "luong translate: %zu sentences in %.3f s, %.0f sentences/s (tokenising, search, detokenising)\n",
                 sentences, seconds, seconds > 0 ? static_cast<double>(sentences) / seconds : 0.0);
  }
  return 0;
}

}  // namespace luong::cli
