// The simulator over the round engine: rounds computed by hand with scripted learners and
// durations (first-K, offline failures, a stretch with nobody online, failed rounds re-planned
// and backed off, deadlines in both closing modes, FedBuff versions with stale updates),
// determinism, and the shipped configs.
#include "sim/engine/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

// Resolves `config` and builds a simulator from the given parts.
absl::StatusOr<std::unique_ptr<Simulator>> Make(const v1::SimConfig& config,
                                                const CapacityTrace* capacity,
                                                const AvailabilityTrace* availability,
                                                Learner* learner,
                                                TaskDurations* durations = nullptr) {
  SimulatorParts parts;
  absl::StatusOr<v1::SimConfig> resolved = ResolveSimConfig(config);
  if (!resolved.ok()) return resolved.status();
  parts.config = *resolved;
  parts.capacity = capacity;
  parts.availability = availability;
  parts.learner = learner;
  parts.durations = durations;
  return Simulator::Create(std::move(parts));
}

// Each task: 100 examples (20 x 5), 50 hits + 50 misses of 10 KB, 1,000 kbit each way:
//   client 0: compute 3*100*10/1000 = 3 s; comm 2*1000/1000 = 2 s;
//             io 50*10*1e-4 + 50*10*5e-8 = 0.05 + 0.000025 s      -> 5.050025 s
//   client 1: compute 6 s; comm 2*1000/500 = 4 s; io 0.050025     -> 10.050025 s
//   client 2: compute 12 s; comm 2*1000/250 = 8 s; io 0.050025    -> 20.050025 s
constexpr double kT0 = 5.050025, kT1 = 10.050025, kT2 = 20.050025;
constexpr int64_t kModelBytes = 125'000;  // 1,000 kbit

TEST(SimulatorTest, ThreeClientRoundComputedByHand) {
  // K = 2, overcommit 1.5 -> 3 tasks; FIRST_K closes at the 2nd arrival; client 2 straggles.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, kModelBytes);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(3, 2, 1.5, 1), &cap, &av, &learner));
  EXPECT_EQ(sim->engine().book().size(), 3);
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 1u);
  const RoundRow& r = out.rows[0];
  EXPECT_NEAR(r.end_s, kT1, 1e-9);
  EXPECT_EQ(r.selected, 3);
  EXPECT_EQ(r.participants, 2);
  EXPECT_EQ(r.stragglers, 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_DOUBLE_EQ(r.cache_hit_ratio, 0.5);
  EXPECT_NEAR(r.mean_duration_s, (kT0 + kT1) / 2, 1e-9);
  EXPECT_TRUE(std::isfinite(r.predictor_mape) && r.predictor_mape > 0);
  EXPECT_DOUBLE_EQ(r.quality.train_loss, 1.0);
  EXPECT_THAT(learner.accepted, ElementsAre(Pair(0, 1), Pair(1, 1)));
  // FedAvg of the deltas 1 (client 0) and 2 (client 1), equal examples.
  EXPECT_THAT(out.models, ElementsAre(1.5f));
  EXPECT_EQ(out.records[0].updates_accepted(), 2);
  EXPECT_EQ(out.records[0].stragglers_size(), 1);
  EXPECT_EQ(s.rounds_committed, 1);
  EXPECT_THAT(s.stop_reason, HasSubstr("completed 1 rounds"));
}

TEST(SimulatorTest, PyramidFlGivesTheFastestParticipantMoreStepsThroughThePlanner) {
  // As above, under PyramidFL over the capacity trace: the round is expected to close at the
  // 2nd fastest (client 1, ~10 s); client 0 (~5 s, 0.2 s of compute per step) is planned about
  // half of its idle time in extra steps (docs/ALGORITHMS.md §10); client 2 straggles and keeps 5.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, kModelBytes);
  ScriptedDurations durations(&cap);
  v1::SimConfig config = HandConfig(3, 2, 1.5, 3);
  config.mutable_server()->mutable_selection()->set_policy(v1::SELECTION_POLICY_PYRAMIDFL);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(config, &cap, &av, &learner, &durations));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  EXPECT_EQ(s.rounds_committed, 3);
  int32_t most_steps_of_0 = 0;
  for (const TrainTask& t : learner.trained) {
    if (t.client == 0) most_steps_of_0 = std::max(most_steps_of_0, t.local_steps);
    if (t.client == 2) {
      EXPECT_EQ(t.local_steps, 5);
    }
  }
  EXPECT_GT(most_steps_of_0, 5);
  EXPECT_LE(most_steps_of_0, 55);  // max_factor 11
  for (const RoundRow& r : out.rows) EXPECT_EQ(r.participants, 2);
}

