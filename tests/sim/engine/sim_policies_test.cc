// How simulated clients meet the round engine (sim/engine/sim_client.h: identity, device
// profile, update metrics, the trace oracle) and small deterministic no-train runs through the
// engine's planner with each selection policy, synchronous and FedBuff. (CMake target
// sim_planner_selector_test: the name tests/CMakeLists.txt lists.)
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
#include "sim/engine/sim_client.h"

namespace fedsched::sim {
namespace {

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

TEST(SimClientTest, IdentityProfileAndMetrics) {
  EXPECT_EQ(SimIdentity(42), "sim-42");
  DeviceInfo d;
  d.client = 7;
  d.compute_ms_per_sample = 12.5;
  d.num_samples = 300;
  d.sample_kb = 61.8;
  const v1::DeviceProfile p = SimDeviceProfile(d);
  EXPECT_EQ(p.device_model(), "sim-device");
  EXPECT_DOUBLE_EQ(p.compute_ms_per_sample(), 37.5);  // 3 x inference ms (FedScale)
  EXPECT_EQ(p.num_samples(), 300);
  EXPECT_EQ(p.sample_bytes(), 61800);
  EXPECT_DOUBLE_EQ(p.bandwidth_hint_kbps(), 0);
  d.model = "SM-A207F";
  EXPECT_EQ(SimDeviceProfile(d).device_model(), "SM-A207F");

  TaskWork w;
  w.examples = 100;
  w.cache_hits = 30;
  w.cache_misses = 70;
  w.mean_loss = 0.8;
  w.statistical_utility = 85;
  TaskTiming t;
  t.download_s = 0.5;
  t.compute_s = 3;
  t.io_s = 0.25;
  t.upload_s = 0.5;
  const v1::UpdateMetrics m = SimUpdateMetrics(w, t, 407080);
  EXPECT_EQ(m.num_examples(), 100);
  EXPECT_DOUBLE_EQ(m.train_seconds(), 3);
  EXPECT_DOUBLE_EQ(m.download_seconds(), 0.5);
  EXPECT_EQ(m.download_bytes(), 407080);
  EXPECT_DOUBLE_EQ(m.mean_loss(), 0.8);
  EXPECT_DOUBLE_EQ(m.statistical_utility(), 85);
  EXPECT_EQ(m.cache_hits(), 30);
  EXPECT_EQ(m.cache_misses(), 70);
  EXPECT_DOUBLE_EQ(m.io_seconds(), 0.25);
}

TEST(SimClientTest, TraceOracleNeedsTheWindowToLastAndMapsIndices) {
  // Client 0 online in [0, 100), client 1 in [50, 60), client 2 never.
  std::vector<AvailabilityRowSpec> rows(3);
  for (int i = 0; i < 3; ++i) {
    rows[i].trace_id = i;
    rows[i].finish_time_s = 1000;
  }
  rows[0].windows = {{0, 100}};
  rows[1].windows = {{50, 60}};
  ASSERT_OK_AND_ASSIGN(AvailabilityTrace av, AvailabilityTrace::FromRows(rows, "t", false));
  TraceAvailabilityOracle identity(&av, nullptr);
  EXPECT_EQ(identity.ProbabilityOnline(0, 10, 100), 1.0);
  EXPECT_EQ(identity.ProbabilityOnline(0, 10, 100.5), 0.0);  // the window ends first
  EXPECT_EQ(identity.ProbabilityOnline(1, 10, 20), 0.0);     // offline now
  EXPECT_EQ(identity.ProbabilityOnline(1, 55, 59), 1.0);
  EXPECT_EQ(identity.ProbabilityOnline(2, 0, 1), 0.0);
  // Engine index 0 is client 1 (client 0 had no data), index 1 is client 2.
  std::vector<int32_t> client_of = {1, 2};
  TraceAvailabilityOracle mapped(&av, &client_of);
  EXPECT_EQ(mapped.ProbabilityOnline(0, 55, 59), 1.0);
  EXPECT_EQ(mapped.ProbabilityOnline(0, 10, 20), 0.0);
  EXPECT_EQ(mapped.ProbabilityOnline(2, 55, 59), 0.0);  // unknown index
}

// A small no-train run over the real traces: 300 clients, K = 10, 12 rounds.
v1::SimConfig SmallRun(v1::SelectionPolicy policy, uint64_t seed, bool fedbuff) {
  v1::SimConfig c;
  c.set_num_clients(300);
  c.set_no_train(true);
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(10);
  s->set_num_rounds(12);
  s->set_seed(seed);
  s->set_round_deadline_s(1800);
  s->mutable_selection()->set_policy(policy);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  s->mutable_aggregation()->set_async_fedbuff(fedbuff);
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_sample_size_path(traces + "fedcase/demo_capacity.csv");
  c.mutable_traces()->set_availability_path(traces + "mobiperf/avl_events_300.csv");
  return c;
}

// Runs `config` into a CSV file and returns its contents; `state` gets the planner's state.
std::string RunToCsvFile(const v1::SimConfig& config, const std::string& name,
                         v1::PlannerState* state) {
  auto sim = BuildSimulation(config);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return "";
  const std::string path = TempPath(name);
  {
    auto writer = CsvRoundWriter::Open(path, (*sim)->run_name);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return "";
    auto summary = (*sim)->simulator->Run(writer->get());
    EXPECT_TRUE(summary.ok()) << summary.status();
    if (summary.ok()) {
      EXPECT_EQ(summary->rounds_committed, config.server().num_rounds());
    }
  }
  if (state != nullptr) *state = (*sim)->simulator->engine().planner().ExportState();
  std::string csv = ReadFile(path);
  std::remove(path.c_str());
  return csv;
}

// Checks the CSV's columns and per-round bounds; returns the committed rounds.
int CheckRows(const std::string& csv, const std::string& run, bool fedbuff) {
  const std::vector<std::string> columns = absl::StrSplit(
      "run,round,outcome,start_s,virtual_s,virtual_h,test_accuracy,test_loss,train_loss,online,"
      "selected,participants,stragglers,failed,cache_hit_ratio,predictor_mape,mean_task_s,"
      "staleness_mean,staleness_max,dropped_stale,oom_failures,passed_over,memory_mape,"
      "dp_epsilon,dp_delta,dp_clip_norm,secagg_bytes_up,secagg_bytes_down,secagg_masked_bytes,"
      "secagg_round_trips,secagg_unmask_answers,uplink_bytes,downlink_bytes,stale_folded,"
      "stale_weight_mean",
      ',');
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  EXPECT_GE(lines.size(), 13u);  // header + 12 committed rounds (+ any failed attempts)
  if (lines.empty()) return 0;
  EXPECT_THAT(std::vector<std::string>(absl::StrSplit(lines[0], ',')), ElementsAreArray(columns));
  int committed = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(f.size(), columns.size());
    if (f.size() != columns.size()) continue;
    EXPECT_EQ(f[0], run);
    if (f[2] != "committed") continue;
    EXPECT_EQ(std::stoi(f[1]), ++committed);
    // Up to ceil(10 x 1.3) tasks (fewer when the trace says some would go offline first; under
    // FedBuff only the free slots); the round commits with 5 (min_updates) to 10 (K) updates,
    // exactly K under FedBuff unless its deadline passed.
    const int selected = std::stoi(f[10]);
    const int participants = std::stoi(f[11]);
    EXPECT_LE(selected, 13);
    EXPECT_GE(participants, 5);
    EXPECT_LE(participants, 10);
    if (!fedbuff) {
      EXPECT_LE(participants, selected);
    }
    const double mape = std::stod(f[15]);
    EXPECT_TRUE(std::isfinite(mape) && mape >= 0);
    EXPECT_GT(std::stod(f[16]), 0);  // mean task seconds
    // FedBuff's staleness (model versions) and stale drops, as the server's metrics.csv; all 0
    // under synchronous aggregation.
    const double staleness_mean = std::stod(f[17]);
    const int staleness_max = std::stoi(f[18]);
    const int dropped_stale = std::stoi(f[19]);
    EXPECT_GE(staleness_mean, 0);
    EXPECT_GE(staleness_max + 1e-9, staleness_mean);
    EXPECT_GE(dropped_stale, 0);
    if (!fedbuff) {
      EXPECT_EQ(staleness_max, 0);
      EXPECT_EQ(dropped_stale, 0);
    }
  }
  return committed;
}

TEST(SimPoliciesTest, EveryPolicyRunsThroughTheEngineDeterministically) {
  for (bool fedbuff : {false, true}) {
    for (v1::SelectionPolicy policy :
         {v1::SELECTION_POLICY_RANDOM, v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_FEDCASE}) {
      const std::string name = absl::StrCat(PolicyName(policy), fedbuff ? "-fedbuff" : "");
      SCOPED_TRACE(name);
      v1::PlannerState state;
      const std::string csv = RunToCsvFile(SmallRun(policy, 5, fedbuff), name + "_a", &state);
      ASSERT_FALSE(csv.empty());
      EXPECT_EQ(CheckRows(csv, name, fedbuff), 12);
      // Synchronous rounds are each planned; FedBuff versions only when slots were free.
      if (fedbuff) {
        EXPECT_GT(state.last_planned_round(), 1);
        EXPECT_LE(state.last_planned_round(), 12);
      } else {
        EXPECT_EQ(state.last_planned_round(), 12);
      }
      if (policy != v1::SELECTION_POLICY_RANDOM) {
        // Oort scored the rounds, alone or as FedCaSe's (default) base set.
        EXPECT_GT(state.oort().preferred_duration_s(), 0);
      }
      if (policy == v1::SELECTION_POLICY_FEDCASE) {
        EXPECT_TRUE(state.fedcase().has_range());
      }
      // Per-client experiences are persisted only where FedCaSe selects with them.
      EXPECT_EQ(state.fedcase().experiences_size() > 0, policy == v1::SELECTION_POLICY_FEDCASE);
      // Same seed, same CSV; another seed, another one.
      EXPECT_EQ(RunToCsvFile(SmallRun(policy, 5, fedbuff), name + "_b", nullptr), csv);
      EXPECT_NE(RunToCsvFile(SmallRun(policy, 6, fedbuff), name + "_c", nullptr), csv);
    }
  }
}

// --policy=fedsched runs exactly as fedcase with the preset's levers spelled out and the LRU
// cache (docs/ALGORITHMS.md §11; the experiment's fedsched_saa row), and not as fedcase + LRU
// alone. (In this small run only the extension changes the CSV; the two switches and the stale
// updates are checked on the resolved config, in SelectionPresetTest and in
// StaleUpdatesRoundConfigTest.)
TEST(SimPoliciesTest, FedschedIsFedcaseWithItsLeversSpelledOut) {
  v1::SimConfig preset = SmallRun(v1::SELECTION_POLICY_FEDSCHED, 5, false);
  preset.set_run_name("same");
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(preset));
  EXPECT_TRUE(resolved.server().selection().workload_sizing());
  EXPECT_TRUE(resolved.server().selection().oort().hold_round_threshold());
  EXPECT_EQ(resolved.server().selection().extend_workload().beta(), 0.5);
  EXPECT_EQ(resolved.server().cache().policy(), v1::CACHE_POLICY_LRU);
  EXPECT_TRUE(resolved.server().aggregation().stale_updates().enable());
  v1::SimConfig alone = SmallRun(v1::SELECTION_POLICY_FEDCASE, 5, false);
  alone.set_run_name("same");
  alone.mutable_server()->mutable_cache()->set_policy(v1::CACHE_POLICY_LRU);
  v1::SimConfig spelled = alone;
  v1::ServerConfig* s = spelled.mutable_server();
  s->mutable_selection()->set_workload_sizing(true);
  s->mutable_selection()->mutable_oort()->set_hold_round_threshold(true);
  s->mutable_selection()->mutable_extend_workload()->set_beta(0.5);
  s->mutable_aggregation()->mutable_stale_updates()->set_enable(true);
  v1::PlannerState state;
  const std::string csv = RunToCsvFile(preset, "fedsched_preset", &state);
  ASSERT_FALSE(csv.empty());
  EXPECT_EQ(CheckRows(csv, "same", false), 12);
  EXPECT_GT(state.fedcase().experiences_size(), 0);  // persisted, as under fedcase
  EXPECT_EQ(RunToCsvFile(spelled, "fedsched_spelled", nullptr), csv);
  EXPECT_NE(RunToCsvFile(alone, "fedcase_lru_alone", nullptr), csv);
}

}  // namespace
}  // namespace fedsched::sim
