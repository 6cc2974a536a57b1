#include "luong/util/json.h"

#include <gtest/gtest.h>

#include "luong/run/train_config.h"
#include "luong/util/error.h"

namespace luong {
namespace {

TEST(JsonTest, RoundTripKeepsKeyOrderAndExactIntegers) {
  Json j = {{"name", "مرحبا \"quoted\"\n"}, {"n", 3}, {"big", std::int64_t{9007199254740993}}, {"x", 0.1}, {"ok", true}};
  j["list"] = Json::array({1, nullptr});
  const Json back = parse_json(dump_json(j, 2), "test");
  EXPECT_EQ(back.at("name").get<std::string>(), "مرحبا \"quoted\"\n");
  EXPECT_EQ(back.at("big").get<std::int64_t>(), 9007199254740993);  // 2^53 + 1: a double would round it
  EXPECT_EQ(back.at("x").get<double>(), 0.1);
  EXPECT_EQ(back.begin().key(), "name");
  EXPECT_EQ(dump_json(back), dump_json(j));
}

TEST(JsonTest, MalformedInputIsOneLineError) {
  // 1E39861159 overflows a double: nlohmann throws out_of_range, not parse_error (a fuzz finding).
  for (const char* text : {"{", "{\"a\" 1}", "[1,]", "tru", "{\"a\":1} x", "\"unterminated", "{\"epoch\": 1E39861159}"}) {
    try {
      parse_json(text, "file.json");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("file.json: invalid JSON", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(TrainConfigTest, JsonRoundTripAndValidation) {
  run::TrainConfig config;
  config.data = "corpus.tsv";
  config.attention = run::AttentionChoice::kLocalPredictive;
  config.window = 3;
  config.seed = 42;
  const run::TrainConfig back = run::TrainConfig::from_json(config.to_json(), "test");
  EXPECT_EQ(dump_json(back.to_json()), dump_json(config.to_json()));
  EXPECT_NO_THROW(back.validate());
  config.window = 0;
  EXPECT_THROW(config.validate(), Error);
  config.window = 3;
  config.precision = models::Precision::kBFloat16;
  EXPECT_NO_THROW(config.validate());
  config.dtype = run::DType::kFloat64;  // bf16 products need float32 master weights
  try {
    config.validate();
    ADD_FAILURE() << "bf16 with float64 weights validated";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--precision bf16 needs --dtype float32 (the master weights)");
  }
}

// A config.json with an unknown key, a wrong type or a value out of range: one line naming the key.
TEST(TrainConfigTest, BadConfigNamesTheKey) {
  const struct {
    Json json;
    const char* expected;
  } cases[] = {
      {{{"unknown_key", 1}}, "config.json: unknown key 'unknown_key'"},
      {{{"hidden", "64"}}, "config.json: key 'hidden': expected an integer"},
      {{{"hidden", 0}}, "config.json: key 'hidden': 0 is outside [1, 65536]"},
      {{{"dropout", 1.5}}, "config.json: key 'dropout': 1.5 is outside [0, 1)"},
      {{{"threads", -1}}, "config.json: key 'threads': -1 is outside [0, 1024]"},
      {{{"lr", 0}}, "config.json: key 'lr': 0 is outside (0, 1e+38]"},
      {{{"attention", "cosine"}}, "config.json: key 'attention': 'cosine' is not one of dot, general, concat"},
      {{{"epochs", 1e30}}, "config.json: key 'epochs': expected an integer"},
      {{{"seed", Json::parse("1180591620717411303424")}}, "config.json: key 'seed': expected an integer"},
      {{{"reverse", 1}}, "config.json: key 'reverse': expected true or false"},
      {{{"precision", "fp16"}}, "config.json: key 'precision': 'fp16' is not one of float32 or bf16"},
  };
  for (const auto& c : cases) {
    try {
      run::TrainConfig::from_json(c.json, "config.json");
      ADD_FAILURE() << dump_json(c.json);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.expected, 0), 0u) << e.what();
    }
  }
}

// The options table is the one declaration: every member has a key, the defaults round-trip and
// --resume's rules come from it.
TEST(TrainConfigTest, TableDrivesKeysAndResumeRules) {
  run::TrainConfig a;
  int options = 0, may_change = 0;
  run::TrainConfig::visit(a, [&](const options::Info& info, const auto&) {
    ++options;
    may_change += info.on_resume == options::OnResume::kMayChange;
    EXPECT_TRUE(a.to_json().contains(info.key)) << info.key;
  });
  EXPECT_EQ(static_cast<int>(a.to_json().size()), options);
  EXPECT_EQ(may_change, 17);  // epochs, profile_steps, max_time, precision, cuda_graphs, cuda_graph_padding,
                              // overlap_below_hidden, lr, clip, patience, out, device, threads, deterministic,
                              // float32_products, panel_products, step_teams
  run::TrainConfig b = a;
  b.hidden = 128;
  b.lr = 0.5;
  const auto changes = options::differences(a, b);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_STREQ(changes[0].info->key, "hidden");
  EXPECT_EQ(changes[0].info->on_resume, options::OnResume::kFixed);
  EXPECT_EQ(changes[1].from, "0.001");
  EXPECT_EQ(changes[1].to, "0.5");
}

// The runtime options a training hands to apply_runtime are the table's, every one of them
// (runtime() once copied three by hand and left --float32-products, --panel-products and
// --no-step-teams behind), and a follower rank's own runtime goes back into rank 0's configuration.
TEST(TrainConfigTest, RuntimeOptionsAreTheTablesSubsetBothWays) {
  run::TrainConfig config;
  config.device = "cuda:1";
  config.threads = 3;
  config.deterministic = true;
  config.float32_products = models::Float32Products::kMkl;
  config.panel_products = models::PanelProducts::kOff;
  config.step_teams = false;
  const run::RuntimeOptions runtime = config.runtime();
  EXPECT_EQ(options::differences(runtime, run::RuntimeOptions{}).size(), options::option_count<run::RuntimeOptions>());
  const Json whole = config.to_json(), part = options::to_json(runtime);
  for (const auto& item : part.items()) EXPECT_EQ(item.value(), whole.at(item.key())) << item.key();
  run::TrainConfig main_rank;
  main_rank.hidden = 512;
  options::assign_subset(main_rank, runtime);
  EXPECT_EQ(main_rank.to_json()["panel_products"], "off");
  EXPECT_EQ(main_rank.hidden, 512);
  EXPECT_EQ(options::differences(main_rank.runtime(), runtime).size(), 0u);
}

}  // namespace
}  // namespace luong