TEST(SimulatorTest, DeviceGoingOfflineMidTaskFails) {
  // Client 1 goes offline at t = 7, before its 10.05 s task ends (the planner predicted about
  // 6.3 s, so the trace oracle let it in); client 2 finishes at 20.05.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Windows({{{0, 1000}}, {{0, 7}}, {{0, 1000}}}, 1000);
  ScriptedLearner learner(3, 20, kModelBytes);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(3, 2, 1.5, 1), &cap, &av, &learner));
  Collect out;
  ASSERT_OK(sim->Run(&out).status());
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_NEAR(out.rows[0].end_s, kT2, 1e-9);
  EXPECT_EQ(out.rows[0].failed, 1);
  EXPECT_EQ(out.rows[0].participants, 2);
  EXPECT_EQ(out.rows[0].stragglers, 0);
  EXPECT_THAT(learner.accepted, ElementsAre(Pair(0, 1), Pair(2, 1)));
  EXPECT_EQ(sim->engine().book().profile(1).failures(), 1);
}

TEST(SimulatorTest, NobodyOnlineStretchAdvancesTimeWithoutHanging) {
  // Everybody offline in [0, 5000), then online: the first round starts at t = 5000.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Windows({{{5000, 9000}}, {{5000, 9000}}, {{5000, 9000}}}, 10000);
  ScriptedLearner learner(3, 20, kModelBytes);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(3, 2, 1.0, 3), &cap, &av, &learner));
  EXPECT_EQ(sim->online_count(), 0);
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(out.rows[0].start_s, 5000);
  EXPECT_EQ(out.rows[0].online, 3);
  EXPECT_EQ(s.rounds_committed, 3);
}

// Nobody with data ever online is an error, not a normal stop.
TEST(SimulatorTest, NoClientEverOnlineIsAnError) {
  CapacityTrace cap = ThreeDevices();
  // Only client 0 is ever online, and it has no data.
  AvailabilityTrace av = Windows({{{0, 50}}, {}, {}}, 100);
  ScriptedLearner learner(3, 20, kModelBytes);
  learner.samples_[0] = 0;
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(3, 1, 1.0, 2), &cap, &av, &learner));
  EXPECT_THAT(sim->Run(nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("none of the 2 clients with data is ever online"),
                             HasSubstr("no round can ever start"))));
}

// Fewer than min_online_clients ever online at once stops at once with an
// error naming both numbers (the run used to wait for ever, silently).
TEST(SimulatorTest, TooFewEverOnlineAtOnceIsAnError) {
  CapacityTrace cap = ThreeDevices();
  // Never more than one online at a time; [10, 20) and [20, 30) touch but do not overlap.
  AvailabilityTrace av = Windows({{{0, 10}}, {{10, 20}}, {{20, 30}, {60, 70}}}, 100);
  ScriptedLearner learner(3, 20, kModelBytes);
  v1::SimConfig c = HandConfig(3, 2, 1.0, 2);
  c.mutable_server()->set_min_online_clients(2);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner));
  EXPECT_THAT(sim->Run(nullptr).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("min_online_clients is 2"),
                             HasSubstr("at most 1 of the 3 clients with data are online at once"),
                             HasSubstr("no round can ever start"))));
}

// While fewer than min_online_clients are online the run says so (the
// progress line prints these notes at the default level).
TEST(SimulatorTest, WaitingForMinOnlineClientsIsReported) {
  CapacityTrace cap = ThreeDevices();
  // Two clients online together only in [500, 600).
  AvailabilityTrace av = Windows({{{0, 600}}, {{500, 600}}, {}}, 1000);
  ScriptedLearner learner(3, 20, kModelBytes);
  v1::SimConfig c = HandConfig(3, 2, 1.0, 1);
  c.mutable_server()->set_min_online_clients(2);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner));
  struct Waits : Collect {
    void OnWaiting(double virtual_s, int32_t online, int32_t needed) override {
      notes.push_back({virtual_s, online, needed});
    }
    std::vector<std::tuple<double, int32_t, int32_t>> notes;
  } out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_FALSE(out.notes.empty());
  EXPECT_EQ(out.notes[0], std::make_tuple(0.0, 1, 2));
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(out.rows[0].start_s, 500);
  EXPECT_EQ(s.rounds_committed, 1);
}

