// The registry of aggregation rules: the built-ins under config.proto's names with the
// properties the config checks rely on, name resolution and its errors, registration errors,
// and a rule registered here (a plain mean, unweighted) running in an Aggregator.
#include "server/aggregation/aggregation_rule_registry.h"

#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/robust.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

v1::AggregationConfig Named(const std::string& name) {
  v1::AggregationConfig c;
  c.set_rule_name(name);
  return c;
}

v1::AggregationConfig ByEnum(v1::AggregationRule rule) {
  v1::AggregationConfig c;
  c.set_rule(rule);
  return c;
}

TEST(AggregationRuleRegistryTest, BuiltinsAreRegisteredUnderTheEnumsNames) {
  EXPECT_THAT(RegisteredAggregationRuleNames(),
              IsSupersetOf({"fedavg", "fedavgm", "fedadam", "fedyogi", "fedadagrad", "trimmed_mean",
                            "median", "krum", "multi_krum"}));
  for (int r = v1::AGGREGATION_RULE_FEDAVG; r <= v1::AGGREGATION_RULE_MULTI_KRUM; ++r) {
    const auto rule = static_cast<v1::AggregationRule>(r);
    ASSERT_OK_AND_ASSIGN(std::string name, ResolveAggregationRuleName(ByEnum(rule)));
    EXPECT_EQ(BuiltinAggregationRule(name), rule) << name;
    // The enum and its own name together are fine.
    v1::AggregationConfig both = ByEnum(rule);
    both.set_rule_name(name);
    EXPECT_OK(ResolveAggregationRuleName(both).status());
  }
  ASSERT_OK_AND_ASSIGN(std::string fallback, ResolveAggregationRuleName(v1::AggregationConfig()));
  EXPECT_EQ(fallback, "fedavg");
}

TEST(AggregationRuleRegistryTest, BuiltinPropertiesMatchWhatTheChecksExpect) {
  for (int r = v1::AGGREGATION_RULE_FEDAVG; r <= v1::AGGREGATION_RULE_MULTI_KRUM; ++r) {
    const auto rule = static_cast<v1::AggregationRule>(r);
    SCOPED_TRACE(v1::AggregationRule_Name(rule));
    ASSERT_OK_AND_ASSIGN(AggregationRuleProperties p, AggregationRulePropertiesOf(ByEnum(rule)));
    const bool robust = rule >= v1::AGGREGATION_RULE_TRIMMED_MEAN;
    const bool stateful = rule != v1::AGGREGATION_RULE_FEDAVG && !robust;
    EXPECT_EQ(p.robust, robust);
    EXPECT_EQ(p.linear, !robust);
    EXPECT_EQ(p.needs_all_updates, robust);
    EXPECT_EQ(p.stateful, stateful);
    EXPECT_EQ(p.example_weighted, !robust);
    EXPECT_EQ(p.composes_with_dp, !robust);
    EXPECT_EQ(p.composes_with_secure_aggregation, !robust);
    EXPECT_EQ(p.composes_with_hierarchy, !robust);
    EXPECT_TRUE(p.composes_with_fedbuff);
  }
}

