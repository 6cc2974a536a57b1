#include "luong/models/state_dict.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "luong/models/seq2seq.h"
#include "luong/util/error.h"
#include "test_paths.h"

namespace luong::models {
namespace {

namespace fs = std::filesystem;

Seq2Seq small_model(AttentionKind kind = AttentionKind::kLocalPredictive) {
  AttentionConfig attention;
  attention.kind = kind;
  attention.score = ScoreKind::kConcat;
  return Seq2Seq(Seq2SeqOptions(10, 12).embed_size(3).hidden_size(4).attention(attention));
}

std::string temp(const std::string& name) { return (fs::temp_directory_path() / name).string(); }

bool same_parameters(const torch::nn::Module& a, const torch::nn::Module& b) {
  const StateDict x = state_dict(a), y = state_dict(b);
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || !x[i].second.equal(y[i].second)) return false;
  }
  return true;
}

TEST(StateDictTest, NamesFollowTheNotebook) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state_dict(*small_model())) names.push_back(name);
  for (const char* expected :
       {"encoder.embedding.weight", "encoder.gru.weight_ih_l0", "encoder.gru.bias_hh_l0", "decoder.embedding.weight",
        "decoder.gru.weight_hh_l0", "decoder.attention.position_predictor.weight",
        "decoder.attention.position_weights.bias", "decoder.attention.score.Wa.weight", "decoder.Wc.weight",
        "decoder.fc.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

TEST(StateDictTest, CppRoundTrip) {
  torch::manual_seed(0);
  Seq2Seq a = small_model();
  Seq2Seq b = small_model();
  const std::string path = temp("luong_sd_roundtrip.pt");
  save_state_dict(state_dict(*a), path);
  EXPECT_FALSE(same_parameters(*a, *b));
  load_state_dict(*b, read_state_dict(path, test::kStateDictBytes), path);
  EXPECT_TRUE(same_parameters(*a, *b));
  fs::remove(path);
}

TEST(StateDictTest, CppToPythonToCpp) {
  ASSERT_EQ(std::system((test::python() + " -c 'import torch' >/dev/null 2>&1").c_str()), 0) << test::python() << " cannot import torch";
  torch::manual_seed(1);
  Seq2Seq model = small_model();
  const std::string cpp_path = temp("luong_sd_cpp.pt");
  const std::string py_path = temp("luong_sd_py.pt");
  save_state_dict(state_dict(*model), cpp_path);
  // Python reads our file and writes an OrderedDict (like model.state_dict()) with every tensor doubled.
  const std::string command = test::python() + " -c \"import torch, collections; d = torch.load('" + cpp_path +
                              "'); torch.save(collections.OrderedDict((k, v * 2) for k, v in d.items()), '" + py_path +
                              "')\"";
  ASSERT_EQ(std::system(command.c_str()), 0);
  Seq2Seq loaded = small_model();
  load_state_dict(*loaded, read_state_dict(py_path, test::kStateDictBytes), py_path);
  const StateDict original = state_dict(*model), doubled = state_dict(*loaded);
  for (std::size_t i = 0; i < original.size(); ++i) {
    EXPECT_TRUE(doubled[i].second.equal(original[i].second * 2)) << original[i].first;
  }
  fs::remove(cpp_path);
  fs::remove(py_path);
}

TEST(StateDictTest, PythonStateDictImports) {
  // notebook_parity.pt was written by Python's torch.save of an OrderedDict (with _metadata-free
  // entries); the parity tests load it into models.
  const StateDict dict = read_state_dict(test::fixture("notebook_parity.pt"), test::kStateDictBytes);
  EXPECT_EQ(dict.size(), 28u);
  EXPECT_EQ(dict[0].first, "dot.query");
  EXPECT_EQ(dict[0].second.sizes(), (torch::IntArrayRef{3, 8}));
}

TEST(StateDictTest, MismatchedModelListsEveryKey) {
  Seq2Seq local_p = small_model(AttentionKind::kLocalPredictive);
  Seq2Seq global = small_model(AttentionKind::kGlobal);
  Seq2Seq bigger(Seq2SeqOptions(10, 13).embed_size(3).hidden_size(4));
  const StateDict dict = state_dict(*local_p);
  try {
    load_state_dict(*global, dict, "model.pt");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unexpected: decoder.attention.position_predictor.weight"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  try {
    load_state_dict(*bigger, state_dict(*global), "model.pt");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("mis-shaped: decoder.embedding.weight [12, 3] vs model [13, 3]"),
              std::string::npos)
        << e.what();
  }
}

TEST(StateDictTest, CorruptAndTruncatedFilesAreCheckpointErrors) {
  const std::string path = temp("luong_sd_corrupt.pt");
  save_state_dict(state_dict(*small_model()), path);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, bytes.size() / 2, bytes.size() - 5}) {
    std::vector<char> truncated(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(parse_state_dict(truncated, "cut"), CheckpointError) << "cut at " << cut;
  }
  std::vector<char> garbage(bytes.size(), 'x');
  EXPECT_THROW(parse_state_dict(garbage, "garbage"), CheckpointError);
  EXPECT_THROW(read_state_dict(temp("does_not_exist.pt"), test::kStateDictBytes), CheckpointError);
  fs::remove(path);
}

}  // namespace
}  // namespace luong::models