// Through the simulator: availability boundaries in milliseconds over
// hundreds of periods. At every round's opening the simulator's online count equals the
// trace's own count at that time.
TEST(SimulatorTest, OnlineCountFollowsMillisecondTraceOverManyPeriods) {
  constexpr int kClients = 40;
  constexpr double kPeriod = 30.123;  // seconds, boundaries on whole milliseconds
  std::vector<std::vector<std::pair<double, double>>> windows(kClients);
  for (int c = 0; c < kClients; ++c) {
    // Client c: online [c * 0.737 s, + 10.011 s), modulo the period.
    const double s = (c * 737 % 30123) / 1000.0;
    const double e = s + 10.011;
    if (e <= kPeriod) {
      windows[c] = {{s, e}};
    } else {
      windows[c] = {{s, kPeriod}, {0, e - kPeriod}};
    }
  }
  AvailabilityTrace av = Windows(windows, kPeriod);
  std::vector<DeviceCapacity> devices;
  for (int c = 0; c < kClients; ++c) devices.push_back({c, 10, 1000, 10});
  ASSERT_OK_AND_ASSIGN(CapacityTrace cap, CapacityTrace::FromRows(devices, "t"));
  ScriptedLearner learner(kClients, 20, kModelBytes);
  ScriptedDurations durations;  // 1 s per task
  v1::SimConfig c = HandConfig(kClients, 1, 1.0, 0);
  c.set_max_virtual_hours(200 * kPeriod / 3600.0);  // 200 periods
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner, &durations));
  Collect out;
  ASSERT_OK(sim->Run(&out).status());
  ASSERT_GT(out.rows.size(), 3000u);
  for (const RoundRow& row : out.rows) {
    int32_t trace_count = 0;
    for (int k = 0; k < kClients; ++k) trace_count += av.IsAvailable(k, row.start_s);
    ASSERT_EQ(row.online, trace_count) << "round " << row.round << " at " << row.start_s << " s";
  }
  EXPECT_GT(out.rows.back().start_s, 190 * kPeriod);
}

// Pace steering modelled (server.pacing set): of 60 always-on devices about the pool (4) are
// checked in at any moment, only they are candidates, and rounds still run one after another.
TEST(SimulatorTest, ModelledPaceSteeringKeepsAboutThePoolCheckedIn) {
  constexpr int kClients = 60;
  std::vector<DeviceCapacity> devices;
  for (int c = 0; c < kClients; ++c) devices.push_back({c, 10, 1000, 10});
  ASSERT_OK_AND_ASSIGN(CapacityTrace cap, CapacityTrace::FromRows(devices, "t"));
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(kClients, 20, kModelBytes);
  ScriptedDurations durations;  // 1 s per task
  v1::SimConfig c = HandConfig(kClients, 2, 1.0, 30);
  c.mutable_server()->set_min_updates(1);
  c.mutable_server()->set_min_online_clients(1);  // pool = max(2 x 2 x 1.0, 1 + 3) = 4
  c.mutable_server()->mutable_pacing();           // set: modelled
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner, &durations));
  // Cycle 60 x 5 s / 4 = 75 s: each device is checked in 5 s of every 75.
  double sum = 0;
  for (int t = 0; t < 750; ++t) {
    int checked_in = 0;
    for (int i = 0; i < kClients; ++i) checked_in += sim->CheckedIn(i, t) ? 1 : 0;
    sum += checked_in;
  }
  EXPECT_NEAR(sum / 750, 4.0, 0.5);
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  EXPECT_EQ(s.rounds_committed, 30);
  std::set<int32_t> took_part;
  for (const auto& [client, round] : learner.accepted) took_part.insert(client);
  EXPECT_GT(took_part.size(), 10u) << "devices take turns as they check in";
  // Not modelled without server.pacing: every online device is a candidate.
  ScriptedLearner other(kClients, 20, kModelBytes);
  c.mutable_server()->clear_pacing();
  ASSERT_OK_AND_ASSIGN(auto plain, Make(c, &cap, &av, &other, &durations));
  for (int i = 0; i < kClients; ++i) EXPECT_TRUE(plain->CheckedIn(i, 1.0));
}

TEST(SimulatorTest, ClientsWithoutDataNeverRegister) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, kModelBytes);
  learner.samples_[1] = 0;
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(3, 2, 1.0, 1), &cap, &av, &learner));
  EXPECT_EQ(sim->engine().book().size(), 2);
  EXPECT_EQ(sim->online_count(), 2);
  Collect out;
  ASSERT_OK(sim->Run(&out).status());
  // Engine index 1 is simulated client 2: its task ends at 20.05 s.
  EXPECT_THAT(learner.accepted, ElementsAre(Pair(0, 1), Pair(2, 1)));
  EXPECT_NEAR(out.rows[0].end_s, kT2, 1e-9);
}