TEST(AggregationRuleRegistryTest, NamingErrorsAreClear) {
  v1::AggregationConfig both = ByEnum(v1::AGGREGATION_RULE_MEDIAN);
  both.set_rule_name("krum");
  EXPECT_THAT(ResolveAggregationRuleName(both),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("AGGREGATION_RULE_MEDIAN"), HasSubstr("'krum'"),
                             HasSubstr("different rules"))));
  EXPECT_THAT(EffectiveAggregationConfig(Named("nope")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'nope'"), HasSubstr("registered: "), HasSubstr("fedavg"),
                             HasSubstr("multi_krum"))));
  EXPECT_THAT(ResolveAggregationRuleName(ByEnum(static_cast<v1::AggregationRule>(99))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown value 99")));
}

TEST(AggregationRuleRegistryTest, MessagesNameBuiltinsByTheirEnum) {
  EXPECT_EQ(AggregationRuleDisplayName(Named("median")), "AGGREGATION_RULE_MEDIAN");
  EXPECT_EQ(AggregationRuleDisplayName(ByEnum(v1::AGGREGATION_RULE_KRUM)), "AGGREGATION_RULE_KRUM");
  EXPECT_EQ(AggregationRuleDisplayName(v1::AggregationConfig()), "AGGREGATION_RULE_FEDAVG");
  EXPECT_EQ(AggregationRuleDisplayName(Named("someone_elses")), "someone_elses");
}

TEST(AggregationRuleRegistryTest, EffectiveConfigNamesBuiltinsByTheirEnum) {
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig c, EffectiveAggregationConfig(Named("fedyogi")));
  EXPECT_EQ(c.rule(), v1::AGGREGATION_RULE_FEDYOGI);
  EXPECT_EQ(c.rule_name(), "");
  // FedYogi's own defaults (Flower's) came from the rule.
  EXPECT_DOUBLE_EQ(c.server_learning_rate(), 0.01);
  EXPECT_DOUBLE_EQ(c.tau(), 1e-3);
  ASSERT_OK_AND_ASSIGN(v1::AggregationConfig by_enum,
                       EffectiveAggregationConfig(ByEnum(v1::AGGREGATION_RULE_FEDYOGI)));
  EXPECT_EQ(c.SerializeAsString(), by_enum.SerializeAsString());
}

TEST(AggregationRuleRegistryTest, RegistrationErrors) {
  EXPECT_THAT(RegisterAggregationRule("median", [] { return nullptr; }),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("median")));
  EXPECT_THAT(RegisterAggregationRule("Bad Name", [] { return nullptr; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bad Name")));
  EXPECT_THAT(RegisterAggregationRule("no_factory", nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no_factory")));
}

// The unweighted mean of the round's updates: a non-linear rule in a few lines.
class PlainMean final : public AggregationRule {
 public:
  AggregationRuleProperties properties() const override {
    AggregationRuleProperties p;
    p.linear = false;
    p.needs_all_updates = true;
    p.example_weighted = false;
    p.composes_with_dp = false;
    p.composes_with_secure_aggregation = false;
    p.composes_with_hierarchy = false;
    return p;
  }
  absl::Status Aggregate(const BufferedUpdates& round, ForEachSliceFn /*for_each_slice*/,
                         float* delta) const override {
    aggregation_internal::Mean(round.updates, round.n, delta);
    return absl::OkStatus();
  }
};

TEST(AggregationRuleRegistryTest, RegisteredRuleRunsInAnAggregator) {
  ASSERT_OK(
      RegisterAggregationRule("test_plain_mean", [] { return std::make_unique<PlainMean>(); }));
  v1::Model global;
  v1::Tensor* w = global.add_tensors();
  w->set_name("w");
  w->add_shape(2);
  w->add_data(0.0f);
  w->add_data(0.0f);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Aggregator> agg,
                       Aggregator::Create(Named("test_plain_mean"), global));
  EXPECT_EQ(agg->config().rule(), v1::AGGREGATION_RULE_UNSPECIFIED);
  EXPECT_EQ(agg->config().rule_name(), "test_plain_mean");
  EXPECT_FALSE(agg->rule_properties().linear);
  v1::Model d1 = global, d2 = global;
  d1.mutable_tensors(0)->set_data(0, 1.0f);
  d2.mutable_tensors(0)->set_data(1, 3.0f);
  ASSERT_OK(agg->Accumulate(d1, 1));
  ASSERT_OK(agg->Accumulate(d2, 99));  // unweighted: the examples do not count
  ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(global));
  EXPECT_THAT(next.tensors(0).data(), ::testing::ElementsAre(0.5f, 1.5f));
  // Only a running sum composes with relays and DP.
  EXPECT_THAT(agg->TakePartialSum().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("test_plain_mean")));
  // State round-trips (no slots) under the rule's own name.
  ASSERT_OK(agg->RestoreState(agg->SaveState()));
}

}  // namespace
}  // namespace fedsched
