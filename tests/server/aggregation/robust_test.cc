// Robust rules: hand-computed values and resistance to one adversarial update
// (docs/ALGORITHMS.md §5: trimmed mean, median, Krum / Multi-Krum).
#include "server/aggregation/robust.h"

#include <cmath>
#include <cstdint>
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
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

v1::Model Zero() { return MakeModel({{"w", {1}, {0}}}); }
v1::Model Scalar(float x) { return MakeModel({{"w", {1}, {x}}}); }

std::unique_ptr<Aggregator> MakeRobust(v1::AggregationRule rule, int f = 0, int m = 0) {
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_krum_byzantine(f);
  config.set_multi_krum_m(m);
  absl::StatusOr<std::unique_ptr<Aggregator>> agg = Aggregator::Create(config, Zero());
  EXPECT_THAT(agg, IsOk());
  return std::move(*agg);
}

float AggregateScalars(Aggregator& agg, const std::vector<float>& xs) {
  for (float x : xs) EXPECT_OK(agg.Accumulate(Scalar(x), 1));
  absl::StatusOr<v1::Model> next = agg.Finalize(Zero());
  EXPECT_OK(next.status());
  return next.ok() ? Values(*next, "w")[0] : NAN;
}

TEST(TrimmedMeanTest, HandComputed) {
  // K = 5, beta 0.2 -> drop 1 each side: mean(2, 3, 4) = 3.
  auto agg = MakeRobust(v1::AGGREGATION_RULE_TRIMMED_MEAN);
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {100, 2, -50, 4, 3}), 3.0f);
  // K = 4 -> floor(0.8) = 0 trimmed: the plain mean.
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {1, 2, 3, 10}), 4.0f);
  // K = 10 -> drop 2 each side.
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {-9, -8, 1, 2, 3, 4, 5, 6, 90, 99}), 3.5f);
}

TEST(TrimmedMeanTest, KernelWorksPerCoordinate) {
  std::vector<float> a = {1, 10, 5};
  std::vector<float> b = {2, 20, 5};
  std::vector<float> c = {3, -30, 5};
  std::vector<float> out(3);
  aggregation_internal::TrimmedMean({a.data(), b.data(), c.data()}, 3, 0.34, out.data());
  EXPECT_THAT(out, ElementsAre(2.0f, 10.0f, 5.0f));
}

TEST(MedianTest, HandComputedOddAndEven) {
  auto agg = MakeRobust(v1::AGGREGATION_RULE_MEDIAN);
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {100, 1, 3, 2, -7}), 2.0f);
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {100, 1, 3, 2}), 2.5f);
  EXPECT_FLOAT_EQ(AggregateScalars(*agg, {42}), 42.0f);
}

TEST(MedianTest, IgnoresExampleWeights) {
  auto agg = MakeRobust(v1::AGGREGATION_RULE_MEDIAN);
  ASSERT_OK(agg->Accumulate(Scalar(1), 1));
  ASSERT_OK(agg->Accumulate(Scalar(2), 1));
  ASSERT_OK(agg->Accumulate(Scalar(1000), 1000000));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Zero()));
  EXPECT_THAT(Values(next, "w"), ElementsAre(2.0f));
}

// Updates 0, 1, 2, 100, 3 with f = 1: each score sums the K - f - 2 = 2 smallest squared
// distances: 0 -> 1 + 4 = 5; 1 -> 1 + 1 = 2; 2 -> 1 + 1 = 2; 100 -> 97^2 + 98^2; 3 -> 1 + 4 = 5.
TEST(KrumTest, HandComputed) {
  auto krum = MakeRobust(v1::AGGREGATION_RULE_KRUM, /*f=*/1);
  EXPECT_FLOAT_EQ(AggregateScalars(*krum, {0, 1, 2, 100, 3}), 1.0f);  // tie 1 vs 2: first
  std::vector<float> u[5] = {{0}, {1}, {2}, {100}, {3}};
  std::vector<const float*> ptrs;
  for (auto& x : u) ptrs.push_back(x.data());
  EXPECT_THAT(aggregation_internal::KrumSelect(ptrs, 1, 1, 5), ElementsAre(1, 2, 0, 4, 3));
}