TEST(SimulatorTest, FailedRoundIsRePlannedOnceClientsReturn) {
  // Round 1's first tasks take 30 s but both devices go offline at t = 20: the round fails with
  // 0 updates (min_updates 1) and is re-planned, under the same round number with fresh task
  // ids, once they are back at t = 100; the re-planned tasks take 5 s.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = Windows({{{0, 20}, {100, 1000}}, {{0, 20}, {100, 1000}}}, 1000);
  ScriptedLearner learner(2, 20, kModelBytes);
  ScriptedDurations durations;
  durations.by_task = {{"t1-1", 30}, {"t1-2", 30}, {"t1-3", 5}, {"t1-4", 5}};
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(2, 2, 1.0, 1), &cap, &av, &learner, &durations));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_FALSE(out.rows[0].committed);
  EXPECT_EQ(out.rows[0].round, 1);
  EXPECT_EQ(out.rows[0].failed, 2);
  EXPECT_DOUBLE_EQ(out.rows[0].end_s, 20);
  EXPECT_TRUE(out.rows[1].committed);
  EXPECT_EQ(out.rows[1].round, 1);
  EXPECT_DOUBLE_EQ(out.rows[1].start_s, 100);
  EXPECT_DOUBLE_EQ(out.rows[1].end_s, 105);
  EXPECT_THAT(out.records[1].accepted_task_ids(), ElementsAre("t1-3", "t1-4"));
  EXPECT_THAT(learner.ends, ElementsAre(Pair(1, false), Pair(1, true)));
  EXPECT_EQ(s.rounds_failed, 1);
}

TEST(SimulatorTest, RepeatedFailuresBackOffAndTheSimulatorWakesTheEngine) {
  // min_updates 2, but client 1's tasks take 1,000 s against a 5 s deadline: every attempt
  // fails at its deadline. After the 5th failure (t = 25) the engine waits 1 s, then 2 s, ...
  // before re-planning, and nothing else happens meanwhile: the simulator's wake-up events
  // advance it at t = 26 and t = 33 (failure at 31, + 2 s).
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(2, 20, kModelBytes);
  ScriptedDurations durations;
  durations.by_client = {{0, 1}, {1, 1000}};
  v1::SimConfig c = HandConfig(2, 2, 1.0, 1);
  c.mutable_server()->set_min_updates(2);
  c.mutable_server()->set_round_deadline_s(5);
  c.set_max_virtual_hours(0.01);  // 36 s
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner, &durations));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 6u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(out.rows[i].start_s, 5.0 * i);
    EXPECT_FALSE(out.rows[i].committed);
  }
  EXPECT_DOUBLE_EQ(out.rows[5].start_s, 26);
  EXPECT_DOUBLE_EQ(out.rows[5].end_s, 31);
  EXPECT_EQ(s.rounds_failed, 6);
  EXPECT_DOUBLE_EQ(sim->engine().next_plan_s(), 33);
  EXPECT_THAT(s.stop_reason, HasSubstr("virtual time limit"));
}

// The collapse guard runs in the simulator as in the server (RoundEngine::GuardCommitted,
// docs/guides/SECURITY.md "Updates"): round 2's first attempt folds a delta of -5 from client 0,
// the model drops from 1.5 to 0 (the scripted accuracy is the model's value, 1.5 below the best),
// so the round is taken back as a failed one before it is published; the previous model stays
// and the re-planned round commits 1.5 + 1.5.
TEST(SimulatorTest, CollapsedRoundIsTakenBackAsInTheServer) {
  class PoisonOnce : public ScriptedLearner {
   public:
    using ScriptedLearner::ScriptedLearner;
    absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                   const v1::Model& global) override {
      absl::StatusOr<std::vector<TrainedTask>> out = ScriptedLearner::Train(tasks, global);
      if (!out.ok()) return out;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i].round == 2 && tasks[i].client == 0 && !poisoned_) {
          (*out)[i].delta = std::make_shared<v1::Model>(OneFloatModel(-5));
          poisoned_ = true;
        }
      }
      return out;
    }

   private:
    bool poisoned_ = false;
  };
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  PoisonOnce learner(2, 20, kModelBytes);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(HandConfig(2, 2, 1.0, 2), &cap, &av, &learner));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 3u);
  EXPECT_TRUE(out.rows[0].committed);
  EXPECT_FALSE(out.rows[1].committed);
  EXPECT_EQ(out.rows[1].round, 2);
  EXPECT_EQ(out.records[1].outcome(), v1::ROUND_OUTCOME_FAILED);
  EXPECT_THAT(learner.ends, ElementsAre(Pair(1, true), Pair(2, true), Pair(2, true)));
  EXPECT_TRUE(out.rows[2].committed);
  EXPECT_EQ(out.rows[2].round, 2);
  EXPECT_THAT(out.models, ElementsAre(1.5f, -1.0f, 3.0f));
  EXPECT_EQ(s.rounds_committed, 2);
  EXPECT_EQ(s.rounds_failed, 1);
  EXPECT_EQ(sim->engine().version(), 2);
}

