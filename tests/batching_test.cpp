#include "luong/data_pipeline/batching.h"

#include <gtest/gtest.h>

#include "luong/data_pipeline/vocabulary.h"

namespace luong::data {
namespace {

std::vector<EncodedPair> pairs() {
  return {{{4, 5, 2}, {7}, 1}, {{4, 2}, {7, 8, 9}, 2}, {{6, 6, 6, 6, 2}, {8, 8}, 3}};
}

TEST(BatchingTest, ShapesPaddingAndSpecialTokens) {
  const auto p = pairs();
  const Batch batch = make_batch({&p[0], &p[1], &p[2]});
  EXPECT_EQ(batch.src.sizes(), (torch::IntArrayRef{3, 5}));
  EXPECT_EQ(batch.dec_in.sizes(), (torch::IntArrayRef{3, 4}));
  EXPECT_EQ(batch.dec_tgt.sizes(), (torch::IntArrayRef{3, 4}));
  EXPECT_TRUE(batch.src_lengths.equal(torch::tensor({3, 2, 5}, torch::kLong)));
  EXPECT_TRUE(batch.src[0].equal(torch::tensor({4, 5, 2, 0, 0}, torch::kLong)));
  EXPECT_TRUE(batch.dec_in[1].equal(torch::tensor({1, 7, 8, 9}, torch::kLong)));
  EXPECT_TRUE(batch.dec_tgt[1].equal(torch::tensor({7, 8, 9, 2}, torch::kLong)));
  EXPECT_TRUE(batch.dec_tgt[0].equal(torch::tensor({7, 2, 0, 0}, torch::kLong)));
  EXPECT_TRUE(batch.target_rows.equal(torch::tensor({0, 1, 4, 5, 6, 7, 8, 9, 10}, torch::kLong)));
  EXPECT_EQ(batch.lines, (std::vector<std::size_t>{1, 2, 3}));
}

TEST(BatchingTest, CountsTheTargetTokensAtEachStep) {
  const auto p = pairs();  // targets + <eos>: 2, 4 and 3 steps
  EXPECT_EQ(make_batch({&p[0], &p[1], &p[2]}).tokens_at_step, (std::vector<std::int64_t>{3, 3, 2, 1}));
  EXPECT_EQ(make_batch({&p[2], &p[0]}).tokens_at_step, (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ(target_tokens_at_each_step({&p[1]}), (std::vector<std::int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(target_tokens({&p[0], &p[1], &p[2]}), 3 + 3 + 2 + 1);
  EXPECT_EQ(target_tokens({}), 0);
  EXPECT_TRUE(target_tokens_at_each_step({}).empty());
  EXPECT_EQ(make_batch({}).tokens_at_step, (std::vector<std::int64_t>{0}));  // dec_tgt's one empty step
}

TEST(BatchingTest, SentenceBatchesKeepOrderWithoutShuffle) {
  BatchingOptions options;
  options.batch_size = 2;
  const auto batches = make_batches(pairs(), options);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].lines, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(batches[1].src.size(0), 1);
}

TEST(BatchingTest, ShuffleIsDeterministicAndCoversEverything) {
  std::vector<EncodedPair> many;
  for (std::size_t i = 0; i < 100; ++i) many.push_back({{4, 2}, {5}, i + 1});
  BatchingOptions options;
  options.batch_size = 7;
  options.shuffle = true;
  options.seed = 3;
  const auto a = make_batches(many, options);
  const auto b = make_batches(many, options);
  std::vector<std::size_t> seen;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].lines, b[i].lines);
    seen.insert(seen.end(), a[i].lines.begin(), a[i].lines.end());
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 100u);
  EXPECT_EQ(seen.front(), 1u);
  EXPECT_EQ(seen.back(), 100u);
  EXPECT_NE(a[0].lines, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(BatchingTest, TokenBatchesRespectTheBudget) {
  std::vector<EncodedPair> many;
  for (std::size_t i = 0; i < 40; ++i) many.push_back({std::vector<std::int64_t>(1 + i % 9, 4), {5, 5}, i + 1});
  BatchingOptions options;
  options.batch_size = 40;
  options.by_tokens = true;
  options.bucket = true;
  std::size_t rows = 0;
  for (const auto& batch : make_batches(many, options)) {
    EXPECT_LE(batch.src.size(0) * std::max(batch.src.size(1), batch.dec_in.size(1)), 40);
    rows += static_cast<std::size_t>(batch.src.size(0));
  }
  EXPECT_EQ(rows, 40u);
}

}  // namespace
}  // namespace luong::data
