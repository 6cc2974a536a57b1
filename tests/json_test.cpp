#include "luong/util/json.h"

#include <gtest/gtest.h>

#include "luong/training/train_config.h"
#include "luong/util/error.h"

namespace luong {
namespace {

TEST(JsonTest, RoundTrip) {
  Json j = Json::object();
  j.set("name", "مرحبا \"quoted\"\n");
  j.set("n", 3);
  j.set("x", 0.1);
  j.set("ok", true);
  Json list = Json::array();
  list.push_back(1);
  list.push_back(Json());
  j.set("list", list);
  const Json back = Json::parse(j.dump(2));
  EXPECT_EQ(back.at("name").as_string(), "مرحبا \"quoted\"\n");
  EXPECT_EQ(back.at("n").as_int(), 3);
  EXPECT_EQ(back.at("x").as_number(), 0.1);
  EXPECT_TRUE(back.at("ok").as_bool());
  EXPECT_EQ(back.at("list").items().size(), 2u);
  EXPECT_EQ(back.dump(), j.dump());
}

TEST(JsonTest, MalformedInputIsAnError) {
  for (const char* text : {"{", "{\"a\" 1}", "[1,]", "tru", "{\"a\":1} x", "\"unterminated"}) {
    EXPECT_THROW(Json::parse(text), Error) << text;
  }
}

TEST(TrainConfigTest, JsonRoundTripAndValidation) {
  training::TrainConfig config;
  config.data = "corpus.tsv";
  config.attention = "local-p";
  config.window = 3;
  config.seed = 42;
  const training::TrainConfig back = training::TrainConfig::from_json(config.to_json(), "test");
  EXPECT_EQ(back.to_json().dump(), config.to_json().dump());
  EXPECT_NO_THROW(back.validate());
  Json bad = config.to_json();
  bad.set("unknown_key", 1);
  EXPECT_THROW(training::TrainConfig::from_json(bad, "test"), Error);
  config.attention = "cosine";
  EXPECT_THROW(config.validate(), Error);
  config.attention = "local-p";
  config.window = 0;
  EXPECT_THROW(config.validate(), Error);
}

}  // namespace
}  // namespace luong