// The collapse guard's reference from round 0 runs in the simulator too: the learner's
// evaluation of the initial model (0.8) is handed to the engine before round 1, so a poisoner
// present from the first round (client 0's delta -8 beside client 1's +1; accuracy 0.8 +
// model / 10 = 0.45) gets no round published: every attempt is taken back, the model stays 0.
TEST(SimulatorTest, PoisonerFromRoundOneGetsNoRoundPublishedBelowTheInitialModel) {
  class PoisonedFromTheStart : public ScriptedLearner {
   public:
    using ScriptedLearner::ScriptedLearner;
    absl::StatusOr<std::optional<ModelQuality>> EvaluateInitial() override {
      ModelQuality q;
      q.evaluated = true;
      q.accuracy = 0.8;
      return std::optional<ModelQuality>(q);
    }
    absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                          const v1::Model& global) override {
      absl::StatusOr<ModelQuality> q = ScriptedLearner::EndRound(round, committed, global);
      if (q.ok()) q->accuracy = std::clamp(0.8 + global.tensors(0).data(0) / 10.0, 0.0, 1.0);
      return q;
    }
  };
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  PoisonedFromTheStart learner(2, 20, kModelBytes);
  learner.delta_of = {{0, -8.0f}, {1, 1.0f}};
  v1::SimConfig c = HandConfig(2, 2, 1.0, 3);
  c.set_max_virtual_hours(0.02);  // 72 s: a few attempts
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_GE(out.rows.size(), 2u);
  for (const RoundRow& row : out.rows) EXPECT_FALSE(row.committed) << "round " << row.round;
  EXPECT_EQ(s.rounds_committed, 0);
  EXPECT_EQ(sim->engine().version(), 0);
  EXPECT_EQ(sim->engine().published_version(), 0);
}

TEST(SimulatorTest, DeadlineClosesAFirstKRoundWithMinUpdates) {
  // K = 3 tasks, min_updates 2, deadline 15 s: client 2 (20.05 s) straggles.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(3, 20, kModelBytes);
  v1::SimConfig c = HandConfig(3, 3, 1.0, 1);
  c.mutable_server()->set_min_updates(2);
  c.mutable_server()->set_round_deadline_s(15);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner));
  Collect out;
  ASSERT_OK(sim->Run(&out).status());
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(out.rows[0].end_s, 15);
  EXPECT_EQ(out.rows[0].participants, 2);
  EXPECT_EQ(out.rows[0].stragglers, 1);
  EXPECT_TRUE(out.rows[0].committed);
}

TEST(SimulatorTest, DeadlineClosingKeepsEveryArrivalUntilTheDeadline) {
  // ROUND_CLOSING_DEADLINE, K = 2, 3 tasks: the engine does not cap the round at K. With a 25 s
  // deadline all three arrive and the round closes when the last task ends; with 15 s, at the
  // deadline with two.
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  for (double deadline : {25.0, 15.0}) {
    SCOPED_TRACE(deadline);
    ScriptedLearner learner(3, 20, kModelBytes);
    v1::SimConfig c = HandConfig(3, 2, 1.5, 1);
    c.mutable_server()->set_round_closing(v1::ROUND_CLOSING_DEADLINE);
    c.mutable_server()->set_round_deadline_s(deadline);
    ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner));
    Collect out;
    ASSERT_OK(sim->Run(&out).status());
    ASSERT_EQ(out.rows.size(), 1u);
    EXPECT_TRUE(out.rows[0].committed);
    if (deadline == 25.0) {
      EXPECT_NEAR(out.rows[0].end_s, kT2, 1e-9);
      EXPECT_EQ(out.rows[0].participants, 3);
      EXPECT_THAT(out.models, ElementsAre(2.0f));  // mean of 1, 2, 3
    } else {
      EXPECT_DOUBLE_EQ(out.rows[0].end_s, 15);
      EXPECT_EQ(out.rows[0].participants, 2);
      EXPECT_EQ(out.rows[0].stragglers, 1);
    }
  }
}

