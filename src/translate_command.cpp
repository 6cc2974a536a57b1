#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/data_pipeline/utf8.h"
#include "luong/evaluation/translator.h"
#include "luong/util/error.h"

namespace luong::cli {

int translate_command(int argc, char** argv) {
  cxxopts::Options options("luong translate", "Translate sentences read from stdin, one per line, to stdout.");
  options.add_options()
      ("model", "run directory written by luong train", cxxopts::value<std::string>())
      ("beam", "beam width (1 = greedy)", cxxopts::value<int>()->default_value("1"))
      ("alpha", "length normalisation: score / length^alpha", cxxopts::value<double>()->default_value("0.6"))
      ("max-len", "most target tokens per sentence", cxxopts::value<int>()->default_value("50"))
      ("batch", "sentences translated together", cxxopts::value<int>()->default_value("64"))
      ("stats", "print the sentences per second of the translation itself (after loading) on stderr");
  add_runtime_options(options);
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  const std::string device = setup_runtime(result);
  training::TrainedModel trained = training::load_trained_model(result["model"].as<std::string>(), device);
  evaluation::SearchOptions search;
  search.beam = result["beam"].as<int>();
  search.alpha = result["alpha"].as<double>();
  search.max_len = result["max-len"].as<int>();
  const int batch = result["batch"].as<int>();
  if (batch < 1) throw Error("--batch must be at least 1");
  evaluation::Translator translator(trained);

  // Lines are read in chunks so that memory stays bounded however long the input is; every input
  // line gives exactly one output line. A chunk holds 16 batches, which the translator groups by
  // source length.
  std::ios::sync_with_stdio(false);
  std::vector<std::string> chunk;
  std::string line;
  std::size_t sentences = 0;
  double seconds = 0;
  const auto flush = [&] {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<evaluation::Translation> translations = translator.translate(chunk, search, batch);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sentences += chunk.size();
    for (const auto& t : translations) std::cout << t.text << '\n';
    std::cout.flush();
    chunk.clear();
  };
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    chunk.push_back(data::sanitize_utf8(line));
    if (static_cast<int>(chunk.size()) >= batch * 16) flush();
  }
  flush();
  if (result.count("stats")) {
    std::fprintf(stderr, "luong translate: %zu sentences in %.3f s, %.0f sentences/s (tokenising, search, detokenising)\n",
                 sentences, seconds, seconds > 0 ? static_cast<double>(sentences) / seconds : 0.0);
  }
  return 0;
}

}  // namespace luong::cli