TEST(MultiKrumTest, HandComputed) {
  // m = 3: updates 1, 2, 0 -> mean 1.  Default m = K - f = 4: 1, 2, 0, 3 -> 1.5.
  auto three = MakeRobust(v1::AGGREGATION_RULE_MULTI_KRUM, /*f=*/1, /*m=*/3);
  EXPECT_FLOAT_EQ(AggregateScalars(*three, {0, 1, 2, 100, 3}), 1.0f);
  auto by_default = MakeRobust(v1::AGGREGATION_RULE_MULTI_KRUM, /*f=*/1);
  EXPECT_FLOAT_EQ(AggregateScalars(*by_default, {0, 1, 2, 100, 3}), 1.5f);
}

// Flower's aggregate_krum: max(1, K - f - 2) neighbours, so rounds smaller than 2f + 3 work.
TEST(KrumTest, SmallRoundsUseAtLeastOneNeighbour) {
  // f = 2, K = 4: one neighbour; scores 1, 1, 1, 49 -> the first of the ties.
  auto krum = MakeRobust(v1::AGGREGATION_RULE_KRUM, /*f=*/2);
  EXPECT_FLOAT_EQ(AggregateScalars(*krum, {1, 2, 3, 10}), 1.0f);
  // K = 1 and K = 2 are rounds too.
  EXPECT_FLOAT_EQ(AggregateScalars(*krum, {7}), 7.0f);
  EXPECT_FLOAT_EQ(AggregateScalars(*krum, {4, 5}), 4.0f);
}

// krum_byzantine has presence: an explicit 0 (Flower's default) is not replaced by 1.
TEST(KrumTest, ExplicitZeroByzantineIsKept) {
  // f = 0, K = 5: three neighbours; 10 -> 105, 11 -> 83, 12 -> 69 (f = 1: 5, 2, 5).
  auto zero = MakeRobust(v1::AGGREGATION_RULE_KRUM, /*f=*/0);
  EXPECT_EQ(zero->config().krum_byzantine(), 0);
  EXPECT_FLOAT_EQ(AggregateScalars(*zero, {0, 10, 11, 12, 20}), 12.0f);
  v1::AggregationConfig unset;
  unset.set_rule(v1::AGGREGATION_RULE_KRUM);
  ASSERT_OK_AND_ASSIGN(auto by_default, Aggregator::Create(unset, Zero()));
  EXPECT_EQ(by_default->config().krum_byzantine(), 1);
  EXPECT_FLOAT_EQ(AggregateScalars(*by_default, {0, 10, 11, 12, 20}), 11.0f);
}

// Flower's Multi-Krum averages the kept updates weighted by their examples.
TEST(MultiKrumTest, KeptUpdatesAreWeightedByExamples) {
  auto three = MakeRobust(v1::AGGREGATION_RULE_MULTI_KRUM, /*f=*/1, /*m=*/3);
  // Kept: 1 (x1 example), 2 (x3), 0 (x4): (1 + 6 + 0) / 8.
  const float xs[] = {0, 1, 2, 100, 3};
  const int64_t n[] = {4, 1, 3, 1000, 2};
  for (int i = 0; i < 5; ++i) ASSERT_OK(three->Accumulate(Scalar(xs[i]), n[i]));
  ASSERT_OK_AND_ASSIGN(v1::Model next, three->Finalize(Zero()));
  EXPECT_FLOAT_EQ(Values(next, "w")[0], 7.0f / 8.0f);
}

TEST(BufferedRulesTest, MemoryIsBoundedByMaxBufferedUpdates) {
  v1::AggregationConfig config;
  config.set_rule(v1::AGGREGATION_RULE_MEDIAN);
  config.set_max_buffered_updates(3);
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(config, Zero()));
  for (int i = 0; i < 3; ++i) ASSERT_OK(agg->Accumulate(Scalar(i), 1));
  EXPECT_THAT(agg->Accumulate(Scalar(9), 1),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_buffered_updates")));
  EXPECT_EQ(agg->num_updates(), 3);
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Zero()));
  EXPECT_THAT(Values(next, "w"), ElementsAre(1.0f));
  EXPECT_OK(agg->Accumulate(Scalar(9), 1));  // room again after the round closes
}

