// The paper's and the peers' features: the location score, LSTM cells, the paper's dropout, tied
// embeddings, label smoothing, batched beam search with n-best lists, GNMT penalties, n-gram
// blocking, length ratios, ensembles and <unk> replacement.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "gradient_check.h"
#include "luong/data_pipeline/vocabulary.h"
#include "luong/data_pipeline/word_tokenizer.h"
#include "luong/evaluation/search.h"
#include "luong/evaluation/translator.h"
#include "luong/models/attention.h"
#include "luong/models/dropout.h"
#include "luong/models/linear_cross_entropy.h"
#include "luong/models/seq2seq.h"
#include "luong/training/weight_average.h"

namespace luong {
namespace {

using models::AttentionConfig;
using models::AttentionKind;
using models::CellKind;
using models::DecoderKind;
using models::ScoreKind;

TEST(LocationScoreTest, WeightsSumToOneOverRealPositionsAndIgnoreTheSource) {
  torch::manual_seed(0);
  AttentionConfig config;
  config.score = ScoreKind::kLocation;
  config.positions = 5;
  auto attention = models::make_attention(config, 4);
  const torch::Tensor query = torch::randn({3, 4});
  const torch::Tensor lengths = torch::tensor({7, 3, 1}, torch::kLong);
  const auto a = attention->forward(torch::randn({3, 7, 4}), query, lengths);
  const auto b = attention->forward(torch::randn({3, 7, 4}), query, lengths);  // other source states
  EXPECT_TRUE(torch::allclose(a.weights, b.weights));                        // a_t = softmax(W_a h_t)
  EXPECT_NEAR(a.weights[1].sum().item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(a.weights[1].slice(0, 3).abs().sum().item<float>(), 0.0f);  // padding
  EXPECT_EQ(a.weights[0].slice(0, 5).abs().sum().item<float>(), 0.0f);  // past W_a's rows: no weight
  EXPECT_NEAR(a.weights[0].sum().item<float>(), 1.0f, 1e-6);
}

// The decoders' step-by-step recurrence (gru_cell / lstm_cell per layer) against LibTorch's own
// nn::GRU / nn::LSTM over the same sequence.
TEST(RecurrentTest, StepsEqualLibTorchsModulesForGruAndLstm) {
  for (const CellKind cell : {CellKind::kGru, CellKind::kLstm}) {
    torch::manual_seed(4);
    torch::nn::Module owner;
    models::RecurrentLayers layers =
        models::register_recurrent(owner, models::RecurrentOptions(5, 6).cell(cell).layers(3));
    owner.to(torch::kDouble);
    const torch::Tensor x = torch::randn({2, 7, 5}, torch::kDouble);
    torch::Tensor expected;
    models::RecurrentState state{torch::zeros({3, 2, 6}, torch::kDouble), {}};
    if (cell == CellKind::kLstm) {
      expected = std::get<0>(layers.lstm->forward(x));
      state.cell = torch::zeros({3, 2, 6}, torch::kDouble);
    } else {
      expected = std::get<0>(layers.gru->forward(x));
    }
    for (int64_t t = 0; t < 7; ++t) {
      state = layers.step(x.select(1, t), state, false);
      EXPECT_LE((state.hidden[-1] - expected.select(1, t)).abs().max().item<double>(), 1e-14)
          << options::enum_name(cell) << " step " << t;
    }
  }
}

models::Seq2Seq small_model(const models::Seq2SeqOptions& options) {
  torch::manual_seed(9);
  models::Seq2Seq model(options);
  model->to(torch::kDouble);
  return model;
}

const torch::Tensor kSrc = torch::tensor({{4, 5, 6, 2}, {7, 2, 0, 0}}, torch::kLong);
const torch::Tensor kLengths = torch::tensor({4, 2}, torch::kLong);
const torch::Tensor kDecIn = torch::tensor({{1, 4, 5}, {1, 6, 0}}, torch::kLong);
const torch::Tensor kDecTgt = torch::tensor({{4, 5, 2}, {6, 2, 0}}, torch::kLong);

TEST(DropoutTest, OffInEvaluationAndOnInTraining) {
  models::Seq2Seq with = small_model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4).layers(2).dropout(0.5));
  models::Seq2Seq without = small_model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4).layers(2));
  with->eval();
  without->eval();
  const torch::Tensor a = with->forward(kSrc, kLengths, kDecIn).logits;
  EXPECT_TRUE(torch::equal(a, with->forward(kSrc, kLengths, kDecIn).logits));      // deterministic
  EXPECT_TRUE(torch::equal(a, without->forward(kSrc, kLengths, kDecIn).logits));   // and the same function
  with->train();
  EXPECT_FALSE(torch::equal(with->forward(kSrc, kLengths, kDecIn).logits, with->forward(kSrc, kLengths, kDecIn).logits));
}