TEST(SimulatorTest, FedBuffCarriesTasksAcrossVersionsWithStaleness) {
  // FedBuff, K = 2, 4 slots (overcommit 2) over 4 always-on clients taking 1, 2, 5, 7 s:
  //   t=0 v1 opens, all 4 tasked; t=1, t=2: clients 0, 1 -> v1 commits (1 + 2) / 2 = 1.5;
  //   clients 0, 1 get v2 tasks on model 1.5; t=3, t=4 -> v2 commits 1.5 + 1.5 = 3;
  //   clients 0, 1 get v3 tasks; t=5: client 2's v1 task (2 versions stale) and client 0's
  //   v3 task -> v3 commits 3 + (3 / sqrt(3) + 1) / 2 (FedBuff weight 1 / sqrt(1 + s)).
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner learner(4, 20, kModelBytes);
  ScriptedDurations durations;
  durations.by_client = {{0, 1}, {1, 2}, {2, 5}, {3, 7}};
  v1::SimConfig c = HandConfig(4, 2, 2.0, 3);
  c.mutable_server()->mutable_aggregation()->set_async_fedbuff(true);
  ASSERT_OK_AND_ASSIGN(auto sim, Make(c, &cap, &av, &learner, &durations));
  Collect out;
  ASSERT_OK_AND_ASSIGN(RunSummary s, sim->Run(&out));
  ASSERT_EQ(out.rows.size(), 3u);
  EXPECT_EQ(s.rounds_committed, 3);
  const double ends[] = {2, 4, 5};
  for (int v = 0; v < 3; ++v) {
    SCOPED_TRACE(v + 1);
    EXPECT_EQ(out.rows[v].round, v + 1);
    EXPECT_TRUE(out.rows[v].committed);
    EXPECT_DOUBLE_EQ(out.rows[v].end_s, ends[v]);
    EXPECT_EQ(out.rows[v].participants, 2);
    EXPECT_EQ(out.rows[v].stragglers, 0);
  }
  EXPECT_EQ(out.rows[0].selected, 4);
  EXPECT_EQ(out.rows[1].selected, 2);
  EXPECT_THAT(learner.accepted,
              ElementsAre(Pair(0, 1), Pair(1, 1), Pair(0, 2), Pair(1, 2), Pair(2, 1), Pair(0, 3)));
  ASSERT_EQ(out.models.size(), 3u);
  EXPECT_FLOAT_EQ(out.models[0], 1.5f);
  EXPECT_FLOAT_EQ(out.models[1], 3.0f);
  EXPECT_NEAR(out.models[2], 3.0 + (3.0 / std::sqrt(3.0) + 1.0) / 2.0, 1e-6);
  // The run stops with v3, before client 3's v1 task (7 s) comes in.
  EXPECT_DOUBLE_EQ(s.virtual_s, 5);
}

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

v1::SimConfig SmallNoTrainConfig() {
  v1::SimConfig c;
  c.set_num_clients(2000);
  c.set_no_train(true);
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(20);
  s->set_num_rounds(50);
  s->set_seed(3);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_availability_path(traces + "mobiperf/avl_events_300.csv");
  return c;
}

TEST(SimulatorTest, SameSeedSameCsv) {
  for (bool fedbuff : {false, true}) {
    SCOPED_TRACE(fedbuff);
    v1::SimConfig c = SmallNoTrainConfig();
    c.mutable_server()->mutable_aggregation()->set_async_fedbuff(fedbuff);
    const std::string a = RunToCsv(c);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, RunToCsv(c));
    c.mutable_server()->set_seed(4);
    EXPECT_NE(RunToCsv(c), a);
  }
}

// The CSV ends with FedBuff's staleness columns, as the server's metrics.csv;
// they are 0 under synchronous aggregation and consistent (max >= mean) under FedBuff.
TEST(SimulatorTest, CsvHasFedBuffStalenessColumns) {
  const std::vector<std::string> header = absl::StrSplit(RoundCsvHeader(), ',');
  // After them come the resource fit columns (oom_failures, passed_over, memory_mape), the
  // privacy columns (server/privacy kCsvColumns: dp_epsilon, dp_delta, dp_clip_norm) and the
  // secure-aggregation columns (secagg_bytes_up ... secagg_unmask_answers) and the link's bytes
  // (uplink_bytes, downlink_bytes), in this order.
  ASSERT_GE(header.size(), 10u);
  const size_t n =
      static_cast<size_t>(std::find(header.begin(), header.end(), "oom_failures") - header.begin());
  ASSERT_LT(n + 8, header.size());
  EXPECT_EQ(header[n + 2], "memory_mape");
  EXPECT_EQ(header[n + 3], "dp_epsilon");
  EXPECT_EQ(header[n + 5], "dp_clip_norm");
  EXPECT_EQ(header[n + 6], "secagg_bytes_up");
  EXPECT_EQ(header[n + 10], "secagg_unmask_answers");
  EXPECT_EQ(header[n + 12], "downlink_bytes");
  EXPECT_EQ(header[n + 13], "stale_folded");
  EXPECT_EQ(header.back(), "stale_weight_mean");
  EXPECT_EQ(header[n - 4], "mean_task_s");
  EXPECT_EQ(header[n - 3], "staleness_mean");
  EXPECT_EQ(header[n - 2], "staleness_max");
  EXPECT_EQ(header[n - 1], "dropped_stale");
  for (bool fedbuff : {false, true}) {
    SCOPED_TRACE(fedbuff);
    v1::SimConfig c = SmallNoTrainConfig();
    c.mutable_server()->mutable_aggregation()->set_async_fedbuff(fedbuff);
    const std::string csv = RunToCsv(c);
    int64_t largest = 0;
    int rows = 0;
    for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
      const std::vector<std::string> cells = absl::StrSplit(line, ',');
      ASSERT_EQ(cells.size(), header.size()) << line;
      double mean = -1;
      int64_t max = -1;
      int dropped = -1;
      ASSERT_TRUE(absl::SimpleAtod(cells[n - 3], &mean)) << line;
      ASSERT_TRUE(absl::SimpleAtoi(cells[n - 2], &max)) << line;
      ASSERT_TRUE(absl::SimpleAtoi(cells[n - 1], &dropped)) << line;
      EXPECT_GE(static_cast<double>(max) + 1e-9, mean) << line;
      EXPECT_GE(dropped, 0) << line;
      if (!fedbuff) {
        EXPECT_EQ(cells[n - 3] + cells[n - 2] + cells[n - 1], "0.00000") << line;
      }
      largest = std::max(largest, max);
      ++rows;
    }
    EXPECT_GT(rows, 0);
    if (fedbuff) {
      EXPECT_GT(largest, 0) << "no stale update in a FedBuff run";
    }
  }
}

