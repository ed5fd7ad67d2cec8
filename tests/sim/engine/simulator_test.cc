// The event loop: a round computed by hand, offline failures, a stretch with nobody online,
// determinism, and the no-train speed path.
#include "sim/engine/simulator.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "sim/engine/builtin.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {
namespace {

using ::testing::HasSubstr;

// Picks clients in id order; records reports.
class FixedSelector : public ParticipantSelector {
 public:
  absl::Status RegisterClients(absl::Span<const DeviceInfo> devices) override {
    registered = static_cast<int>(devices.size());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<PlannedTask>> Select(int64_t round, double now_s,
                                                  absl::Span<const int32_t> online,
                                                  int32_t count) override {
    std::vector<int32_t> ids(online.begin(), online.end());
    std::sort(ids.begin(), ids.end());
    std::vector<PlannedTask> out;
    for (int32_t i = 0; i < count && i < static_cast<int32_t>(ids.size()); ++i) {
      PlannedTask t;
      t.client = ids[i];
      t.predicted_s = 100.0;
      out.push_back(std::move(t));
    }
    starts.push_back(now_s);
    return out;
  }
  void Report(const TaskReport& r) override { reports.push_back(r); }
  std::string name() const override { return "fixed"; }
  int registered = 0;
  std::vector<double> starts;
  std::vector<TaskReport> reports;
};

// Every task trains `examples` samples; half of the reads hit the cache.
class FixedLearner : public Learner {
 public:
  absl::StatusOr<std::vector<TaskWork>> StartTasks(int64_t,
                                                   absl::Span<const PlannedTask> tasks) override {
    std::vector<TaskWork> out(tasks.size());
    for (TaskWork& w : out) {
      w.examples = 100;
      w.cache_hits = 50;
      w.cache_misses = 50;
    }
    return out;
  }
  absl::Status Accept(int32_t client) override {
    accepted.push_back(client);
    return absl::OkStatus();
  }
  absl::StatusOr<ModelQuality> EndRound(int64_t, bool commit) override {
    ModelQuality q;
    q.evaluated = true;
    q.accuracy = 0.1 * (++rounds);
    return q;
  }
  int64_t ModelBytes() const override { return 125000; }  // 1,000 kbit
  int64_t NumSamples(int32_t) const override { return 100; }
  std::vector<int32_t> accepted;
  int rounds = 0;
};

class Rows : public RoundSink {
 public:
  void OnRound(const RoundRow& r) override { rows.push_back(r); }
  std::vector<RoundRow> rows;
};

CapacityTrace ThreeDevices() {
  // computation ms/sample, kbit/s, KB/sample.
  return *CapacityTrace::FromRows({{1, 10, 1000, 10}, {2, 20, 500, 10}, {3, 40, 250, 10}}, "t");
}

AvailabilityTrace Rows3(std::vector<std::vector<std::pair<double, double>>> windows,
                        double finish) {
  std::vector<AvailabilityRowSpec> rows(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    rows[i].trace_id = static_cast<int64_t>(i);
    rows[i].finish_time_s = finish;
    rows[i].windows = windows[i];
  }
  return *AvailabilityTrace::FromRows(std::move(rows), "t", false);
}

TEST(SimulatorTest, ThreeClientRoundComputedByHand) {
  // K = 2, overcommit 1.5 -> 3 tasks. Each task: 100 examples, 50 hits + 50 misses of 10 KB,
  // 1,000 kbit each way.
  //   client 0: compute 3*100*10/1000 = 3 s; comm 2*1000/1000 = 2 s;
  //             io 50*10*1e-4 + 50*10*5e-8 = 0.05 + 0.000025 s      -> 5.050025 s
  //   client 1: compute 6 s; comm 2*1000/500 = 4 s; io 0.050025     -> 10.050025 s
  //   client 2: compute 12 s; comm 2*1000/250 = 8 s; io 0.050025    -> 20.050025 s
  // FIRST_K closes at the 2nd arrival: t = 10.050025; client 2 is a straggler.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 3;
  o.clients_per_round = 2;
  o.overcommit = 1.5;
  o.num_rounds = 1;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  Rows rows;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&rows));
  ASSERT_EQ(rows.rows.size(), 1u);
  const RoundRow& r = rows.rows[0];
  EXPECT_NEAR(r.end_s, 10.050025, 1e-9);
  EXPECT_EQ(r.selected, 3);
  EXPECT_EQ(r.participants, 2);
  EXPECT_EQ(r.stragglers, 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_DOUBLE_EQ(r.cache_hit_ratio, 0.5);
  // predicted 100 s for both: |100 - 5.05| / 5.05 and |100 - 10.05| / 10.05.
  EXPECT_NEAR(r.predictor_mape, 0.5 * ((100 - 5.050025) / 5.050025 + (100 - 10.050025) / 10.050025),
              1e-9);
  EXPECT_EQ(learner.accepted, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(sel.reports.size(), 3u);
  EXPECT_EQ(sel.reports[2].client, 2);
  EXPECT_EQ(sel.reports[2].outcome, TaskOutcome::kStraggler);
  EXPECT_NEAR(sel.reports[0].compute_s, 3.0, 1e-12);
  EXPECT_NEAR(sel.reports[1].download_s, 2.0, 1e-12);
  EXPECT_EQ(s.rounds_committed, 1);
}

TEST(SimulatorTest, DeviceGoingOfflineMidTaskFails) {
  // Client 1 goes offline at t = 7, before its 10.05 s task ends; client 2 finishes at 20.05.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Rows3({{{0, 1000}}, {{0, 7}}, {{0, 1000}}}, 1000);
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 3;
  o.clients_per_round = 2;
  o.overcommit = 1.5;
  o.num_rounds = 1;
  o.min_online_clients = 3;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  Rows rows;
  ASSERT_OK(sim->Run(&rows).status());
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_NEAR(rows.rows[0].end_s, 20.050025, 1e-9);
  EXPECT_EQ(rows.rows[0].failed, 1);
  EXPECT_EQ(rows.rows[0].participants, 2);
  EXPECT_EQ(learner.accepted, (std::vector<int32_t>{0, 2}));
  ASSERT_EQ(sel.reports.size(), 3u);  // in virtual-time order: 0 done, 1 fails, 2 done
  EXPECT_EQ(sel.reports[1].client, 1);
  EXPECT_EQ(sel.reports[1].outcome, TaskOutcome::kFailedOffline);
  EXPECT_DOUBLE_EQ(sel.reports[1].end_s, 7);
}

TEST(SimulatorTest, NobodyOnlineStretchAdvancesTimeWithoutHanging) {
  // Everybody offline in [0, 5000); then online. The first round starts at t = 5000.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Rows3({{{5000, 9000}}, {{5000, 9000}}, {{5000, 9000}}}, 10000);
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 3;
  o.clients_per_round = 2;
  o.overcommit = 1.0;
  o.num_rounds = 3;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  EXPECT_EQ(sim->online_count(), 0);
  Rows rows;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&rows));
  ASSERT_EQ(rows.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows.rows[0].start_s, 5000);
  EXPECT_EQ(s.rounds_committed, 3);
}

