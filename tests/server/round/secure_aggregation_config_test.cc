// ResolveRoundConfig with secure_aggregation on: what needs individual updates is refused by
// name, degree and threshold are checked for the cohort, and enabling it is refused while the
// RPCs are not wired (docs/SECURE_AGGREGATION.md "Wiring plan").
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/round_config.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::ServerConfig SecureConfig() {
  v1::ServerConfig raw;
  raw.set_clients_per_round(100);  // cohort ceil(100 x 1.3) = 130
  raw.mutable_secure_aggregation()->set_enabled(true);
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

TEST(SecureAggregationConfigTest, FedAvgPassesTheChecksButIsNotWiredYet) {
  v1::ServerConfig raw = SecureConfig();
  raw.mutable_aggregation()->set_rule(v1::AGGREGATION_RULE_FEDADAM);
  EXPECT_THAT(ResolveRoundConfig(raw),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not wired yet")));
}

}  // namespace
}  // namespace fedsched::round