// The CPU masks: the counter-based draws themselves (recomputed from the seed the default generator
// gives, so the fast path is what ran), the same on 1 and 3 threads, 1 / (1 - p) or 0, the kept
// fraction and neighbours' agreement within 5 standard deviations of 1 - p and p^2 + (1 - p)^2,
// and autograd's gradient of x * mask is the mask.
TEST(DropoutTest, CounterBasedMasksAreTheDrawsOnAnyThreadCount) {
  const int threads = torch::get_num_threads();
  const double p = 0.3;
  const int64_t n = int64_t{1} << 20;
  for (const torch::ScalarType dtype : {torch::kFloat, torch::kDouble}) {
    const torch::Tensor like = torch::empty({0}, dtype);
    torch::manual_seed(21);
    const std::uint64_t seed = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator())->random64();
    torch::Tensor expected = torch::empty({n}, torch::kDouble);
    models::detail::fill_dropout_mask(expected.data_ptr<double>(), 0, n, seed, models::detail::dropout_keep_below(p),
                                      1.0 / (1 - p));
    expected = expected.to(dtype);
    for (const int t : {1, 3}) {
      torch::set_num_threads(t);
      torch::manual_seed(21);
      const torch::Tensor mask = models::dropout_mask(like, {1024, 1024}, p);
      EXPECT_EQ(mask.scalar_type(), dtype);
      EXPECT_TRUE(torch::equal(mask.reshape({-1}), expected)) << t << " threads";
    }
    torch::set_num_threads(threads);
    const torch::Tensor kept = expected.ne(0);
    EXPECT_TRUE(torch::equal(expected.masked_select(kept), torch::full({kept.sum().item<int64_t>()}, 1.0 / (1 - p), dtype)));
    const double sd = std::sqrt(p * (1 - p) / static_cast<double>(n));
    EXPECT_NEAR(kept.to(torch::kDouble).mean().item<double>(), 1 - p, 5 * sd);
    const double same = p * p + (1 - p) * (1 - p);
    const double agreement = kept.slice(0, 1).eq(kept.slice(0, 0, n - 1)).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(agreement, same, 5 * std::sqrt(same * (1 - same) / static_cast<double>(n - 1)));
  }
  torch::manual_seed(6);
  const torch::Tensor float_mask = models::dropout_mask(torch::empty({0}), {4096}, p);
  torch::manual_seed(6);
  const torch::Tensor bf16_mask = models::dropout_mask(torch::empty({0}, torch::kBFloat16), {4096}, p);
  EXPECT_EQ(bf16_mask.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(bf16_mask, float_mask.to(torch::kBFloat16))) << "bf16: the float32 draws, converted";
  torch::manual_seed(4);
  const torch::Tensor first = models::dropout_mask(torch::empty({0}), {4096}, p);
  EXPECT_FALSE(torch::equal(first, models::dropout_mask(torch::empty({0}), {4096}, p))) << "each draw is new";
  const torch::Tensor x = torch::randn({64, 33}, torch::kDouble).requires_grad_();
  torch::manual_seed(5);
  const torch::Tensor y = models::maybe_dropout(x, p, true);
  torch::manual_seed(5);
  const torch::Tensor mask = models::dropout_mask(x, x.sizes(), p);
  EXPECT_TRUE(torch::equal(y, x * mask));
  y.sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), mask));
  EXPECT_TRUE(models::maybe_dropout(x, p, false).is_same(x));
  EXPECT_TRUE(models::maybe_dropout(x, 0, true).is_same(x));
}

TEST(TiedEmbeddingsTest, TheOutputLayerIsTheEmbeddingMatrix) {
  models::Seq2Seq model = small_model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4).tie_embeddings(true));
  EXPECT_EQ(model->decoder->fc->weight().data_ptr(), model->decoder->embedding->weight.data_ptr());
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  EXPECT_EQ(names.count("decoder.fc.weight"), 0u);
  EXPECT_EQ(names.count("decoder.fc.bias"), 1u);
  // Both uses reach the shared matrix: its gradient is the finite differences' through both.
  const auto loss = [&] { return model->loss(kSrc, kLengths, kDecIn, kDecTgt).loss; };
  const auto reports = test::check_gradients({{"decoder.embedding.weight", model->decoder->embedding->weight}}, loss);
  EXPECT_LE(reports[0].max_rel_diff, 1e-6);
  EXPECT_THROW(models::Seq2Seq(models::Seq2SeqOptions(9, 8).embed_size(3).hidden_size(4).tie_embeddings(true)), Error);
}

