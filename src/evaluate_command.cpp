#include <cmath>
#include <cstdio>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/model_commands.h"
#include "luong/cli/option_flags.h"
#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/evaluation/metrics.h"
#include "luong/evaluation/scoring.h"
#include "luong/evaluation/translator.h"
#include "luong/util/error.h"
#include "luong/util/json.h"

namespace luong::cli {
namespace {

void print_table(const Json& report, const evaluation::BleuScore& bleu) {
  std::fprintf(stderr, "%-18s %s\n", "weights", report["weights"].get<std::string>().c_str());
  std::fprintf(stderr, "%-18s %s (%lld pairs, %lld target tokens)\n", "data", report["data"].get<std::string>().c_str(),
               report["sentences"].get<long long>(), report["target_tokens"].get<long long>());
  std::fprintf(stderr, "%-18s %.4f\n", "loss", report["loss"].get<double>());
  std::fprintf(stderr, "%-18s %.2f\n", "perplexity", report["perplexity"].get<double>());
  std::fprintf(stderr, "%-18s %.2f  (%.1f/%.1f/%.1f/%.1f, BP %.3f, %ld/%ld)  %s\n", "BLEU", bleu.score,
               bleu.precisions[0], bleu.precisions[1], bleu.precisions[2], bleu.precisions[3], bleu.brevity_penalty,
               bleu.hypothesis_length, bleu.reference_length, report["bleu_signature"].get<std::string>().c_str());
  std::fprintf(stderr, "%-18s %.2f  %s\n", "chrF", report["chrf"].get<double>(),
               report["chrf_signature"].get<std::string>().c_str());
  const long long beam = report["beam"].get<long long>();
  std::fprintf(stderr, "%-18s %s\n", "search", beam == 1 ? "greedy" : ("beam " + std::to_string(beam)).c_str());
}

}  // namespace

int evaluate_command(int argc, char** argv) {
  cxxopts::Options parser("luong evaluate",
                          "Test loss, perplexity, corpus BLEU (sacreBLEU's 13a, 4-gram) and chrF of a trained model. "
                          "Each side of a pair is cut at 400 tokens (with a warning counting the pairs cut).");
  add_model_flags(parser);
  parser.add_options("data")
      ("data", "pairs to score (default: the run's own test split, RUN_DIR/test.tsv)", cxxopts::value<std::string>())
      ("format", "tsv or opus", cxxopts::value<std::string>()->default_value("tsv"));
  add_flags(parser, evaluation::SearchOptions{});
  cxxopts::ParseResult result;
  if (!parse_or_help(parser, argc, argv, result)) return 0;
  evaluation::SearchOptions search;
  apply_flags(result, search);
  std::vector<run::TrainedModel> models = load_models_from_flags(result);
  run::TrainedModel& trained = models.front();
  const std::string run_dir = result["model"].as<std::vector<std::string>>().front();
  const std::string data_path = result.count("data") ? result["data"].as<std::string>() : run::RunPaths(run_dir).test;
  data::CorpusFormat format;
  try {
    format = options::parse_enum<data::CorpusFormat>(result["format"].as<std::string>());
  } catch (const Error& e) {
    throw Error(std::string("--format: ") + e.what());
  }
  const auto pairs = data::read_corpus({data_path, format, result.count("data") ? trained.config.reverse : false});

  // Teacher-forced loss over every pair, then free decoding for BLEU and chrF.
  std::vector<data::FilteredPair> filtered;
  for (const auto& p : pairs) filtered.push_back({p.source, p.target, p.line});
  std::size_t cut = 0;
  const auto encoded = data::encode_pairs(filtered, *trained.source_tokenizer, *trained.target_tokenizer,
                                          *trained.source_vocab, *trained.target_vocab, trained.config.reverse_source,
                                          evaluation::kMaxSentenceTokens, &cut);
  if (cut > 0) {
    std::fprintf(stderr, "luong evaluate: warning: %zu pair%s longer than %d tokens a side %s cut there\n", cut,
                 cut == 1 ? "" : "s", evaluation::kMaxSentenceTokens, cut == 1 ? "was" : "were");
  }
  data::BatchingOptions batching;
  batching.batch_size = search.batch;
  // The teacher-forced loss is a single model's (the first one's in an ensemble).
  const evaluation::CorpusLoss loss =
      evaluation::teacher_forced_loss(*trained.model, data::make_batches(encoded, batching), trained.device);
  std::vector<std::string> sources, references, hypotheses;
  for (const auto& p : pairs) {
    sources.push_back(p.source);
    references.push_back(p.target);
  }
  evaluation::Translator translator(pointers(models));
  for (const auto& t : translator.translate(sources, search)) hypotheses.push_back(t.text);
  const evaluation::BleuScore bleu = evaluation::corpus_bleu(hypotheses, references);

  const Json report = {{"data", data_path},
                       {"sentences", pairs.size()},
                       {"target_tokens", loss.tokens},
                       {"loss", loss.mean()},
                       {"perplexity", std::exp(loss.mean())},
                       {"bleu", bleu.score},
                       {"bleu_precisions", bleu.precisions},
                       {"brevity_penalty", bleu.brevity_penalty},
                       {"hypothesis_length", bleu.hypothesis_length},
                       {"reference_length", bleu.reference_length},
                       {"bleu_signature", evaluation::bleu_signature()},
                       {"chrf", evaluation::corpus_chrf(hypotheses, references)},
                       {"chrf_signature", evaluation::chrf_signature()},
                       {"beam", search.beam},
                       {"models", models.size()},
                       {"weights", trained.weights}};
  std::cout << dump_json(report) << std::endl;
  check_written(std::cout, "stdout");
  print_table(report, bleu);
  return 0;
}

}  // namespace luong::cli
