#include <cmath>
#include <cstdio>
#include <iostream>

#include "luong/cli/commands.h"
#include "luong/cli/options.h"
#include "luong/data_pipeline/batching.h"
#include "luong/data_pipeline/corpus.h"
#include "luong/evaluation/metrics.h"
#include "luong/evaluation/translator.h"
#include "luong/util/error.h"
#include "luong/util/json.h"

namespace luong::cli {

int evaluate_command(int argc, char** argv) {
  cxxopts::Options options("luong evaluate",
                           "Test loss, perplexity, corpus BLEU (sacreBLEU's 13a, 4-gram) and chrF of a trained model.");
  options.add_options()
      ("model", "run directory written by luong train", cxxopts::value<std::string>())
      ("data", "pairs to score (default: the run's own test split, RUN_DIR/test.tsv)", cxxopts::value<std::string>())
      ("format", "tsv or opus", cxxopts::value<std::string>()->default_value("tsv"))
      ("beam", "beam width (1 = greedy)", cxxopts::value<int>()->default_value("1"))
      ("alpha", "length normalisation for beam search", cxxopts::value<double>()->default_value("0.6"))
      ("max-len", "most target tokens per sentence", cxxopts::value<int>()->default_value("50"))
      ("batch", "sentences per batch", cxxopts::value<int>()->default_value("100"));
  add_runtime_options(options);
  cxxopts::ParseResult result;
  if (!parse_or_help(options, argc, argv, result)) return 0;
  if (!result.count("model")) throw Error("--model RUN_DIR is required");
  const std::string device = setup_runtime(result);
  const std::string run_dir = result["model"].as<std::string>();
  training::TrainedModel trained = training::load_trained_model(run_dir, device);
  const std::string data_path = result.count("data") ? result["data"].as<std::string>() : training::RunPaths(run_dir).test;
  const auto pairs = data::read_corpus(
      {data_path, data::parse_corpus_format(result["format"].as<std::string>()), result.count("data") ? trained.config.reverse : false});

  // Teacher-forced loss over every pair, then free decoding for BLEU and chrF.
  std::vector<data::FilteredPair> filtered;
  for (const auto& p : pairs) filtered.push_back({p.source, p.target, p.line});
  const auto encoded = data::encode_pairs(filtered, *trained.source_tokenizer, *trained.target_tokenizer,
                                          *trained.source_vocab, *trained.target_vocab);
  data::BatchingOptions batching;
  batching.batch_size = result["batch"].as<int>();
  double loss_sum = 0;
  std::int64_t tokens = 0;
  {
    torch::NoGradGuard no_grad;
    for (const auto& cpu_batch : data::make_batches(encoded, batching)) {
      const data::Batch batch = cpu_batch.to(trained.device);
      const auto loss = trained.model->loss(batch.src, batch.src_lengths, batch.dec_in, batch.dec_tgt);
      loss_sum += loss.sum.item<double>();
      tokens += loss.tokens;
    }
  }
  evaluation::SearchOptions search;
  search.beam = result["beam"].as<int>();
  search.alpha = result["alpha"].as<double>();
  search.max_len = result["max-len"].as<int>();
  std::vector<std::string> sources, references, hypotheses;
  for (const auto& p : pairs) {
    sources.push_back(p.source);
    references.push_back(p.target);
  }
  evaluation::Translator translator(trained);
  for (const auto& t : translator.translate(sources, search, batching.batch_size)) hypotheses.push_back(t.text);
  const evaluation::BleuScore bleu = evaluation::corpus_bleu(hypotheses, references);
  const double chrf = evaluation::corpus_chrf(hypotheses, references);
  const double loss = loss_sum / static_cast<double>(std::max<std::int64_t>(tokens, 1));

  Json out = Json::object();
  out.set("data", data_path);
  out.set("sentences", static_cast<std::int64_t>(pairs.size()));
  out.set("target_tokens", tokens);
  out.set("loss", loss);
  out.set("perplexity", std::exp(loss));
  out.set("bleu", bleu.score);
  Json precisions = Json::array();
  for (double p : bleu.precisions) precisions.push_back(p);
  out.set("bleu_precisions", precisions);
  out.set("brevity_penalty", bleu.brevity_penalty);
  out.set("hypothesis_length", static_cast<std::int64_t>(bleu.hypothesis_length));
  out.set("reference_length", static_cast<std::int64_t>(bleu.reference_length));
  out.set("chrf", chrf);
  out.set("beam", search.beam);
  out.set("weights", trained.weights);
  std::cout << out.dump() << std::endl;

  std::fprintf(stderr, "%-18s %s\n", "weights", trained.weights.c_str());
  std::fprintf(stderr, "%-18s %s (%zu pairs, %lld target tokens)\n", "data", data_path.c_str(), pairs.size(),
               static_cast<long long>(tokens));
  std::fprintf(stderr, "%-18s %.4f\n", "loss", loss);
  std::fprintf(stderr, "%-18s %.2f\n", "perplexity", std::exp(loss));
  std::fprintf(stderr, "%-18s %.2f  (%.1f/%.1f/%.1f/%.1f, BP %.3f, %ld/%ld)\n", "BLEU (13a)", bleu.score,
               bleu.precisions[0], bleu.precisions[1], bleu.precisions[2], bleu.precisions[3], bleu.brevity_penalty,
               bleu.hypothesis_length, bleu.reference_length);
  std::fprintf(stderr, "%-18s %.2f\n", "chrF", chrf);
  std::fprintf(stderr, "%-18s %s\n", "search", search.beam == 1 ? "greedy" : ("beam " + std::to_string(search.beam)).c_str());
  return 0;
}

}  // namespace luong::cli
