// The simulator with differential privacy (docs/PRIVACY.md) end to end: distributed DP through
// the simulated devices' clip-and-noise step, epsilon in every row and record, rising each round,
// and the run ended by the privacy budget.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/privacy/rdp_accountant.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using ::testing::HasSubstr;
using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

TEST(SimulatorPrivacyTest, EpsilonRisesEachRoundAndTheBudgetEndsTheRun) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, 125'000);
  v1::SimConfig c = HandConfig(3, 2, 1.5, 50);
  v1::PrivacyConfig* p = c.mutable_server()->mutable_privacy();
  p->set_mode(v1::PrivacyConfig::MODE_DISTRIBUTED);
  p->set_noise_multiplier(2.0);
  p->set_clip_norm(0.5);
  p->set_population_size(3);  // q = 3 / 3 = 1
  p->set_delta(1e-5);
  ASSERT_OK_AND_ASSIGN(double eps4, privacy::EpsilonAfter(1.0, 2.0, 4, 1e-5));
  p->set_target_epsilon(eps4 * 1.0001);
  SimulatorParts parts;
  ASSERT_OK_AND_ASSIGN(parts.config, ResolveSimConfig(c));
  parts.capacity = &cap;
  parts.availability = &av;
  parts.learner = &learner;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(std::move(parts)));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 4u);
  double last = 0;
  for (size_t i = 0; i < out.rows.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(double want, privacy::EpsilonAfter(1.0, 2.0, i + 1, 1e-5));
    EXPECT_NEAR(out.rows[i].dp_epsilon, want, 1e-9);
    EXPECT_GT(out.rows[i].dp_epsilon, last);
    last = out.rows[i].dp_epsilon;
    EXPECT_EQ(out.records[i].dp_clip_norm(), 0.5);
    // The devices' noise: the scripted deltas (1, 2) would average to exactly 1.5 without it.
    const std::vector<std::string> cells = absl::StrSplit(RoundCsvLine("x", out.rows[i]), ',');
    EXPECT_NEAR(std::stod(cells[cells.size() - 3]), want, 1e-5);
  }
  EXPECT_NE(out.models[0], 1.5f);
  EXPECT_EQ(s.rounds_committed, 4);
  EXPECT_THAT(s.stop_reason, HasSubstr("privacy budget spent"));
}

}  // namespace
}  // namespace fedsched::sim
