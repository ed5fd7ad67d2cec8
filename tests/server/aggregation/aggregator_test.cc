#include "server/aggregation/aggregator.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::MakeModel;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::Values;
using ::testing::_;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

v1::AggregationConfig Rule(v1::AggregationRule rule) {
  v1::AggregationConfig config;
  config.set_rule(rule);
  return config;
}

v1::Model Global() { return MakeModel({{"a", {2}, {1, 2}}, {"b", {}, {3}}}); }

v1::Model Delta(float a0, float a1, float b) {
  return MakeModel({{"a", {2}, {a0, a1}}, {"b", {}, {b}}});
}

std::unique_ptr<Aggregator> MakeAggregator(const v1::AggregationConfig& config,
                                           const v1::Model& global = Global()) {
  absl::StatusOr<std::unique_ptr<Aggregator>> agg = Aggregator::Create(config, global);
  EXPECT_THAT(agg, IsOk());
  return agg.ok() ? std::move(*agg) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// FedAvg

TEST(FedAvgTest, ExampleWeightedMeanOfDeltasHandComputed) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(Delta(0.5, -1, 2), 1));
  ASSERT_OK(agg->Accumulate(Delta(1, 1, -1), 3));
  EXPECT_EQ(agg->num_updates(), 2);
  EXPECT_EQ(agg->total_examples(), 4);
  // D = (1 * d1 + 3 * d2) / 4 = [0.875, 0.5], -0.25; w + D.
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_THAT(Values(next, "a"), ElementsAre(1.875f, 2.5f));
  EXPECT_THAT(Values(next, "b"), ElementsAre(2.75f));
  EXPECT_EQ(next.tensors(0).shape_size(), 1);
  EXPECT_EQ(next.tensors(0).shape(0), 2);
  EXPECT_EQ(next.tensors(1).shape_size(), 0);
  // The accumulator starts empty for the next round.
  EXPECT_EQ(agg->num_updates(), 0);
  EXPECT_EQ(agg->total_examples(), 0);
}

TEST(FedAvgTest, UnspecifiedRuleIsFedAvgAndServerLearningRateScalesTheStep) {
  v1::AggregationConfig config;
  config.set_server_learning_rate(0.5);
  auto agg = MakeAggregator(config);
  EXPECT_EQ(agg->config().rule(), v1::AGGREGATION_RULE_FEDAVG);
  ASSERT_OK(agg->Accumulate(Delta(2, -2, 4), 7));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_THAT(Values(next, "a"), ElementsAre(2.0f, 1.0f));
  EXPECT_THAT(Values(next, "b"), ElementsAre(5.0f));
}

TEST(FedAvgTest, SecondRoundStartsFromAnEmptySum) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(Delta(100, 100, 100), 5));
  ASSERT_OK_AND_ASSIGN(v1::Model round1, agg->Finalize(Global()));
  ASSERT_OK(agg->Accumulate(Delta(1, 1, 1), 2));
  ASSERT_OK_AND_ASSIGN(v1::Model round2, agg->Finalize(round1));
  EXPECT_THAT(Values(round2, "a"), ElementsAre(102.0f, 103.0f));
}

TEST(FedAvgTest, TensorsMatchedByNameInAnyOrderAndOutputFollowsGlobalOrder) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(MakeModel({{"b", {}, {1}}, {"a", {2}, {1, -1}}}), 1));
  v1::Model reordered_global = MakeModel({{"b", {}, {3}}, {"a", {2}, {1, 2}}});
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(reordered_global));
  ASSERT_EQ(next.tensors_size(), 2);
  EXPECT_EQ(next.tensors(0).name(), "b");
  EXPECT_THAT(Values(next, "a"), ElementsAre(2.0f, 1.0f));
  EXPECT_THAT(Values(next, "b"), ElementsAre(4.0f));
}

