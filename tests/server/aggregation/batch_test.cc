// AccumulateBatch must be indistinguishable from Accumulate called on each update in order: the
// same verdicts, the same counters and bit-identical models.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::MakeModel;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::Values;
using ::fedsched::testing::Weighted;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Values with plenty of rounding, so that any change of operation order would show.
v1::Model Update(int seed, int size, bool reversed = false) {
  std::vector<float> a(size);
  std::vector<float> b(3);
  uint32_t state = 977u * static_cast<uint32_t>(seed) + 1u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.37f;
  };
  for (float& x : a) x = next();
  for (float& x : b) x = next();
  if (reversed) return MakeModel({{"b", {3}, b}, {"a", {size}, a}});
  return MakeModel({{"a", {size}, a}, {"b", {3}, b}});
}

v1::Model GlobalOf(int size) {
  return MakeModel({{"a", {size}, std::vector<float>(size, 0.5f)}, {"b", {3}, {1, 2, 3}}});
}

struct Outcome {
  std::vector<absl::StatusCode> codes;
  int64_t updates;
  int64_t examples;
  std::vector<float> a;
  std::vector<float> b;
};

Outcome RunRound(v1::AggregationRule rule, int size,
                 const std::vector<Aggregator::WeightedUpdate>& in, bool batched,
                 double clip = 0.0) {
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_clip_update_norm(clip);
  absl::StatusOr<std::unique_ptr<Aggregator>> agg = Aggregator::Create(config, GlobalOf(size));
  EXPECT_THAT(agg, IsOk());
  Outcome out;
  if (batched) {
    for (const absl::Status& s : (*agg)->AccumulateBatch(in)) out.codes.push_back(s.code());
  } else {
    for (const Aggregator::WeightedUpdate& u : in) {
      out.codes.push_back((*agg)->Accumulate(*u.delta, u.num_examples, u.staleness).code());
    }
  }
  out.updates = (*agg)->num_updates();
  out.examples = (*agg)->total_examples();
  absl::StatusOr<v1::Model> next = (*agg)->Finalize(GlobalOf(size));
  EXPECT_THAT(next, IsOk());
  if (next.ok()) {
    out.a = Values(*next, "a");
    out.b = Values(*next, "b");
  }
  return out;
}

void ExpectSame(const Outcome& batched, const Outcome& sequential) {
  EXPECT_EQ(batched.codes, sequential.codes);
  EXPECT_EQ(batched.updates, sequential.updates);
  EXPECT_EQ(batched.examples, sequential.examples);
  ASSERT_EQ(batched.a.size(), sequential.a.size());
  for (size_t i = 0; i < batched.a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(batched.a[i]), std::bit_cast<uint32_t>(sequential.a[i])) << i;
  }
  EXPECT_EQ(batched.b, sequential.b);
}

TEST(AccumulateBatchTest, ValidUpdatesAreBitIdenticalToSequential) {
  constexpr int kSize = 1001;
  std::vector<v1::Model> models;
  for (int i = 0; i < 19; ++i) models.push_back(Update(i, kSize, /*reversed=*/i % 3 == 1));
  std::vector<Aggregator::WeightedUpdate> in;
  for (int i = 0; i < 19; ++i) in.push_back(Weighted(&models[i], 1 + 7 * i, i % 4));
  for (v1::AggregationRule rule : {v1::AGGREGATION_RULE_FEDAVG, v1::AGGREGATION_RULE_FEDADAM,
                                   v1::AGGREGATION_RULE_TRIMMED_MEAN}) {
    SCOPED_TRACE(v1::AggregationRule_Name(rule));
    ExpectSame(RunRound(rule, kSize, in, true), RunRound(rule, kSize, in, false));
  }
}