// (1 - eps) (lse - l_t) + eps (lse - mean l), worked out by hand on one row.
TEST(LabelSmoothingTest, LossIsTheHandComputedValueOnBothPaths) {
  const torch::Tensor x = torch::tensor({{1.0, -2.0}}, torch::kDouble);
  const torch::Tensor w = torch::tensor({{0.5, 0.0}, {0.0, 1.0}, {1.0, 1.0}}, torch::kDouble);
  const torch::Tensor b = torch::tensor({0.0, 0.5, -1.0}, torch::kDouble);
  const torch::Tensor target = torch::tensor({1}, torch::kLong);
  // logits: 0.5, -1.5, -2.0
  const double lse = std::log(std::exp(0.5) + std::exp(-1.5) + std::exp(-2.0));
  const double eps = 0.1, expected = (1 - eps) * (lse + 1.5) + eps * (lse - (0.5 - 1.5 - 2.0) / 3.0);
  EXPECT_NEAR(models::linear_cross_entropy(x, w, b, target, eps).item<double>(), expected, 1e-14);
  const torch::Tensor reference = torch::nn::functional::cross_entropy(
      torch::nn::functional::linear(x, w, b), target,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(eps));
  EXPECT_NEAR(reference.item<double>(), expected, 1e-14);
  // And the fused node's gradient against finite differences.
  torch::Tensor xg = torch::randn({5, 2}, torch::kDouble).requires_grad_();
  torch::Tensor wg = torch::randn({3, 2}, torch::kDouble).requires_grad_();
  torch::Tensor bg = torch::randn({3}, torch::kDouble).requires_grad_();
  const torch::Tensor targets = torch::tensor({0, 2, 1, 1, 0}, torch::kLong);
  const auto loss = [&] { return models::linear_cross_entropy(xg, wg, bg, targets, eps).sum(); };
  for (const auto& r : test::check_gradients({{"x", xg}, {"w", wg}, {"b", bg}}, loss)) EXPECT_LE(r.max_rel_diff, 1e-8) << r.name;
}

TEST(WeightAverageTest, AveragingIdenticalCheckpointsIsTheIdentity) {
  models::Seq2Seq model = small_model(models::Seq2SeqOptions(9, 8).embed_size(4).hidden_size(4));
  model->to(torch::kFloat);
  const models::StateDict weights = models::state_dict(*model);
  const models::StateDict averaged = training::average_state_dicts({weights, weights, weights, weights, weights}, "test");
  ASSERT_EQ(averaged.size(), weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) EXPECT_TRUE(torch::equal(averaged[i].second, weights[i].second));
}

TEST(WeightAverageTest, ExponentialAverageFollowsItsFormula) {
  torch::nn::Linear layer(2, 1);
  torch::NoGradGuard no_grad;
  layer->weight.fill_(1.0);
  training::ExponentialAverage ema(*layer, 0.9);
  layer->weight.fill_(3.0);
  ema.update();  // 0.9 * 1 + 0.1 * 3
  layer->weight.fill_(5.0);
  ema.update();  // 0.9 * 1.2 + 0.1 * 5
  const auto saved = ema.state_dict();
  EXPECT_EQ(saved[0].first, "weight");
  EXPECT_NEAR(saved[0].second[0][0].item<float>(), 1.58f, 1e-6);
}

// ---- search ---------------------------------------------------------------------------------------

models::Seq2Seq peaked_model(AttentionKind kind, DecoderKind decoder, torch::ScalarType dtype) {
  AttentionConfig attention;
  attention.kind = kind;
  torch::manual_seed(11);
  models::Seq2Seq model(models::Seq2SeqOptions(20, 15).embed_size(8).hidden_size(12).decoder(decoder).attention(attention));
  torch::NoGradGuard no_grad;
  model->decoder->fc->weight().mul_(3);  // peaked distributions: long, varied outputs
  model->to(dtype);
  model->eval();
  return model;
}