TEST(FedAvgTest, NoUpdatesIsAnErrorNeverANaNModel) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  EXPECT_THAT(agg->Finalize(Global()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no updates")));
  // Zero examples can never be folded in, so the total weight can never be zero with updates.
  EXPECT_THAT(agg->Accumulate(Delta(1, 1, 1), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_examples")));
  EXPECT_THAT(agg->Accumulate(Delta(1, 1, 1), -5),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_examples")));
  EXPECT_THAT(agg->Finalize(Global()), StatusIs(absl::StatusCode::kFailedPrecondition, _));
}

TEST(FedAvgTest, ExampleCountOverflowIsRejected) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(Delta(0, 0, 0), std::numeric_limits<int64_t>::max() - 1));
  EXPECT_THAT(agg->Accumulate(Delta(0, 0, 0), 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflow")));
  EXPECT_EQ(agg->num_updates(), 1);
}

TEST(FedAvgTest, WeightedSumThatCouldOverflowFloatIsRejected) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  EXPECT_THAT(agg->Accumulate(Delta(1e38f, 0, 0), 1000),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflow")));
  EXPECT_EQ(agg->num_updates(), 0);
  // Large but safe values still aggregate to a finite model.
  ASSERT_OK(agg->Accumulate(Delta(1e30f, 0, 0), 1000));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_TRUE(std::isfinite(Values(next, "a")[0]));
}

// Every kind of bad update is rejected and leaves the accumulator exactly as it was: the final
// model is bit-identical to the one aggregated without the rejected updates.
TEST(FedAvgTest, RejectedUpdatesLeaveNoTrace) {
  auto clean = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  auto dirty = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  const v1::Model d1 = Delta(0.1f, 0.2f, 0.3f);
  const v1::Model d2 = Delta(-0.7f, 0.05f, 1.3f);
  ASSERT_OK(clean->Accumulate(d1, 3));
  ASSERT_OK(clean->Accumulate(d2, 5));

  ASSERT_OK(dirty->Accumulate(d1, 3));
  std::vector<v1::Model> bad;
  bad.push_back(Delta(0.5f, 0.5f, kNaN));  // valid first tensor, NaN in the last one
  bad.push_back(Delta(kInf, 0.5f, 0.5f));
  bad.push_back(Delta(0.5f, -kInf, 0.5f));
  bad.push_back(MakeModel({{"a", {2}, {1, 1}}}));                                  // missing
  bad.push_back(MakeModel({{"a", {2}, {1, 1}}, {"b", {}, {1}}, {"c", {}, {1}}}));  // extra
  bad.push_back(MakeModel({{"a", {1, 2}, {1, 1}}, {"b", {}, {1}}}));               // shape
  bad.push_back(MakeModel({{"a", {2}, {1, 1, 1}}, {"b", {}, {1}}}));               // size
  bad.push_back(MakeModel({{"a", {2}, {1, 1}}, {"a", {2}, {1, 1}}}));              // duplicate
  for (const v1::Model& m : bad) {
    EXPECT_THAT(dirty->Accumulate(m, 4), StatusIs(absl::StatusCode::kInvalidArgument, _))
        << m.ShortDebugString();
    EXPECT_EQ(dirty->num_updates(), 1);
    EXPECT_EQ(dirty->total_examples(), 3);
  }
  EXPECT_THAT(dirty->Accumulate(Delta(1e38f, 1, 1), 10),
              StatusIs(absl::StatusCode::kInvalidArgument, _));
  EXPECT_THAT(dirty->Accumulate(d2, 0), StatusIs(absl::StatusCode::kInvalidArgument, _));
  ASSERT_OK(dirty->Accumulate(d2, 5));

  ASSERT_OK_AND_ASSIGN(v1::Model want, clean->Finalize(Global()));
  ASSERT_OK_AND_ASSIGN(v1::Model got, dirty->Finalize(Global()));
  EXPECT_EQ(Values(got, "a"), Values(want, "a"));
  EXPECT_EQ(Values(got, "b"), Values(want, "b"));
}

// A model large enough (3M parameters, 12 MB) for the non-temporal fold path.
TEST(FedAvgTest, LargeModelRejectsLateNaNAndAggregatesExactly) {
  constexpr int kSize = 3'000'000;
  v1::Model global =
      MakeModel({{"big", {kSize}, std::vector<float>(kSize, 1.0f)}, {"small", {3}, {0, 0, 0}}});
  auto make = [&](float x, float y) {
    std::vector<float> big(kSize);
    for (int i = 0; i < kSize; ++i) big[i] = x * static_cast<float>(i % 4);
    return MakeModel({{"big", {kSize}, big}, {"small", {3}, {y, y, y}}});
  };
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG), global);
  ASSERT_OK(agg->Accumulate(make(1.0f, 2.0f), 1));
  v1::Model poisoned = make(1e3f, 1.0f);
  poisoned.mutable_tensors(0)->set_data(kSize - 2, kNaN);  // near the end of the big tensor
  EXPECT_THAT(agg->Accumulate(poisoned, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'big'"), HasSubstr("index 2999998"))));
  ASSERT_OK(agg->Accumulate(make(3.0f, 4.0f), 3));
  // D = (1 * d1 + 3 * d2) / 4: big[i] = 2.5 * (i % 4), small = 3.5.
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(global));
  const std::vector<float> big = Values(next, "big");
  for (int i = 0; i < kSize; ++i) {
    ASSERT_EQ(big[i], 1.0f + 2.5f * static_cast<float>(i % 4)) << i;
  }
  EXPECT_THAT(Values(next, "small"), ElementsAre(3.5f, 3.5f, 3.5f));
}

TEST(FedAvgTest, RejectionMessagesNameTheTensor) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  EXPECT_THAT(agg->Accumulate(Delta(0, kNaN, 0), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'a'"), HasSubstr("non-finite"), HasSubstr("index 1"))));
  EXPECT_THAT(
      agg->Accumulate(MakeModel({{"a", {2}, {1, 1}}}), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("missing"), HasSubstr("'b'"))));
  EXPECT_THAT(agg->Accumulate(MakeModel({{"a", {3}, {1, 1, 1}}, {"b", {}, {1}}}), 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'a'"), HasSubstr("[3]"), HasSubstr("[2]"))));
}

TEST(FedAvgTest, ResetDropsTheRound) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(Delta(9, 9, 9), 1));
  agg->Reset();
  EXPECT_EQ(agg->num_updates(), 0);
  EXPECT_THAT(agg->Finalize(Global()), StatusIs(absl::StatusCode::kFailedPrecondition, _));
  ASSERT_OK(agg->Accumulate(Delta(1, 1, 1), 1));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_THAT(Values(next, "a"), ElementsAre(2.0f, 3.0f));
}

TEST(FedAvgTest, FinalizeWithAMismatchedGlobalKeepsTheRound) {
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG));
  ASSERT_OK(agg->Accumulate(Delta(1, 1, 1), 1));
  EXPECT_THAT(agg->Finalize(MakeModel({{"a", {2}, {1, 2}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'b'")));
  EXPECT_EQ(agg->num_updates(), 1);
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_THAT(Values(next, "b"), ElementsAre(4.0f));
}

TEST(AggregatorCreateTest, RejectsMalformedGlobalAndConfig) {
  EXPECT_THAT(Aggregator::Create(v1::AggregationConfig(), v1::Model()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tensors")));
  EXPECT_THAT(Aggregator::Create(v1::AggregationConfig(), Delta(kNaN, 0, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'a'")));
  v1::AggregationConfig config;
  config.set_trim_beta(0.5);
  EXPECT_THAT(Aggregator::Create(config, Global()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trim_beta")));
}

// ---------------------------------------------------------------------------------------------
// Config defaults (docs/ALGORITHMS.md §5, Flower's defaults; config.proto comments).

TEST(EffectiveAggregationConfigTest, FillsDefaultsPerRule) {
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig avg, EffectiveAggregationConfig({}));
  EXPECT_EQ(avg.rule(), v1::AGGREGATION_RULE_FEDAVG);
  EXPECT_EQ(avg.server_learning_rate(), 1.0);
  EXPECT_EQ(avg.server_momentum(), 0.9);
  EXPECT_EQ(avg.trim_beta(), 0.2);
  EXPECT_EQ(avg.krum_byzantine(), 1);
  EXPECT_EQ(avg.multi_krum_m(), 0);
  EXPECT_EQ(avg.max_buffered_updates(), 1000);
  EXPECT_EQ(avg.max_staleness(), 10);
  EXPECT_EQ(avg.clip_update_norm(), 0.0);

  ASSERT_OK_AND_ASSIGN(auto adam, EffectiveAggregationConfig(Rule(v1::AGGREGATION_RULE_FEDADAM)));
  EXPECT_EQ(adam.server_learning_rate(), 0.1);
  EXPECT_EQ(adam.beta1(), 0.9);
  EXPECT_EQ(adam.beta2(), 0.99);
  EXPECT_EQ(adam.tau(), 1e-9);
  ASSERT_OK_AND_ASSIGN(auto yogi, EffectiveAggregationConfig(Rule(v1::AGGREGATION_RULE_FEDYOGI)));
  EXPECT_EQ(yogi.server_learning_rate(), 0.01);
  EXPECT_EQ(yogi.tau(), 1e-3);
  ASSERT_OK_AND_ASSIGN(auto adagrad,
                       EffectiveAggregationConfig(Rule(v1::AGGREGATION_RULE_FEDADAGRAD)));
  EXPECT_EQ(adagrad.server_learning_rate(), 0.1);
  EXPECT_EQ(adagrad.beta1(), 0.0);
  EXPECT_EQ(adagrad.tau(), 1e-9);
  ASSERT_OK_AND_ASSIGN(auto avgm, EffectiveAggregationConfig(Rule(v1::AGGREGATION_RULE_FEDAVGM)));
  EXPECT_EQ(avgm.server_learning_rate(), 1.0);
}

// beta1, beta2, server_momentum, trim_beta and krum_byzantine have presence: 0 is a value.
TEST(EffectiveAggregationConfigTest, ExplicitZerosAreKept) {
  v1::AggregationConfig config;
  config.set_rule(v1::AGGREGATION_RULE_FEDAVGM);
  config.set_beta1(0);
  config.set_beta2(0);
  config.set_server_momentum(0);
  config.set_trim_beta(0);
  config.set_krum_byzantine(0);
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig c, EffectiveAggregationConfig(config));
  EXPECT_EQ(c.beta1(), 0.0);
  EXPECT_EQ(c.beta2(), 0.0);
  EXPECT_EQ(c.server_momentum(), 0.0);
  EXPECT_EQ(c.trim_beta(), 0.0);
  EXPECT_EQ(c.krum_byzantine(), 0);
}

// FedAvgM with an explicit momentum 0 is Flower's default: plain server SGD, w += eta * D.
TEST(FedAvgMTest, ZeroMomentumIsPlainServerSgd) {
  v1::AggregationConfig config;
  config.set_rule(v1::AGGREGATION_RULE_FEDAVGM);
  config.set_server_momentum(0);
  v1::Model zero = MakeModel({{"w", {1}, {0}}});
  ASSERT_OK_AND_ASSIGN(auto agg, Aggregator::Create(config, zero));
  v1::Model global = zero;
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK(agg->Accumulate(MakeModel({{"w", {1}, {1}}}), 1));
    ASSERT_OK_AND_ASSIGN(global, agg->Finalize(global));
  }
  EXPECT_FLOAT_EQ(Values(global, "w")[0], 3.0f);
}

TEST(AdamBiasCorrectionTest, MatchesFlowersFormula) {
  EXPECT_NEAR(AdamBiasCorrection(0.9, 0.99, 2), std::sqrt(1 - 0.99 * 0.99) / (1 - 0.81), 1e-12);
  EXPECT_NEAR(AdamBiasCorrection(0.9, 0.99, 1000), std::sqrt(1 - std::pow(0.99, 1000)), 1e-12);
}

TEST(EffectiveAggregationConfigTest, RejectsOutOfRangeValuesNamingTheField) {
  struct Case {
    void (*set)(v1::AggregationConfig*);
    const char* field;
  };
  const Case cases[] = {
      {[](v1::AggregationConfig* c) { c->set_server_learning_rate(-1); }, "server_learning_rate"},
      {[](v1::AggregationConfig* c) { c->set_beta1(1.0); }, "beta1"},
      {[](v1::AggregationConfig* c) { c->set_beta2(-0.1); }, "beta2"},
      {[](v1::AggregationConfig* c) { c->set_tau(-1e-3); }, "tau"},
      {[](v1::AggregationConfig* c) { c->set_server_momentum(1.5); }, "server_momentum"},
      {[](v1::AggregationConfig* c) { c->set_trim_beta(0.6); }, "trim_beta"},
      {[](v1::AggregationConfig* c) { c->set_krum_byzantine(-1); }, "krum_byzantine"},
      {[](v1::AggregationConfig* c) { c->set_multi_krum_m(-2); }, "multi_krum_m"},
      {[](v1::AggregationConfig* c) { c->set_max_buffered_updates(-1); }, "max_buffered_updates"},
      {[](v1::AggregationConfig* c) { c->set_clip_update_norm(-1); }, "clip_update_norm"},
      {[](v1::AggregationConfig* c) { c->set_max_staleness(-3); }, "max_staleness"},
      {[](v1::AggregationConfig* c) { c->set_rule(static_cast<v1::AggregationRule>(99)); }, "rule"},
  };
  for (const Case& c : cases) {
    v1::AggregationConfig config;
    c.set(&config);
    EXPECT_THAT(EffectiveAggregationConfig(config),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)));
  }
}

// ---------------------------------------------------------------------------------------------
// Server optimisers over three rounds. One update per round, so D = its delta. Coordinate w[0]
// sees D = 1, -2, 0.5 and w[1] the negated sequence; both start at 1, so w[1] = 2 - w[0].
// Expected values computed by hand from the formulas of docs/ALGORITHMS.md §5 (Reddi et al.
// 2021, Algorithm 2; Flower's FedAdam bias correction; Hsu et al. 2019 for FedAvgM).

v1::Model OptGlobal() { return MakeModel({{"w", {2}, {1, 1}}}); }
v1::Model OptDelta(float d) { return MakeModel({{"w", {2}, {d, -d}}}); }

std::vector<std::vector<float>> RunThreeRounds(const v1::AggregationConfig& config) {
  auto agg = MakeAggregator(config, OptGlobal());
  v1::Model global = OptGlobal();
  std::vector<std::vector<float>> out;
  for (float d : {1.0f, -2.0f, 0.5f}) {
    EXPECT_OK(agg->Accumulate(OptDelta(d), 10));
    absl::StatusOr<v1::Model> next = agg->Finalize(global);
    EXPECT_OK(next.status());
    global = *next;
    out.push_back(Values(global, "w"));
  }
  return out;
}

TEST(ServerOptimizerTest, FedAvgMHandComputed) {
  // v = 0.9 v + D; w += v:  v = 1, -1.1, -0.49;  w = 2, 0.9, 0.41 (and 2 - w for w[1]).
  auto w = RunThreeRounds(Rule(v1::AGGREGATION_RULE_FEDAVGM));
  EXPECT_THAT(w[0], ElementsAre(FloatNear(2.0f, 1e-6), FloatNear(0.0f, 1e-6)));
  EXPECT_THAT(w[1], ElementsAre(FloatNear(0.9f, 1e-6), FloatNear(1.1f, 1e-6)));
  EXPECT_THAT(w[2], ElementsAre(FloatNear(0.41f, 1e-6), FloatNear(1.59f, 1e-6)));
}

TEST(ServerOptimizerTest, FedAdamHandComputed) {
  // eta 0.1, b1 0.9, b2 0.99, tau 1e-9; Flower's bias correction c_t = sqrt(1 - b2^t) /
  // (1 - b1^t) with t = round + 1 (rounds from 1).
  // r1: m = 0.1, v = 0.01, w = 1 + 0.1 c_2 * 0.1 / 0.1 = 1.07424598
  // r2: m = -0.11, v = 0.0499, w = w1 + 0.1 c_3 * -0.11 / sqrt(0.0499) = 1.04293053
  // r3: m = -0.049, v = 0.051901, w = 1.03051554
  auto w = RunThreeRounds(Rule(v1::AGGREGATION_RULE_FEDADAM));
  EXPECT_THAT(w[0], ElementsAre(FloatNear(1.07424598f, 1e-6), FloatNear(0.92575402f, 1e-6)));
  EXPECT_THAT(w[1], ElementsAre(FloatNear(1.04293053f, 1e-6), FloatNear(0.95706947f, 1e-6)));
  EXPECT_THAT(w[2], ElementsAre(FloatNear(1.03051554f, 1e-6), FloatNear(0.96948446f, 1e-6)));
}

TEST(ServerOptimizerTest, FedYogiHandComputed) {
  // eta 0.01, b1 0.9, b2 0.99, tau 1e-3; v_0 = 0.
  // r1: m = 0.1, v = 0 - 0.01 * 1 * sign(0 - 1) = 0.01, w = 1 + 0.01 * 0.1 / 0.101 = 1.00990099
  // r2: m = -0.11, v = 0.01 + 0.01 * 4 = 0.05, w = 1.00500354
  // r3: m = -0.049, v = 0.05 + 0.01 * 0.25 = 0.0525, w = 1.0028743
  auto w = RunThreeRounds(Rule(v1::AGGREGATION_RULE_FEDYOGI));
  EXPECT_THAT(w[0], ElementsAre(FloatNear(1.00990099f, 1e-6), FloatNear(0.99009901f, 1e-6)));
  EXPECT_THAT(w[1], ElementsAre(FloatNear(1.00500354f, 1e-6), FloatNear(0.99499646f, 1e-6)));
  EXPECT_THAT(w[2], ElementsAre(FloatNear(1.0028743f, 1e-6), FloatNear(0.9971257f, 1e-6)));
}

TEST(ServerOptimizerTest, FedAdagradHandComputed) {
  // eta 0.1, b1 0 (Flower), tau 1e-9: m = D, v += D^2.
  // r1: v = 1, w = 1.1;  r2: v = 5, w = 1.1 - 0.2 / sqrt(5) = 1.01055728
  // r3: v = 5.25, w = 1.01055728 + 0.05 / sqrt(5.25) = 1.03237907
  auto w = RunThreeRounds(Rule(v1::AGGREGATION_RULE_FEDADAGRAD));
  EXPECT_THAT(w[0], ElementsAre(FloatNear(1.1f, 1e-6), FloatNear(0.9f, 1e-6)));
  EXPECT_THAT(w[1], ElementsAre(FloatNear(1.01055728f, 1e-6), FloatNear(0.98944272f, 1e-6)));
  EXPECT_THAT(w[2], ElementsAre(FloatNear(1.03237907f, 1e-6), FloatNear(0.96762093f, 1e-6)));
}

TEST(ServerOptimizerTest, SaveAndRestoreResumesExactly) {
  for (v1::AggregationRule rule :
       {v1::AGGREGATION_RULE_FEDAVG, v1::AGGREGATION_RULE_FEDAVGM, v1::AGGREGATION_RULE_FEDADAM,
        v1::AGGREGATION_RULE_FEDYOGI, v1::AGGREGATION_RULE_FEDADAGRAD}) {
    SCOPED_TRACE(v1::AggregationRule_Name(rule));
    auto original = MakeAggregator(Rule(rule), OptGlobal());
    v1::Model global = OptGlobal();
    for (float d : {1.0f, -2.0f}) {
      ASSERT_OK(original->Accumulate(OptDelta(d), 3));
      ASSERT_OK_AND_ASSIGN(global, original->Finalize(global));
    }
    const v1::Model state = original->SaveState();
    // Round-trip through bytes, as the store does.
    v1::Model parsed;
    ASSERT_TRUE(parsed.ParseFromString(state.SerializeAsString()));
    auto restored = MakeAggregator(Rule(rule), OptGlobal());
    ASSERT_OK(restored->RestoreState(parsed));
    EXPECT_EQ(restored->SaveState().SerializeAsString(), state.SerializeAsString());

    ASSERT_OK(original->Accumulate(OptDelta(0.5f), 3));
    ASSERT_OK(restored->Accumulate(OptDelta(0.5f), 3));
    ASSERT_OK_AND_ASSIGN(v1::Model a, original->Finalize(global));
    ASSERT_OK_AND_ASSIGN(v1::Model b, restored->Finalize(global));
    EXPECT_EQ(Values(a, "w"), Values(b, "w"));
  }
}

TEST(ServerOptimizerTest, RestoreStateRejectsForeignOrCorruptState) {
  auto adam = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDADAM), OptGlobal());
  ASSERT_OK(adam->Accumulate(OptDelta(1), 1));
  ASSERT_OK(adam->Finalize(OptGlobal()).status());
  const v1::Model good = adam->SaveState();
  ASSERT_EQ(good.tensors_size(), 4);  // rule, steps, m/w, v/w

  auto yogi = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDYOGI), OptGlobal());
  EXPECT_THAT(yogi->RestoreState(good),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule")));

  auto fresh = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDADAM), OptGlobal());
  const std::string before = fresh->SaveState().SerializeAsString();
  v1::Model missing = good;
  missing.mutable_tensors()->RemoveLast();
  EXPECT_THAT(fresh->RestoreState(missing), StatusIs(absl::StatusCode::kInvalidArgument, _));
  v1::Model misshapen = good;
  misshapen.mutable_tensors(3)->set_shape(0, 1);
  EXPECT_THAT(fresh->RestoreState(misshapen),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("v/w")));
  v1::Model negative = good;
  negative.mutable_tensors(3)->set_data(0, -1.0f);
  EXPECT_THAT(fresh->RestoreState(negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative")));
  v1::Model nan = good;
  nan.mutable_tensors(2)->set_data(1, kNaN);
  EXPECT_THAT(fresh->RestoreState(nan),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m/w")));
  EXPECT_EQ(fresh->SaveState().SerializeAsString(), before);

  // An empty state is the initial state.
  ASSERT_OK(adam->RestoreState(v1::Model()));
  EXPECT_EQ(adam->SaveState().SerializeAsString(), before);
}

TEST(ServerOptimizerTest, NonFiniteStepIsRefusedAndChangesNothing) {
  // D = 1e20: D^2 overflows float32 in FedAdam's second moment.
  auto adam = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDADAM), OptGlobal());
  ASSERT_OK(adam->Accumulate(OptDelta(1.0f), 1));
  ASSERT_OK(adam->Finalize(OptGlobal()).status());
  const std::string state = adam->SaveState().SerializeAsString();
  ASSERT_OK(adam->Accumulate(OptDelta(1e20f), 1));
  EXPECT_THAT(adam->Finalize(OptGlobal()),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("'w'")));
  EXPECT_EQ(adam->SaveState().SerializeAsString(), state);
  EXPECT_EQ(adam->num_updates(), 1);  // the round is kept; the caller decides (Reset)
  adam->Reset();
  ASSERT_OK(adam->Accumulate(OptDelta(-2.0f), 1));
  ASSERT_OK_AND_ASSIGN(v1::Model next, adam->Finalize(OptGlobal()));
  // As round 2 of FedAdamHandComputed, from the same global.
  EXPECT_THAT(Values(next, "w"), ElementsAre(FloatNear(1.0f - 0.03131545f, 1e-6),
                                             FloatNear(1.0f + 0.03131545f, 1e-6)));

  // FedAvg: a global near FLT_MAX plus a large step overflows the model itself.
  auto avg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG), OptGlobal());
  ASSERT_OK(avg->Accumulate(OptDelta(3e38f), 1));
  EXPECT_THAT(avg->Finalize(MakeModel({{"w", {2}, {3e38f, -3e38f}}})),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("'w'")));
  EXPECT_EQ(avg->num_updates(), 1);
}

