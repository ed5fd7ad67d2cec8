// A round in the simulator with an aggregation rule registered only by the tests
// (tests/server/aggregation/geometric_median_rule.cc, docs/guides/EXTENDING.md "Adding an
// aggregation rule"): the config names it, and the committed model is its aggregate, not FedAvg's.
#include <memory>
#include <utility>

#include "common/testing/status_matchers.h"
#include "sim/engine/simulator.h"
#include "tests/server/aggregation/geometric_median_rule.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::kGeometricMedianRule;
using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

TEST(CustomRuleSimTest, RoundAggregatesWithTheRegisteredRule) {
  // K = 3 of 3 clients, one round; the deltas 1, 2 and 9 on a one-float model, equal examples.
  v1::SimConfig config = HandConfig(3, 3, 1.0, 1);
  config.mutable_server()->mutable_aggregation()->set_rule_name(kGeometricMedianRule);
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(config));
  EXPECT_EQ(resolved.server().aggregation().rule_name(), kGeometricMedianRule);
  CapacityTrace capacity = ThreeDevices();
  AvailabilityTrace availability = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, 125'000);
  learner.delta_of = {{0, 1.0f}, {1, 2.0f}, {2, 9.0f}};
  SimulatorParts parts;
  parts.config = resolved;
  parts.capacity = &capacity;
  parts.availability = &availability;
  parts.learner = &learner;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulator> sim, Simulator::Create(std::move(parts)));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary summary, sim->Run(&out));
  EXPECT_EQ(summary.rounds_committed, 1);
  ASSERT_EQ(out.records.size(), 1u);
  EXPECT_EQ(out.records[0].updates_accepted(), 3);
  // The geometric median of three points on a line is the middle one, 2 (FedAvg: 4); the
  // initial model is 0 and the server learning rate 1.
  ASSERT_EQ(out.models.size(), 1u);
  EXPECT_NEAR(out.models[0], 2.0f, 1e-4);
}

TEST(CustomRuleSimTest, UnknownRuleNameIsRefusedListingTheRegisteredOnes) {
  v1::SimConfig config = HandConfig(3, 3, 1.0, 1);
  config.mutable_server()->mutable_aggregation()->set_rule_name("no_such_rule");
  EXPECT_THAT(
      ResolveSimConfig(config),
      ::fedsched::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                    ::testing::AllOf(::testing::HasSubstr("no_such_rule"),
                                                     ::testing::HasSubstr(kGeometricMedianRule))));
}

}  // namespace
}  // namespace fedsched::sim