// Ten sentences of 1-8 tokens, <eos> last, padded.
std::pair<torch::Tensor, torch::Tensor> sentences() {
  std::vector<std::vector<int64_t>> rows = {{5, 6, 7}, {9}, {11, 12, 13, 14, 15, 16, 17, 18}, {4, 4}, {19, 8, 7, 6},
                                            {10, 11}, {5}, {6, 7, 8, 9, 10}, {12, 13, 14}, {15, 16, 17, 18, 19, 4}};
  torch::Tensor src = torch::zeros({static_cast<int64_t>(rows.size()), 9}, torch::kLong);
  std::vector<int64_t> lengths;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t i = 0; i < rows[r].size(); ++i) src[static_cast<int64_t>(r)][static_cast<int64_t>(i)] = rows[r][i];
    src[static_cast<int64_t>(r)][static_cast<int64_t>(rows[r].size())] = data::Vocabulary::kEos;
    lengths.push_back(static_cast<int64_t>(rows[r].size()) + 1);
  }
  return {src, torch::tensor(lengths, torch::kLong)};
}

// The batched beam search finds, for every sentence, the hypothesis the one-sentence search finds.
TEST(BatchedBeamSearchTest, EqualsTheOneSentenceSearch) {
  for (const auto decoder : {DecoderKind::kLuong, DecoderKind::kBahdanau}) {
    for (const auto kind : {AttentionKind::kGlobal, AttentionKind::kLocalPredictive}) {
      models::Seq2Seq model = peaked_model(kind, decoder, torch::kDouble);
      const auto [src, lengths] = sentences();
      evaluation::SearchOptions options;
      options.beam = 5;
      options.max_len = 15;
      const auto batched = evaluation::translate(*model, src, lengths, options);
      for (int64_t b = 0; b < src.size(0); ++b) {
        const int64_t n = lengths[b].item<int64_t>();
        const evaluation::Hypothesis alone = evaluation::reference_beam_search(
            *model, src.slice(0, b, b + 1).slice(1, 0, n), lengths.slice(0, b, b + 1), options);
        EXPECT_EQ(batched[static_cast<std::size_t>(b)].tokens, alone.tokens) << "sentence " << b;
        EXPECT_NEAR(batched[static_cast<std::size_t>(b)].score, alone.score, 1e-9) << "sentence " << b;
      }
    }
  }
}

TEST(BatchedBeamSearchTest, NbestListsAreOrderedAndDistinct) {
  models::Seq2Seq model = peaked_model(AttentionKind::kGlobal, DecoderKind::kLuong, torch::kDouble);
  const auto [src, lengths] = sentences();
  evaluation::SearchOptions options;
  options.beam = 6;
  options.nbest = 4;
  evaluation::Scorer scorer({model.get()});
  const auto lists = evaluation::search(scorer, src, lengths, options);
  ASSERT_EQ(lists.size(), 10u);
  for (const auto& list : lists) {
    ASSERT_FALSE(list.empty());
    EXPECT_LE(list.size(), 4u);
    std::set<std::vector<int64_t>> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
      EXPECT_TRUE(seen.insert(list[i].tokens).second);
      if (i > 0 && list[i].finished == list[i - 1].finished) {
        EXPECT_LE(list[i].score, list[i - 1].score);
      }
    }
  }
}

TEST(SearchFeaturesTest, NgramBlockingLengthRatioAndGnmtPenalty) {
  models::Seq2Seq model = peaked_model(AttentionKind::kGlobal, DecoderKind::kLuong, torch::kDouble);
  const auto [src, lengths] = sentences();
  for (const int64_t beam : {1, 4}) {
    evaluation::SearchOptions options;
    options.beam = beam;
    options.max_len = 30;
    options.block_ngram = 2;
    options.max_ratio = 1.5;
    const auto out = evaluation::translate(*model, src, lengths, options);
    for (std::size_t b = 0; b < out.size(); ++b) {
      const auto& tokens = out[b].tokens;
      std::set<std::pair<int64_t, int64_t>> bigrams;
      for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_TRUE(bigrams.insert({tokens[i - 1], tokens[i]}).second);
      const auto words = static_cast<double>(lengths[static_cast<int64_t>(b)].item<int64_t>() - 1);
      EXPECT_LE(tokens.size() + (out[b].finished ? 1 : 0), static_cast<std::size_t>(std::ceil(1.5 * words)));
    }
  }
  evaluation::SearchOptions gnmt;
  gnmt.beam = 3;
  gnmt.length_penalty = evaluation::LengthPenalty::kGnmt;
  gnmt.alpha = 0.7;
  for (const auto& h : evaluation::translate(*model, src, lengths, gnmt)) {
    const double length = static_cast<double>(h.tokens.size() + (h.finished ? 1 : 0));
    EXPECT_NEAR(h.score, h.log_prob / std::pow((5 + length) / 6, 0.7), 1e-12);
  }
}