// ---------------------------------------------------------------------------------------------
// Clipping and staleness.

TEST(ClippingTest, ScalesUpdatesAboveTheNormOnly) {
  v1::AggregationConfig config;
  config.set_clip_update_norm(1.0);
  auto agg = MakeAggregator(config, OptGlobal());
  // ||(3, 4)|| = 5 -> (0.6, 0.8); ||(0.3, 0.4)|| = 0.5 stays. D = (0.9, 1.2) / 2.
  ASSERT_OK(agg->Accumulate(MakeModel({{"w", {2}, {3, 4}}}), 1));
  ASSERT_OK(agg->Accumulate(MakeModel({{"w", {2}, {0.3f, 0.4f}}}), 1));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(OptGlobal()));
  EXPECT_THAT(Values(next, "w"), ElementsAre(FloatNear(1.45f, 1e-6), FloatNear(1.6f, 1e-6)));
}

TEST(ClippingTest, NormIsOverAllTensors) {
  v1::AggregationConfig config;
  config.set_clip_update_norm(2.5);
  auto agg = MakeAggregator(config);
  // ||(3, 0, 4)|| = 5 -> halved.
  ASSERT_OK(agg->Accumulate(Delta(3, 0, 4), 1));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(Global()));
  EXPECT_THAT(Values(next, "a"), ElementsAre(FloatNear(2.5f, 1e-6), FloatNear(2.0f, 1e-6)));
  EXPECT_THAT(Values(next, "b"), ElementsAre(FloatNear(5.0f, 1e-6)));
}

