// ResolveRoundConfig with secure_aggregation on: what needs individual updates is refused by
// name, degree and threshold are checked for the cohort, a flat server is required (clients clip
// to aggregation.clip_update_norm, 10 by default), and the step timeout gets its default
// (docs/guides/SECURE_AGGREGATION.md).
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/round_config.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

v1::ServerConfig SecureConfig() {
  v1::ServerConfig raw;
  raw.set_clients_per_round(100);  // cohort ceil(100 x 1.3) = 130
  raw.mutable_secure_aggregation()->set_enabled(true);
  raw.mutable_aggregation()->set_clip_update_norm(5);
  return raw;
}

TEST(SecureAggregationConfigTest, OffByDefaultAndUnchecked) {
  v1::ServerConfig raw;
  raw.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_MEDIAN);
  raw.mutable_secure_aggregation()->set_degree(3);  // ignored while off
  EXPECT_TRUE(ResolveRoundConfig(raw).ok());
}

TEST(SecureAggregationConfigTest, RefusesRulesThatNeedIndividualUpdates) {
  for (v1::AggregationRule rule : {v1::AGGREGATION_RULE_TRIMMED_MEAN, v1::AGGREGATION_RULE_MEDIAN,
                                   v1::AGGREGATION_RULE_KRUM, v1::AGGREGATION_RULE_MULTI_KRUM}) {
    v1::ServerConfig raw = SecureConfig();
    raw.mutable_aggregation()->set_rule(rule);
    EXPECT_THAT(ResolveRoundConfig(raw),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("aggregation.rule ", v1::AggregationRule_Name(rule),
                                                " needs every individual update"))));
  }
  v1::ServerConfig raw = SecureConfig();
  raw.mutable_aggregation()->set_async_fedbuff(true);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("async_fedbuff")));
  raw = SecureConfig();
  raw.set_audit_updates(true);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("audit_updates")));
}

TEST(SecureAggregationConfigTest, ChecksDegreeAndThresholdForTheCohort) {
  v1::ServerConfig raw = SecureConfig();
  raw.mutable_secure_aggregation()->set_degree(7);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("secure_aggregation for a cohort of 130")));
  raw = SecureConfig();
  raw.mutable_secure_aggregation()->set_degree(20);
  raw.mutable_secure_aggregation()->set_threshold(5);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threshold 5")));
}

// bits_per_element: [8, 32] (0 = 32), and the cohort of 130 must fit the ring: 12 bits allow
// 227 clients, 8 bits only 14 (docs/guides/SECURE_AGGREGATION.md "Bits per element").
TEST(SecureAggregationConfigTest, ChecksBitsPerElementForTheCohort) {
  v1::ServerConfig raw = SecureConfig();
  for (int32_t bits : {12, 16, 32}) {
    raw.mutable_secure_aggregation()->set_bits_per_element(bits);
    EXPECT_OK(ResolveRoundConfig(raw).status()) << bits;
  }
  for (int32_t bits : {-1, 4, 7, 33}) {
    raw.mutable_secure_aggregation()->set_bits_per_element(bits);
    EXPECT_THAT(ResolveRoundConfig(raw),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("secure_aggregation.bits_per_element must be in [8, 32]")));
  }
  raw.mutable_secure_aggregation()->set_bits_per_element(8);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("cohort of 130"), HasSubstr("ring of 8 bits"),
                             HasSubstr("at most 14 clients"))));
}

TEST(SecureAggregationConfigTest, FedOptResolvesWithDefaultsAndNeedsAFlatServer) {
  v1::ServerConfig raw = SecureConfig();
  raw.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_FEDADAM);
  raw.set_round_deadline_s(300);
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig resolved, ResolveRoundConfig(raw));
  EXPECT_EQ(resolved.secure_aggregation().degree(), 22);  // smallest even >= 3 log2 130
  EXPECT_DOUBLE_EQ(resolved.secure_aggregation().step_timeout_s(), 30);
  // PyramidFL's update dropout sends partial updates: refused unless turned off.
  raw = SecureConfig();
  raw.mutable_selection()->set_policy(v1::SELECTION_POLICY_PYRAMIDFL);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("disable_dropout")));
  raw.mutable_selection()->mutable_extend_workload()->set_disable_dropout(true);
  EXPECT_OK(ResolveRoundConfig(raw).status());
  raw = SecureConfig();
  raw.mutable_hierarchy()->set_role(v1::HierarchyConfig::ROLE_ROOT);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("with a hierarchy")));
}

}  // namespace
}  // namespace fedsched::round