TEST(BufferedRulesTest, RejectedUpdatesAreNotBuffered) {
  auto agg = MakeRobust(v1::AGGREGATION_RULE_MEDIAN);
  ASSERT_OK(agg->Accumulate(Scalar(1), 1));
  EXPECT_THAT(agg->Accumulate(Scalar(NAN), 1), StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(agg->Accumulate(MakeModel({{"w", {2}, {1, 1}}}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  ASSERT_OK(agg->Accumulate(Scalar(3), 1));
  EXPECT_EQ(agg->num_updates(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Zero()));
  EXPECT_THAT(Values(next, "w"), ElementsAre(2.0f));
}

// ---------------------------------------------------------------------------------------------
// Nine honest updates near 1 (per coordinate 1 +- 0.1, deterministic) and one adversarial update
// of magnitude 1e6 that also claims a huge example count.

constexpr int kDim = 64;

v1::Model Honest(int client) {
  std::vector<float> data(kDim);
  uint32_t state = 12345u + 7919u * static_cast<uint32_t>(client);
  for (float& x : data) {
    state = state * 1664525u + 1013904223u;  // LCG: deterministic on every platform
    x = 1.0f + 0.1f * (static_cast<float>(state >> 8) / 16777216.0f * 2.0f - 1.0f);
  }
  return MakeModel({{"w", {kDim}, data}, {"b", {}, {data[0]}}});
}

v1::Model Adversary() {
  std::vector<float> data(kDim);
  for (int i = 0; i < kDim; ++i) data[i] = (i % 2 == 0) ? 1e6f : -1e6f;
  return MakeModel({{"w", {kDim}, data}, {"b", {}, {1e6f}}});
}

v1::Model ZeroModel() {
  return MakeModel({{"w", {kDim}, std::vector<float>(kDim, 0.0f)}, {"b", {}, {0}}});
}

class AdversaryTest : public ::testing::TestWithParam<v1::AggregationRule> {};

TEST_P(AdversaryTest, OneAdversaryAmongNineHonestCannotMoveTheModel) {
  v1::AggregationConfig config;
  config.set_rule(GetParam());
  config.set_krum_byzantine(1);
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(config, ZeroModel()));
  for (int position : {0, 4, 9}) {  // the adversary arrives first, in the middle, or last
    SCOPED_TRACE(position);
    int honest = 0;
    for (int k = 0; k < 10; ++k) {
      if (k == position) {
        ASSERT_OK(agg->Accumulate(Adversary(), 1000000000));
      } else {
        ASSERT_OK(agg->Accumulate(Honest(honest++), 50 + 10 * k));
      }
    }
    ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(ZeroModel()));
    for (const char* name : {"w", "b"}) {
      for (float x : Values(next, name)) {
        EXPECT_NEAR(x, 1.0f, 0.1f) << name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RobustRules, AdversaryTest,
                         ::testing::Values(v1::AGGREGATION_RULE_TRIMMED_MEAN,
                                           v1::AGGREGATION_RULE_MEDIAN, v1::AGGREGATION_RULE_KRUM,
                                           v1::AGGREGATION_RULE_MULTI_KRUM),
                         [](const auto& info) { return v1::AggregationRule_Name(info.param); });

// The contrast: plain FedAvg is dragged to the adversary.
TEST(AdversaryContrastTest, FedAvgIsNotRobust) {
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(v1::AggregationConfig(), ZeroModel()));
  for (int k = 0; k < 9; ++k) ASSERT_OK(agg->Accumulate(Honest(k), 100));
  ASSERT_OK(agg->Accumulate(Adversary(), 100));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(ZeroModel()));
  EXPECT_GT(std::fabs(Values(next, "w")[0]), 1e4f);
}

}  // namespace
}  // namespace fedsched