// run::TrainedModel around a hand-made model: the notebook's word tokenizer and vocabularies.
run::TrainedModel hand_made(models::Seq2Seq model, std::vector<std::vector<std::string>> source_sentences) {
  run::TrainedModel trained;
  trained.source_tokenizer = std::make_unique<data::WordTokenizer>();
  trained.target_tokenizer = std::make_unique<data::WordTokenizer>();
  trained.source_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::build(source_sentences));
  trained.target_vocab = std::make_unique<data::Vocabulary>(data::Vocabulary::build({{"x", "y"}}));
  trained.model = std::move(model);
  trained.weights = "hand-made";
  return trained;
}

// local-m with window 0 attends to exactly position t at step t, and an output layer that always
// says <unk> makes every output token <unk>: replacement copies the source word by word.
TEST(UnknownReplacementTest, EachUnkTakesTheSourceWordItAttendsTo) {
  AttentionConfig attention;
  attention.kind = AttentionKind::kLocalMonotonic;
  attention.window = 0;
  torch::manual_seed(2);
  models::Seq2Seq model(models::Seq2SeqOptions(8, 6).embed_size(4).hidden_size(4).attention(attention));
  {
    torch::NoGradGuard no_grad;
    model->decoder->fc->weight().zero_();
    model->decoder->fc->bias.zero_();
    model->decoder->fc->bias[data::Vocabulary::kUnk] = 10.0;
  }
  model->eval();
  run::TrainedModel trained = hand_made(model, {{"one", "two", "three", "four"}});
  evaluation::Translator translator(trained);
  evaluation::SearchOptions options;
  options.max_len = 3;
  const auto plain = translator.translate({"one two three four"}, options);
  EXPECT_EQ(plain[0].text, "<unk> <unk> <unk>");
  options.unk_replace = true;
  EXPECT_EQ(translator.translate({"one two three four"}, options)[0].text, "one two three");
  const std::string dictionary = (std::filesystem::temp_directory_path() / "luong_unk_dictionary.tsv").string();
  std::ofstream(dictionary) << "two\t٢\n";
  options.dictionary = dictionary;
  EXPECT_EQ(translator.translate({"one two three four"}, options)[0].text, "one ٢ three");
  std::filesystem::remove(dictionary);
}

TEST(EnsembleTest, AnEnsembleOfOneModelTwiceIsThatModel) {
  models::Seq2Seq model = peaked_model(AttentionKind::kGlobal, DecoderKind::kLuong, torch::kDouble);
  const auto [src, lengths] = sentences();
  for (const int64_t beam : {1, 4}) {
    evaluation::SearchOptions options;
    options.beam = beam;
    evaluation::Scorer one({model.get()}), twice({model.get(), model.get()});
    const auto a = evaluation::search(one, src, lengths, options), b = evaluation::search(twice, src, lengths, options);
    for (std::size_t s = 0; s < a.size(); ++s) {
      EXPECT_EQ(a[s][0].tokens, b[s][0].tokens) << "beam " << beam << " sentence " << s;
      EXPECT_NEAR(a[s][0].log_prob, b[s][0].log_prob, 1e-10);
    }
  }
}

// ---- readable output ------------------------------------------------------------------------------

TEST(DetokenizerTest, PunctuationNumbersAndCasing) {
  const data::Truecaser truecaser = data::Truecaser::build({"Where is Tom?", "I think Tom is in Paris.", "Yes, I do."});
  const data::WordTokenizer words(std::make_shared<const data::Truecaser>(truecaser));
  EXPECT_EQ(words.decode(words.encode("tom is in paris , i think .")), "Tom is in Paris, I think.");
  EXPECT_EQ(words.decode({"it", "costs", "3", ".", "5", "%", "(", "about", ")", "!"}), "It costs 3.5% (about)!");
  EXPECT_EQ(words.decode({"هل", "أنت", "مشغول", "؟"}), "هل أنت مشغول؟");
  const data::WordTokenizer plain;
  EXPECT_EQ(plain.decode({"tom", "said", "\"", "no", "\"", "."}), "tom said \"no\".");
}

}  // namespace
}  // namespace luong
