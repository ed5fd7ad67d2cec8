// A selection policy registered only by this test, through the public registration path
// (planner::RegisterSelectionPolicy), selects a simulated run's cohorts: fedsched-sim builds it
// from the config (and its --policy flag) through the same functions as the server. The worked
// example of docs/guides/EXTENDING.md "Adding a selection policy".
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/setup.h"
#include "tests/server/planner/largest_data_policy.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::RegisterLargestDataPolicy;

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

// 100 always-online clients, K = 5 without over-commitment, 3 rounds.
v1::SimConfig ToyRun() {
  v1::SimConfig c;
  c.set_num_clients(100);
  c.set_no_train(true);
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(5);
  s->set_num_rounds(3);
  s->set_seed(3);
  s->set_round_deadline_s(1800);
  s->mutable_selection()->set_overcommit(1.0);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_sample_size_path(traces + "fedcase/demo_capacity.csv");
  c.mutable_traces()->set_availability_format(v1::AVAILABILITY_FORMAT_ALWAYS_ON);
  return c;
}

// Collects the engine's round records.
struct Records : RoundSink {
  void OnRound(const RoundRow& row) override {}
  void OnRecord(const v1::RoundRecord& record, const v1::Model* model) override {
    records.push_back(record);
  }
  std::vector<v1::RoundRecord> records;
};

TEST(ToyPolicySimTest, ARegisteredPolicySelectsTheSimulatedCohorts) {
  ASSERT_OK(RegisterLargestDataPolicy());
  v1::SimConfig config = ToyRun();
  // Named as fedsched-sim --policy=largest_data names it; it implies no cache (the config's).
  ASSERT_OK(ApplySelectionFlags("largest_data", "", "", &config));
  EXPECT_EQ(config.server().selection().policy_name(), "largest_data");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulation> sim, BuildSimulation(config));
  EXPECT_EQ(sim->run_name, "largest_data");
  Records sink;
  ASSERT_OK_AND_ASSIGN(RunSummary summary, sim->simulator->Run(&sink));
  EXPECT_EQ(summary.rounds_committed, 3);

  // Every client's samples, largest first: the first round's cohort is the five largest (by
  // value: clients may tie); each round's tasks end before the next round, so every round's.
  const profile::ProfileBook& book = sim->simulator->engine().book();
  std::vector<double> all;
  for (int64_t i = 0; i < book.size(); ++i) {
    all.push_back(static_cast<double>(book.state(i).num_samples));
  }
  std::sort(all.begin(), all.end(), std::greater<>());
  ASSERT_GE(all.size(), 5u);
  const std::vector<double> top5(all.begin(), all.begin() + 5);
  ASSERT_FALSE(sink.records.empty());
  for (const v1::RoundRecord& record : sink.records) {
    SCOPED_TRACE(record.round());
    std::vector<double> cohort;
    for (const v1::SelectionReason& r : record.cohort()) cohort.push_back(r.score());
    std::sort(cohort.begin(), cohort.end(), std::greater<>());
    EXPECT_EQ(cohort, top5);
  }
}

}  // namespace
}  // namespace fedsched::sim
