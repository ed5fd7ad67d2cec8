// When a job's caller describes it to its planning gate (DescribePacer) and in which order it
// reports (ReportToGate: Settle, then Describe when due), the rule the server's coordinator and
// the simulator share (docs/guides/JOBS.md "Scheduling devices across jobs").
#include "server/round/gate_report.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::testing::ElementsAre;
using testing::FakePresence;
using testing::OneTensor;

TEST(DescribePacerTest, FirstReportIsDescribed) {
  DescribePacer pacer;
  EXPECT_TRUE(pacer.Due(0, 100));
}

TEST(DescribePacerTest, AtMostEveryIntervalWhileAsking) {
  DescribePacer pacer;
  ASSERT_TRUE(pacer.Due(3, 100));
  EXPECT_FALSE(pacer.Due(3, 101));
  EXPECT_FALSE(pacer.Due(5, 104.9));
  EXPECT_TRUE(pacer.Due(5, 100 + kDescribeIntervalS));
  EXPECT_FALSE(pacer.Due(5, 106));
  EXPECT_TRUE(pacer.Due(1, 110));
}

TEST(DescribePacerTest, NotAgainWhileAskingForNothing) {
  DescribePacer pacer;
  ASSERT_TRUE(pacer.Due(0, 100));
  EXPECT_FALSE(pacer.Due(0, 105));
  EXPECT_FALSE(pacer.Due(0, 1000));
  EXPECT_TRUE(pacer.Due(2, 1000.5));  // it asks: described at once
}

TEST(DescribePacerTest, DemandRisingFromZeroIsDescribedAtOnce) {
  DescribePacer pacer;
  ASSERT_TRUE(pacer.Due(0, 100));
  EXPECT_TRUE(pacer.Due(4, 100.5));
  // Still asking, or asking for more: no new rise.
  EXPECT_FALSE(pacer.Due(4, 101));
  EXPECT_FALSE(pacer.Due(6, 101.5));
  // Served (0), then asking again: a rise.
  EXPECT_FALSE(pacer.Due(0, 102));
  EXPECT_TRUE(pacer.Due(2, 102.5));
}

TEST(DescribePacerTest, AClockThatWentBackCountsAsDue) {
  DescribePacer pacer;
  ASSERT_TRUE(pacer.Due(1, 100));
  EXPECT_TRUE(pacer.Due(1, 90));
  EXPECT_FALSE(pacer.Due(1, 91));
}

// Records the order of the calls it gets.
class LogGate : public PlanningGate {
 public:
  bool MayPlan(std::string_view, double) override { return true; }
  void Settle(absl::Span<const std::string> in_flight, int64_t demand, double now_s) override {
    log.push_back(absl::StrCat("settle ", in_flight.size(), " ", demand, " @", now_s));
  }
  void Describe(JobFacts facts, double now_s) override {
    log.push_back(absl::StrCat("describe ", facts.devices.size(), " @", now_s));
  }
  std::vector<std::string> log;
};

TEST(ReportToGateTest, SettlesEveryTimeDescribesWhenDue) {
  v1::ServerConfig raw;
  raw.set_clients_per_round(2);
  raw.set_min_updates(1);
  raw.set_min_online_clients(2);
  raw.set_num_rounds(1);
  raw.mutable_selection()->set_overcommit(1.5);
  ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
  FakePresence presence;
  EngineOptions options;
  options.config = config;
  options.model = OneTensor(1);
  options.presence = &presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> engine,
                       RoundEngine::Create(std::move(options)));
  ASSERT_OK(testing::RegisterDevices(*engine, 4));
  for (ClientIndex i = 0; i < 4; ++i) presence.online.insert(i);
  ASSERT_OK(engine->Publish(0, engine->model(), nullptr));
  LogGate gate;
  DescribePacer pacer;
  std::vector<std::string> scratch;
  ReportToGate(*engine, 0, &gate, &pacer, &scratch);  // first report: asks for 3
  ReportToGate(*engine, 1, &gate, &pacer, &scratch);  // still asking, 1 s later
  ReportToGate(*engine, 5, &gate, &pacer, &scratch);  // still asking, 5 s since described
  engine->Advance(6);                                 // plans 3 tasks: asks for nothing
  ReportToGate(*engine, 6, &gate, &pacer, &scratch);
  ReportToGate(*engine, 20, &gate, &pacer, &scratch);  // asks for nothing: not described
  EXPECT_THAT(gate.log,
              ElementsAre("settle 0 3 @0", "describe 4 @0", "settle 0 3 @1", "settle 0 3 @5",
                          "describe 4 @5", "settle 3 0 @6", "settle 3 0 @20"));
}

}  // namespace
}  // namespace fedsched::round
