// The simulator's adapter over server/planner (PlannerSelector): the availability oracle, the
// feedback path, and small deterministic no-train runs through the real planner with each
// policy.
#include "sim/engine/planner_selector.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::ElementsAreArray;

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, "_", ::getpid());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A resolved SimConfig for driving a PlannerSelector by hand (no trace is loaded from it).
v1::SimConfig HandConfig(v1::SelectionPolicy policy, int32_t k) {
  v1::SimConfig c;
  c.set_num_clients(3);
  c.set_clients_per_round(k);
  c.mutable_selection()->set_policy(policy);
  c.mutable_selection()->set_overcommit(1.0);
  c.mutable_training()->set_batch_size(10);
  c.mutable_traces()->set_capacity_path("unused");
  auto resolved = ResolveSimConfig(c);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

std::vector<DeviceInfo> ThreeDevices() {
  std::vector<DeviceInfo> d(3);
  for (int i = 0; i < 3; ++i) {
    d[i].client = i;
    d[i].compute_ms_per_sample = 10.0 * (i + 1);
    d[i].num_samples = 100;
    d[i].sample_kb = 1.0;
  }
  return d;
}

TEST(PlannerSelectorTest, AvailabilityOracleDropsClientsGoingOfflineBeforeTheyFinish) {
  // Client 1's window ends after 1 ms: shorter than any prediction (>= 1 ms plus transfers).
  std::vector<AvailabilityRowSpec> rows(3);
  for (int i = 0; i < 3; ++i) {
    rows[i].trace_id = i;
    rows[i].finish_time_s = 10'000;
    rows[i].windows = {{0, i == 1 ? 0.001 : 5'000}};
  }
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace av, AvailabilityTrace::FromRows(rows, "t", false));
  for (v1::SelectionPolicy policy :
       {v1::SELECTION_POLICY_RANDOM, v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_FEDCASE}) {
    SCOPED_TRACE(PolicyName(policy));
    ASSERT_OK_AND_ASSIGN(auto selector,
                         PlannerSelector::Create(HandConfig(policy, 3), 4, 10'000, &av));
    EXPECT_EQ(selector->name(), PolicyName(policy));
    ASSERT_OK(selector->RegisterClients(ThreeDevices()));
    const std::vector<int32_t> online = {0, 1, 2};
    ASSERT_OK_AND_ASSIGN(std::vector<PlannedTask> tasks, selector->Select(1, 0.0, online, 3));
    ASSERT_EQ(tasks.size(), 2u);
    for (const PlannedTask& t : tasks) {
      EXPECT_NE(t.client, 1);
      EXPECT_EQ(t.local_steps, 4);
      EXPECT_GT(t.predicted_s, 0);
      EXPECT_TRUE(t.has_cache_plan);
      EXPECT_EQ(t.cache_plan.samples_to_train(), 40);
      EXPECT_EQ(t.cache_plan.capacity_samples(), 10);  // wss 0.1 x 100 samples
    }
  }
}

TEST(PlannerSelectorTest, FeedbackReachesThePlannerAndErrorsSurfaceInHealth) {
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ASSERT_OK_AND_ASSIGN(
      auto selector,
      PlannerSelector::Create(HandConfig(v1::SELECTION_POLICY_OORT, 2), 4, 10'000, &av));
  ASSERT_OK(selector->RegisterClients(ThreeDevices()));
  const std::vector<int32_t> online = {0, 1, 2};
  ASSERT_OK_AND_ASSIGN(std::vector<PlannedTask> tasks, selector->Select(1, 0.0, online, 2));
  ASSERT_EQ(tasks.size(), 2u);
  TaskReport done;
  done.client = tasks[0].client;
  done.round = 1;
  done.outcome = TaskOutcome::kAccepted;
  done.start_s = 0;
  done.end_s = 2.5;
  done.compute_s = 1.2;
  done.download_s = 0.5;
  done.upload_s = 0.5;
  done.io_s = 0.3;
  done.examples = 40;
  done.model_bytes = 10'000;
  done.cache_hits = 10;
  done.cache_misses = 30;
  done.mean_loss = 1.5;
  done.statistical_utility = 60;
  selector->Report(done);
  TaskReport failed = done;
  failed.client = tasks[1].client;
  failed.outcome = TaskOutcome::kFailedOffline;
  failed.end_s = 1.0;
  selector->Report(failed);
  selector->EndRound(1, 3.0, true);
  EXPECT_OK(selector->Health());
  EXPECT_EQ(selector->planner().predictor().observations(), 1);
  // Oort's exploration decays on the committed round.
  EXPECT_DOUBLE_EQ(selector->planner().epsilon(), 0.9 * 0.98);

  // A report the planner rejects (an unknown client) is kept for the engine to stop on.
  TaskReport unknown = done;
  unknown.client = 7;
  selector->Report(unknown);
  EXPECT_THAT(selector->Health(), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

// A small no-train run over the real traces: 300 clients, K = 10, 12 rounds.
v1::SimConfig SmallRun(v1::SelectionPolicy policy, uint64_t seed) {
  v1::SimConfig c;
  c.set_num_clients(300);
  c.set_clients_per_round(10);
  c.set_num_rounds(12);
  c.set_no_train(true);
  c.set_quiet(true);
  c.set_seed(seed);
  c.mutable_selection()->set_policy(policy);
  c.mutable_training()->set_batch_size(20);
  c.mutable_training()->set_local_steps(5);
  const std::string traces = SourceDir() + "/../shared/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_sample_size_path(traces + "fedcase/demo_capacity.csv");
  c.mutable_traces()->set_availability_path(traces + "mobiperf/avl_events_300.csv");
  return c;
}

// Runs `config` into a CSV file and returns its contents.
std::string RunToCsvFile(const v1::SimConfig& config, const std::string& name,
                         v1::PlannerState* state) {
  auto sim = BuildSimulation(config);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return "";
  auto* selector = dynamic_cast<PlannerSelector*>((*sim)->selector.get());
  EXPECT_NE(selector, nullptr) << "the planner drives selection unless builtin_selector is set";
  const std::string path = TempPath(name);
  {
    auto writer = CsvRoundWriter::Open(path, (*sim)->run_name);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return "";
    auto summary = (*sim)->simulator->Run(writer->get());
    EXPECT_TRUE(summary.ok()) << summary.status();
    if (summary.ok()) {
      EXPECT_EQ(summary->rounds_committed, config.num_rounds());
    }
  }
  if (selector != nullptr && state != nullptr) *state = selector->planner().ExportState();
  std::string csv = ReadFile(path);
  std::remove(path.c_str());
  return csv;
}

TEST(PlannerSelectorTest, EveryPolicyRunsThroughTheRealPlannerDeterministically) {
  const std::vector<std::string> columns = {
      "run",        "round",     "outcome",         "start_s",
      "virtual_s",  "virtual_h", "test_accuracy",   "test_loss",
      "train_loss", "online",    "selected",        "participants",
      "stragglers", "failed",    "cache_hit_ratio", "predictor_mape",
      "mean_task_s"};
  for (v1::SelectionPolicy policy :
       {v1::SELECTION_POLICY_RANDOM, v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_FEDCASE}) {
    const std::string name = PolicyName(policy);
    SCOPED_TRACE(name);
    v1::PlannerState state;
    const std::string csv = RunToCsvFile(SmallRun(policy, 5), name + "_a", &state);
    ASSERT_FALSE(csv.empty());
    std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
    ASSERT_GE(lines.size(), 13u);  // header + 12 committed rounds (+ any failed attempts)
    EXPECT_THAT(std::vector<std::string>(absl::StrSplit(lines[0], ',')), ElementsAreArray(columns));
    int committed = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      SCOPED_TRACE(lines[i]);
      std::vector<std::string> f = absl::StrSplit(lines[i], ',');
      ASSERT_EQ(f.size(), columns.size());
      EXPECT_EQ(f[0], name);
      if (f[2] != "committed") continue;
      EXPECT_EQ(std::stoi(f[1]), ++committed);
      // Up to ceil(10 x 1.3) tasks (fewer when the trace says some would go offline first); the
      // round commits with 5 (min_updates) to 10 (K) updates.
      const int selected = std::stoi(f[10]);
      const int participants = std::stoi(f[11]);
      EXPECT_LE(selected, 13);
      EXPECT_GE(participants, 5);
      EXPECT_LE(participants, std::min(10, selected));
      const double mape = std::stod(f[15]);
      EXPECT_TRUE(std::isfinite(mape) && mape >= 0);
      EXPECT_GT(std::stod(f[16]), 0);  // mean task seconds
    }
    EXPECT_EQ(committed, 12);
    EXPECT_EQ(state.last_planned_round(), 12);
    if (policy != v1::SELECTION_POLICY_RANDOM) {
      // Oort scored the rounds, alone or as FedCaSe's (default) base set.
      EXPECT_GT(state.oort().preferred_duration_s(), 0);
    }
    if (policy == v1::SELECTION_POLICY_FEDCASE) {
      EXPECT_TRUE(state.fedcase().has_range());
    }

    // Same seed, same CSV; another seed, another one.
    EXPECT_EQ(RunToCsvFile(SmallRun(policy, 5), name + "_b", nullptr), csv);
    EXPECT_NE(RunToCsvFile(SmallRun(policy, 6), name + "_c", nullptr), csv);
  }
}

TEST(PlannerSelectorTest, BuiltinSelectorIsRandomOnly) {
  v1::SimConfig c = SmallRun(v1::SELECTION_POLICY_OORT, 1);
  c.set_builtin_selector(true);
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("builtin")));
  c.mutable_selection()->set_policy(v1::SELECTION_POLICY_RANDOM);
  ASSERT_OK_AND_ASSIGN(auto sim, BuildSimulation(c));
  EXPECT_EQ(dynamic_cast<PlannerSelector*>(sim->selector.get()), nullptr);
}

}  // namespace
}  // namespace fedsched::sim