TEST(StalenessTest, WeightIsOneOverSqrtOnePlusStaleness) {
  EXPECT_DOUBLE_EQ(StalenessWeight(0), 1.0);
  EXPECT_DOUBLE_EQ(StalenessWeight(3), 0.5);
  auto agg = MakeAggregator(Rule(v1::AGGREGATION_RULE_FEDAVG), OptGlobal());
  // (1 * 2 + 1 * 0.5 * 2) / 2 = 1.5
  ASSERT_OK(agg->Accumulate(MakeModel({{"w", {2}, {2, 2}}}), 1, 0));
  ASSERT_OK(agg->Accumulate(MakeModel({{"w", {2}, {2, 2}}}), 1, 3));
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(OptGlobal()));
  EXPECT_THAT(Values(next, "w"), ElementsAre(2.5f, 2.5f));
}

TEST(StalenessTest, TooStaleOrNegativeIsRejected) {
  v1::AggregationConfig config;
  config.set_max_staleness(4);
  auto agg = MakeAggregator(config, OptGlobal());
  EXPECT_OK(agg->Accumulate(OptDelta(1), 1, 4));
  EXPECT_THAT(agg->Accumulate(OptDelta(1), 1, 5),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stale")));
  EXPECT_THAT(agg->Accumulate(OptDelta(1), 1, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("staleness")));
  EXPECT_EQ(agg->num_updates(), 1);
}

}  // namespace
}  // namespace fedsched
