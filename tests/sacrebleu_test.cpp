// BLEU, chrF and their signatures against the real sacreBLEU (the pinned PyPI package in .venv/)
// on the same files: English and Arabic references with hypotheses that differ from them the ways
// a translation does (words dropped, repeated, swapped or replaced, case and punctuation changed,
// empty lines).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include "luong/evaluation/metrics.h"
#include "test_paths.h"

namespace luong::evaluation {
namespace {

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

/// One column of the shared corpus (or of the committed fixture without it), at most `count` lines.
std::vector<std::string> references(int column, std::size_t count) {
  std::ifstream in(test::shared_corpus());
  if (!in) in.open(test::fixture("tiny.tsv"));
  std::vector<std::string> lines;
  for (std::string line; lines.size() < count && std::getline(in, line);) {
    std::istringstream fields(line);
    std::string field;
    for (int c = 0; c <= column; ++c) std::getline(fields, field, '\t');
    lines.push_back(field);
  }
  return lines;
}

std::vector<std::string> perturbed(const std::vector<std::string>& refs, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> hyps;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    std::vector<std::string> w = split_words(refs[i]);
    switch (rng() % 8) {
      case 0: break;  // exact
      case 1: if (!w.empty()) w.erase(w.begin() + rng() % w.size()); break;
      case 2: if (!w.empty()) w.insert(w.begin() + rng() % w.size(), w[rng() % w.size()]); break;
      case 3: if (w.size() > 1) { const std::size_t k = rng() % (w.size() - 1); std::swap(w[k], w[k + 1]); } break;
      case 4: w = split_words(refs[(i + 7) % refs.size()]); break;  // another sentence
      case 5: for (auto& s : w) for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch))); break;
      case 6: if (!w.empty()) w.back() += " ."; break;  // punctuation split off, as a word tokenizer does
      default: w.clear(); break;  // no output at all
    }
    hyps.push_back(join_words(w));
  }
  return hyps;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (std::size_t i = 0; i < lines.size(); ++i) out << (i ? "\n" : "") << lines[i];
}

struct Sacrebleu {
  double bleu, chrf;
  std::string bleu_signature, chrf_signature;
};

Sacrebleu run_sacrebleu(const std::string& hyp_path, const std::string& ref_path, const std::string& out_path) {
  const std::string script =
      "import sys, sacrebleu\n"
      "h = open(sys.argv[1], encoding='utf-8').read().split('\\n')\n"
      "r = open(sys.argv[2], encoding='utf-8').read().split('\\n')\n"
      "b = sacrebleu.metrics.BLEU(); c = sacrebleu.metrics.CHRF()\n"
      "bs = b.corpus_score(h, [r]); cs = c.corpus_score(h, [r])\n"
      "print(repr(bs.score), repr(cs.score), b.get_signature(), c.get_signature(), sep='\\n', file=open(sys.argv[3], 'w'))\n";
  const std::string script_path = out_path + ".py";
  std::ofstream(script_path) << script;
  const std::string command = test::python() + " " + script_path + " " + hyp_path + " " + ref_path + " " + out_path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command << " (is sacrebleu installed in .venv? scripts/install-deps.sh)";
  std::ifstream in(out_path);
  Sacrebleu s{};
  in >> s.bleu >> s.chrf;
  in.ignore();
  std::getline(in, s.bleu_signature);
  std::getline(in, s.chrf_signature);
  return s;
}

class SacrebleuTest : public ::testing::TestWithParam<int> {};

TEST_P(SacrebleuTest, ScoresAndSignaturesEqualTheRealPackage) {
  const int column = GetParam();
  const std::vector<std::string> refs = references(column, 400);
  ASSERT_GE(refs.size(), 5u);
  const std::string dir = ::testing::TempDir() + "sacrebleu_" + std::to_string(column) + "_" +
                          std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  for (unsigned seed : {1u, 2u, 3u}) {
    const std::vector<std::string> hyps = perturbed(refs, seed);
    write_lines(dir + "/hyp", hyps);
    write_lines(dir + "/ref", refs);
    const Sacrebleu expected = run_sacrebleu(dir + "/hyp", dir + "/ref", dir + "/out");
    const BleuScore bleu = corpus_bleu(hyps, refs);
    EXPECT_NEAR(bleu.score, expected.bleu, 0.01) << "seed " << seed;
    EXPECT_NEAR(corpus_chrf(hyps, refs), expected.chrf, 0.01) << "seed " << seed;
    EXPECT_GT(expected.bleu, 5.0);  // the hypotheses overlap their references: a real comparison
    EXPECT_LT(expected.bleu, 95.0);
    EXPECT_EQ(bleu_signature(), expected.bleu_signature);
    EXPECT_EQ(chrf_signature(), expected.chrf_signature);
  }
  std::system(("rm -rf " + dir).c_str());
}

// Column 0 is English, column 1 Arabic.
INSTANTIATE_TEST_SUITE_P(BothSides, SacrebleuTest, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "english" : "arabic"; });

}  // namespace
}  // namespace luong::evaluation