TEST(SimulatorTest, NoClientEverOnlineStops) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Rows3({{}, {}, {}}, 100);
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 3;
  o.clients_per_round = 1;
  o.num_rounds = 2;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(nullptr));
  EXPECT_EQ(s.rounds_committed, 0);
  EXPECT_THAT(s.stop_reason, HasSubstr("no client"));
}

TEST(SimulatorTest, FailedRoundIsRetriedAfterTimeAdvances) {
  // Both devices go offline at t = 1 (tasks need >= 5 s): the round fails with 0 updates, and
  // is retried once they are back at t = 100.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Rows3({{{0, 1}, {100, 1000}}, {{0, 1}, {100, 1000}}}, 1000);
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 2;
  o.clients_per_round = 2;
  o.overcommit = 1.0;
  o.num_rounds = 1;
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  Rows rows;
  ASSERT_OK(sim->Run(&rows).status());
  ASSERT_EQ(rows.rows.size(), 2u);
  EXPECT_FALSE(rows.rows[0].committed);
  EXPECT_EQ(rows.rows[0].failed, 2);
  EXPECT_DOUBLE_EQ(rows.rows[1].start_s, 100);
  EXPECT_TRUE(rows.rows[1].committed);
  EXPECT_EQ(rows.rows[1].round, 1);
}

TEST(SimulatorTest, DeadlineClosesTheRound) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  FixedSelector sel;
  FixedLearner learner;
  Simulator::Options o;
  o.num_clients = 3;
  o.clients_per_round = 3;
  o.overcommit = 1.0;
  o.num_rounds = 1;
  o.min_updates = 2;
  o.round_deadline_s = 15;  // client 2 needs 20.05 s
  ASSERT_OK_AND_ASSIGN(auto sim, Simulator::Create(o, &cap, &av, &sel, &learner));
  Rows rows;
  ASSERT_OK(sim->Run(&rows).status());
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows.rows[0].end_s, 15);
  EXPECT_EQ(rows.rows[0].participants, 2);
  EXPECT_EQ(rows.rows[0].stragglers, 1);
  EXPECT_TRUE(rows.rows[0].committed);
}

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

v1::SimConfig SmallNoTrainConfig() {
  v1::SimConfig c;
  c.set_num_clients(2000);
  c.set_clients_per_round(20);
  c.set_num_rounds(50);
  c.set_no_train(true);
  c.set_quiet(true);
  c.set_seed(3);
  c.mutable_training()->set_batch_size(20);
  c.mutable_training()->set_local_steps(5);
  const std::string traces = SourceDir() + "/../shared/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_availability_path(traces + "mobiperf/avl_events_300.csv");
  return c;
}

std::string RunToCsv(const v1::SimConfig& config) {
  auto sim = BuildSimulation(config);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return "";
  struct Collect : RoundSink {
    void OnRound(const RoundRow& r) override { out << RoundCsvLine("x", r) << "\n"; }
    std::ostringstream out;
  } collect;
  auto summary = (*sim)->simulator->Run(&collect);
  EXPECT_TRUE(summary.ok()) << summary.status();
  return collect.out.str();
}

TEST(SimulatorTest, SameSeedSameCsv) {
  v1::SimConfig c = SmallNoTrainConfig();
  const std::string a = RunToCsv(c);
  const std::string b = RunToCsv(c);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  c.set_seed(4);
  EXPECT_NE(RunToCsv(c), a);
}

TEST(SimulatorTest, ShippedConfigsParse) {
  for (const char* name : {"speed_100k.textproto", "fmnist_1000.textproto"}) {
    v1::SimConfig c;
    ASSERT_OK(LoadTextConfig(SourceDir() + "/configs/sim/" + name, &c)) << name;
    EXPECT_OK(ResolveSimConfig(c).status());
  }
}

}  // namespace
}  // namespace fedsched::sim