// The server hands in the sums of squares its norm screen computed: clipping with
// them must give the bits and verdicts of clipping with its own, a non-finite tensor included.
TEST(AccumulateBatchTest, GivenSumsOfSquaresClipLikeComputedOnes) {
  constexpr int kSize = 1001;
  std::vector<v1::Model> models;
  for (int i = 0; i < 11; ++i) models.push_back(Update(i, kSize, /*reversed=*/i % 3 == 1));
  models[5].mutable_tensors(0)->set_data(17, kNaN);  // tensor "a" (not reversed)
  std::vector<std::vector<double>> sums;
  for (const v1::Model& m : models) sums.push_back(Aggregator::TensorSumSquares(m));
  EXPECT_TRUE(std::isnan(sums[5][0]));
  std::vector<Aggregator::WeightedUpdate> given;
  std::vector<Aggregator::WeightedUpdate> own;
  for (int i = 0; i < 11; ++i) {
    given.push_back({&models[i], 1 + 5 * i, 0, sums[static_cast<size_t>(i)]});
    own.push_back(Weighted(&models[i], 1 + 5 * i, 0));
  }
  // Norms of these updates are about 0.1 * sqrt(kSize) = 3: a bound of 2 clips every one.
  const Outcome with_sums = RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, given, true, 2.0);
  ExpectSame(with_sums, RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, own, false, 2.0));
  EXPECT_EQ(with_sums.codes[5], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with_sums.updates, 10);
}

TEST(AccumulateBatchTest, BadUpdatesGetTheirOwnVerdictAndLeaveNoTrace) {
  constexpr int kSize = 333;
  std::vector<v1::Model> models;
  for (int i = 0; i < 12; ++i) models.push_back(Update(100 + i, kSize));
  models[2].mutable_tensors(0)->set_data(kSize - 1, kNaN);  // NaN, caught in the fold
  models[5] = MakeModel(
      {{"a", {kSize + 1}, std::vector<float>(kSize + 1)}, {"b", {3}, {0, 0, 0}}});  // shape
  models[9].mutable_tensors(1)->set_data(0, 3e38f);  // overflows with weight 5
  std::vector<Aggregator::WeightedUpdate> in;
  for (int i = 0; i < 12; ++i) in.push_back(Weighted(&models[i], 5, 0));
  in[7].num_examples = 0;  // rejected before the fold
  in[11].staleness = 50;   // too stale
  const Outcome batched = RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, in, true);
  ExpectSame(batched, RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, in, false));
  EXPECT_EQ(batched.updates, 7);
  EXPECT_EQ(batched.codes[2], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batched.codes[5], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batched.codes[7], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batched.codes[9], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batched.codes[11], absl::StatusCode::kFailedPrecondition);
}

// With the norm screen's sums of squares every fold that provably cannot overflow runs in place
// (one running-sum buffer, not two); the model must keep the bits of the double-buffered
// sequential folds, in groups of any size.
TEST(AccumulateBatchTest, GivenSumsFoldInPlaceWithTheSameBits) {
  constexpr int kSize = 1001;
  std::vector<v1::Model> models;
  for (int i = 0; i < 19; ++i) models.push_back(Update(i, kSize, /*reversed=*/i % 3 == 1));
  std::vector<std::vector<double>> sums;
  for (const v1::Model& m : models) sums.push_back(Aggregator::TensorSumSquares(m));
  std::vector<Aggregator::WeightedUpdate> given;
  std::vector<Aggregator::WeightedUpdate> own;
  for (int i = 0; i < 19; ++i) {
    given.push_back({&models[i], 1 + 7 * i, i % 4, sums[static_cast<size_t>(i)]});
    own.push_back(Weighted(&models[i], 1 + 7 * i, i % 4));
  }
  const Outcome sequential = RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, own, false);
  ExpectSame(RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, given, true), sequential);
  // Batches of 1, 2, ... updates, as a server folds whatever is waiting.
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(v1::AggregationConfig(), GlobalOf(kSize)));
  size_t next = 0;
  for (size_t b = 1; next < given.size(); ++b) {
    const size_t end = std::min(given.size(), next + b);
    for (const absl::Status& s :
         agg->AccumulateBatch(absl::MakeConstSpan(given).subspan(next, end - next))) {
      EXPECT_OK(s);
    }
    next = end;
    EXPECT_EQ(agg->sum_buffers_held(), 1);
  }
  ASSERT_OK_AND_ASSIGN(v1::Model model, agg->Finalize(GlobalOf(kSize)));
  EXPECT_EQ(agg->sum_buffers_held(), 0);
  Outcome grouped{sequential.codes, 19, sequential.examples, Values(model, "a"),
                  Values(model, "b")};
  ExpectSame(grouped, sequential);
  // Without the sums (Accumulate), every fold after the first is double-buffered, as before.
  ASSERT_OK_AND_ASSIGN(auto plain, Aggregator::Create(v1::AggregationConfig(), GlobalOf(kSize)));
  EXPECT_OK(plain->Accumulate(models[0], 3));
  EXPECT_EQ(plain->sum_buffers_held(), 1);
  EXPECT_OK(plain->Accumulate(models[1], 3));
  EXPECT_EQ(plain->sum_buffers_held(), 2);
}