TEST(SimulatorTest, ShippedConfigsParse) {
  for (const char* name :
       {"speed_100k.textproto", "fmnist_1000.textproto", "fmnist_1000_fedbuff.textproto",
        "fmnist_1000_cnn_torch.textproto", "fmnist_1000_secagg.textproto"}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(v1::SimConfig c, LoadSimConfig(SourceDir() + "/configs/sim/" + name));
    EXPECT_OK(ResolveSimConfig(c).status());
  }
}

// Trace paths resolve relative to the config file, whatever the working
// directory; a missing file is named as given and as resolved.
TEST(SimulatorTest, TracePathsResolveRelativeToTheConfigFile) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "cfgdir";
  std::filesystem::create_directories(dir / "conf");
  std::filesystem::create_directories(dir / "traces");
  std::ofstream(dir / "traces" / "cap.csv") << "x\n";
  std::ofstream(dir / "traces" / "av.csv") << "x\n";
  const std::string config = (dir / "conf" / "run.textproto").string();
  std::ofstream(config) << "traces { capacity_path: \"../traces/cap.csv\" availability_path: \""
                        << (dir / "traces" / "av.csv").string() << "\" }\n";
  ASSERT_OK_AND_ASSIGN(v1::SimConfig c, LoadSimConfig(config));
  EXPECT_EQ(c.traces().capacity_path(), (dir / "traces" / "cap.csv").string());
  EXPECT_EQ(c.traces().availability_path(), (dir / "traces" / "av.csv").string());  // absolute
  EXPECT_TRUE(c.traces().sample_size_path().empty());

  std::ofstream(config) << "traces { capacity_path: \"../traces/cap.csv\" "
                           "availability_path: \"../missing/av.csv\" }\n";
  EXPECT_THAT(LoadSimConfig(config).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("traces.availability_path \"../missing/av.csv\""),
                             HasSubstr((dir / "missing" / "av.csv").string()))));
}