// Updates the bound cannot vouch for (a NaN, an overflow, values near float32's range) go through
// the spare buffer: the same verdicts, no trace of the rejected ones, the same bits.
TEST(AccumulateBatchTest, GivenSumsOfUnsafeUpdatesFallBackToTheSpare) {
  constexpr int kSize = 333;
  std::vector<v1::Model> models;
  for (int i = 0; i < 24; ++i) models.push_back(Update(200 + i, kSize));
  models[2].mutable_tensors(0)->set_data(kSize - 1, kNaN);
  models[9].mutable_tensors(1)->set_data(0, 3e38f);  // overflows with weight 5
  // 1e35 each: the running bound passes 2^120 (1.3e36) after a few, but the sum never overflows.
  for (int i = 12; i < 24; ++i) models[i].mutable_tensors(1)->set_data(1, 1e35f);
  std::vector<std::vector<double>> sums;
  for (const v1::Model& m : models) sums.push_back(Aggregator::TensorSumSquares(m));
  std::vector<Aggregator::WeightedUpdate> given;
  std::vector<Aggregator::WeightedUpdate> own;
  for (int i = 0; i < 24; ++i) {
    given.push_back({&models[i], 5, 0, sums[static_cast<size_t>(i)]});
    own.push_back(Weighted(&models[i], 5, 0));
  }
  const Outcome batched = RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, given, true);
  ExpectSame(batched, RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, own, false));
  EXPECT_EQ(batched.updates, 22);
  EXPECT_EQ(batched.codes[2], absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batched.codes[9], absl::StatusCode::kInvalidArgument);
  // One at a time: the in-place folds stop once the bound passes 2^120.
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(v1::AggregationConfig(), GlobalOf(kSize)));
  for (int i = 12; i < 24; ++i) {
    EXPECT_OK(agg->AccumulateBatch(absl::MakeConstSpan(given).subspan(i, 1))[0]);
    EXPECT_EQ(agg->sum_buffers_held(), i < 14 ? 1 : 2) << i;
  }
}

TEST(AccumulateBatchTest, ExampleCountOverflowCountsEarlierUpdatesOfTheBatch) {
  std::vector<v1::Model> models = {Update(1, 4), Update(2, 4), Update(3, 4)};
  std::vector<Aggregator::WeightedUpdate> in = {
      Weighted(&models[0], std::numeric_limits<int64_t>::max() / 2 + 1, 0),
      Weighted(&models[1], std::numeric_limits<int64_t>::max() / 2 + 1, 0),
      Weighted(&models[2], 3, 0)};
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(v1::AggregationConfig(), GlobalOf(4)));
  std::vector<absl::Status> status = agg->AccumulateBatch(in);
  EXPECT_OK(status[0]);
  EXPECT_THAT(status[1], StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflow")));
  EXPECT_OK(status[2]);
  EXPECT_EQ(agg->num_updates(), 2);
}

TEST(AccumulateBatchTest, LargeModelAndEmptyBatch) {
  constexpr int kSize = 3'000'000;  // streaming-sized running sum
  std::vector<v1::Model> models = {Update(7, kSize), Update(8, kSize, true), Update(9, kSize)};
  std::vector<Aggregator::WeightedUpdate> in = {
      Weighted(&models[0], 3, 0), Weighted(&models[1], 1, 2), Weighted(&models[2], 9, 0)};
  ExpectSame(RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, in, true),
             RunRound(v1::AGGREGATION_RULE_FEDAVG, kSize, in, false));
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(v1::AggregationConfig(), GlobalOf(kSize)));
  EXPECT_TRUE(agg->AccumulateBatch({}).empty());
  EXPECT_EQ(agg->num_updates(), 0);
}

}  // namespace
}  // namespace fedsched