// --policy brings the policy's own cache (FedCaSe's evaluation: random +
// LRU, oort + LRU, fedcase + importance) unless --cache_policy names one.
TEST(SimulatorTest, EachPolicyRunsWithItsOwnCacheUnlessTold) {
  v1::SimConfig c;
  c.mutable_server()->mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  ASSERT_OK(ApplySelectionFlags("random", "", "", &c));
  EXPECT_EQ(c.server().selection().policy(), v1::SELECTION_POLICY_RANDOM);
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "lru");
  ASSERT_OK(ApplySelectionFlags("oort", "", "", &c));
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "lru");
  ASSERT_OK(ApplySelectionFlags("fedcase", "", "random", &c));
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "importance");
  EXPECT_EQ(c.server().selection().fedcase().base_policy(), v1::FedCaseConfig::BASE_POLICY_RANDOM);
  ASSERT_OK(ApplySelectionFlags("pyramidfl", "", "", &c));
  EXPECT_EQ(c.server().selection().policy(), v1::SELECTION_POLICY_PYRAMIDFL);
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "lru");
  ASSERT_OK(ApplySelectionFlags("fedsched", "", "", &c));
  EXPECT_EQ(c.server().selection().policy(), v1::SELECTION_POLICY_FEDSCHED);
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "lru");
  ASSERT_OK(ApplySelectionFlags("oort", "importance", "", &c));
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "importance");
  // No --policy: the config's cache stays.
  c.mutable_server()->mutable_cache()->set_policy(v1::CACHE_POLICY_LFU);
  ASSERT_OK(ApplySelectionFlags("", "", "", &c));
  EXPECT_EQ(CachePolicyName(c.server().cache().policy()), "lfu");
  EXPECT_THAT(ApplySelectionFlags("best", "", "", &c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--policy")));
  EXPECT_THAT(ApplySelectionFlags("", "fifo", "", &c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--cache_policy")));
}

// --cache_policy and server.cache.policy_name take any registered cache policy name
// (client/cache/cache_policy.h); a built-in named by name resolves to its enum value too.
TEST(SimulatorTest, CachePoliciesAreChosenByRegisteredName) {
  v1::SimConfig c;
  ASSERT_OK(ApplySelectionFlags("", "LFU", "", &c));  // case-insensitive, as before
  EXPECT_EQ(c.server().cache().policy(), v1::CACHE_POLICY_LFU);
  EXPECT_TRUE(c.server().cache().policy_name().empty());
  EXPECT_THAT(ApplySelectionFlags("", "fifo", "", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--cache_policy"), HasSubstr("\"fifo\""),
                             HasSubstr("importance"), HasSubstr("lru"))));
  c.mutable_traces()->set_capacity_path("cap.csv");
  c.mutable_server()->set_num_rounds(1);
  c.mutable_server()->mutable_cache()->set_policy_name("none");
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(c));
  EXPECT_EQ(resolved.server().cache().policy(), v1::CACHE_POLICY_NONE);
  EXPECT_EQ(CachePolicyName(resolved.server().cache().policy()), "none");
  c.mutable_server()->mutable_cache()->set_policy_name("fifo");
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("cache.policy_name"), HasSubstr("\"fifo\""))));
}

// --set merges a text-format fragment over the config; a bad fragment changes nothing.
TEST(SimulatorTest, ConfigOverrideMergesAFragment) {
  v1::SimConfig c;
  c.set_target_accuracy(0.83);
  c.mutable_traces()->set_capacity_path("cap.csv");
  c.mutable_server()->mutable_training()->set_local_steps(20);
  ASSERT_OK(ApplyConfigOverride(
      "traces { start_time_s: 129600 } server { selection { extend_workload { beta: 0.5 } } }",
      &c));
  EXPECT_DOUBLE_EQ(c.traces().start_time_s(), 129600);
  EXPECT_EQ(c.traces().capacity_path(), "cap.csv");
  EXPECT_DOUBLE_EQ(c.server().selection().extend_workload().beta(), 0.5);
  EXPECT_EQ(c.server().training().local_steps(), 20);
  EXPECT_DOUBLE_EQ(c.target_accuracy(), 0.83);
  const std::string before = c.SerializeAsString();
  EXPECT_THAT(ApplyConfigOverride("traces { start_time: 1 }", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--set"), HasSubstr("start_time"))));
  EXPECT_EQ(c.SerializeAsString(), before);
  ASSERT_OK(ApplyConfigOverride("", &c));
  EXPECT_EQ(c.SerializeAsString(), before);
}

TEST(SimulatorTest, RoundSettingsResolveAsTheServersDo) {
  v1::SimConfig c;
  c.mutable_traces()->set_capacity_path("unused");
  c.set_target_accuracy(0.5);
  ASSERT_OK_AND_ASSIGN(v1::SimConfig r, ResolveSimConfig(c));
  EXPECT_EQ(r.num_clients(), 1000);
  EXPECT_EQ(r.server().clients_per_round(), 10);
  EXPECT_EQ(r.server().min_updates(), 5);
  EXPECT_EQ(r.server().min_online_clients(), 5);
  EXPECT_DOUBLE_EQ(r.server().round_deadline_s(), 120);
  EXPECT_EQ(r.server().round_closing(), v1::ROUND_CLOSING_FIRST_K);
  EXPECT_EQ(r.server().seed(), 1u);
  // num_rounds 0 runs forever: a stop condition is required.
  c.set_target_accuracy(0);
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("never stop")));
  c.set_max_virtual_hours(1);
  EXPECT_OK(ResolveSimConfig(c).status());
  // Errors of the round settings name the sim's server block.
  c.mutable_server()->set_min_online_clients(2);
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sim config: server: min_online_clients")));
  c.mutable_server()->set_min_online_clients(0);
  c.mutable_server()->set_clients_per_round(2000);
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_clients")));
}

}  // namespace
}  // namespace fedsched::sim
