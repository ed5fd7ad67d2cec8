// What a job's round engine reports of itself and its devices to the device-to-job matcher
// (RoundEngine::MatchFacts), and the matcher's reason it copies into each cohort member's
// SelectionReason (docs/guides/JOBS.md "Scheduling devices across jobs").
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/planning_gate.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using testing::FakePresence;
using testing::OneTensor;

// A fixed probability per client index; remembers the last window it was asked about.
class FakeOracle : public planner::AvailabilityOracle {
 public:
  double ProbabilityOnline(ClientIndex index, double now_s, double until_s) const override {
    asked_from = now_s;
    asked_until = until_s;
    auto it = probability.find(index);
    return it == probability.end() ? 1.0 : it->second;
  }
  std::map<ClientIndex, double> probability;
  mutable double asked_from = -1;
  mutable double asked_until = -1;
};

// Offers every device; its reason names the device.
class ReasonGate : public PlanningGate {
 public:
  bool MayPlan(std::string_view, double) override { return true; }
  void Settle(absl::Span<const std::string>, int64_t, double) override {}
  std::string OfferReason(std::string_view client_id) const override {
    return absl::StrCat("offered ", std::string(client_id));
  }
};

struct Scenario {
  int32_t num_rounds = 3;
  double deadline_s = 50;
  double target_accuracy = 0;
  const planner::AvailabilityOracle* oracle = nullptr;
  const PlanningGate* gate = nullptr;
};

class MatchFactsTest : public ::testing::Test {
 protected:
  // K = 2 (3 slots), 12 devices: even ones fast (1 ms/sample), odd ones slow (200 ms/sample);
  // device 5 declares a memory budget no batch fits, device 7 a large one.
  void Start(const Scenario& scenario) {
    v1::ServerConfig raw;
    raw.set_clients_per_round(2);
    raw.set_min_updates(1);
    raw.set_min_online_clients(2);
    raw.set_num_rounds(scenario.num_rounds);
    raw.set_round_deadline_s(scenario.deadline_s);
    raw.mutable_selection()->set_overcommit(1.5);
    raw.mutable_training()->set_local_steps(2);
    raw.mutable_training()->set_batch_size(4);
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
    EngineOptions options;
    options.config = config;
    options.model = OneTensor(1);
    options.presence = &presence_;
    options.availability = scenario.oracle;
    options.target_accuracy = scenario.target_accuracy;
    options.planning_gate = scenario.gate;
    ASSERT_OK_AND_ASSIGN(engine_, RoundEngine::Create(std::move(options)));
    for (int i = 0; i < kDevices; ++i) {
      v1::DeviceProfile device;
      device.set_num_samples(100);
      device.set_compute_ms_per_sample(i % 2 == 0 ? 1 : 200);
      if (i == 5) device.set_memory_budget_bytes(8);
      if (i == 7) device.set_memory_budget_bytes(int64_t{1} << 30);
      ASSERT_OK(engine_->Register(absl::StrCat("dev-", i), device, 0).status());
      presence_.online.insert(static_cast<ClientIndex>(i));
    }
    ASSERT_OK(engine_->Publish(0, engine_->model(), nullptr));
  }

  const DeviceFacts& FactsOf(const JobFacts& facts, ClientIndex index) const {
    const std::string id = engine_->book().profile(index).client_id();
    auto it = std::find_if(facts.devices.begin(), facts.devices.end(),
                           [&](const DeviceFacts& d) { return d.client_id == id; });
    EXPECT_NE(it, facts.devices.end()) << id;
    return *it;
  }

  // Uploads K = 2 tasks of the open round (first-K closes it) at `now`; returns the closed
  // rounds.
  std::vector<ClosedRound> FinishRound(double now) {
    std::vector<const Task*> tasks = engine_->TakeNewTasks();
    tasks.resize(std::min<size_t>(tasks.size(), 2));
    for (const Task* task : tasks) {
      v1::Model delta = OneTensor(0.5f);
      Update u;
      u.claim = {
          .index = task->index, .task_id = task->task_id, .round = task->round, .num_examples = 8};
      u.delta = &delta;
      u.metrics.set_num_examples(8);
      u.metrics.set_train_seconds(1);
      u.metrics.set_statistical_utility(30);
      u.now_s = now;
      EXPECT_OK(engine_->FoldUpdates({&u, 1})[0]);
    }
    return engine_->Advance(now);
  }

  static constexpr int kDevices = 12;
  FakePresence presence_;
  std::unique_ptr<RoundEngine> engine_;
};

TEST_F(MatchFactsTest, JobFiguresBeforeAndAfterACommittedRound) {
  Start({.num_rounds = 3, .deadline_s = 50, .target_accuracy = 0.8});
  JobFacts facts = engine_->MatchFacts(0);
  EXPECT_EQ(facts.clients_per_round, 2);
  EXPECT_EQ(facts.deadline_s, 50);
  EXPECT_EQ(facts.rounds_committed, 0);
  EXPECT_EQ(facts.rounds_remaining, 3);
  EXPECT_EQ(facts.accuracy, 0);
  EXPECT_EQ(facts.target_accuracy, 0.8);

  engine_->Advance(0);
  std::vector<ClosedRound> closed = FinishRound(5);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed);
  ASSERT_OK_AND_ASSIGN(std::optional<ClosedRound> taken_back,
                       engine_->GuardCommitted(closed[0], RoundEngine::Evaluation{0.6, 1.0}));
  ASSERT_FALSE(taken_back.has_value());
  facts = engine_->MatchFacts(5);
  EXPECT_EQ(facts.rounds_committed, 1);
  EXPECT_EQ(facts.rounds_remaining, 2);
  EXPECT_DOUBLE_EQ(facts.accuracy, 0.6);
}

TEST_F(MatchFactsTest, NoRoundLimitMeansUnknownRemainingRounds) {
  Start({.num_rounds = 0});
  EXPECT_EQ(engine_->MatchFacts(0).rounds_remaining, -1);
}

TEST_F(MatchFactsTest, EveryLiveDeviceSortedByClientId) {
  Start({});
  const JobFacts facts = engine_->MatchFacts(0);
  ASSERT_EQ(facts.devices.size(), static_cast<size_t>(kDevices));
  EXPECT_TRUE(std::is_sorted(
      facts.devices.begin(), facts.devices.end(),
      [](const DeviceFacts& a, const DeviceFacts& b) { return a.client_id < b.client_id; }));
  // Devices 10 and 11 sort before device 2 ("c10" < "c2"): the order is by id, not by index.
  EXPECT_NE(facts.devices[2].client_id, engine_->book().profile(2).client_id());
}

TEST_F(MatchFactsTest, RetiredDevicesAreLeftOut) {
  Start({});
  // Nobody was heard from since 0 and nobody holds a task: every device expires.
  const std::vector<std::string> retired = engine_->RetireUnseen(10000, 60);
  ASSERT_EQ(retired.size(), static_cast<size_t>(kDevices));
  EXPECT_TRUE(engine_->MatchFacts(10000).devices.empty());
}

TEST_F(MatchFactsTest, PredictionIsThePlannersForThisJob) {
  Start({});
  const JobFacts facts = engine_->MatchFacts(0);
  // Slow devices are predicted slower than fast ones.
  EXPECT_GT(FactsOf(facts, 1).predicted_round_s, FactsOf(facts, 0).predicted_round_s);
  // Each planned task's prediction is the one the facts gave (same clock, same book).
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_FALSE(tasks.empty());
  for (const Task* task : tasks) {
    EXPECT_DOUBLE_EQ(FactsOf(facts, task->index).predicted_round_s, task->predicted_s)
        << task->client_id;
  }
}

TEST_F(MatchFactsTest, UtilityIsTheReportedOneZeroBefore) {
  Start({});
  for (const DeviceFacts& d : engine_->MatchFacts(0).devices)
    EXPECT_EQ(d.utility, 0) << d.client_id;
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_FALSE(tasks.empty());
  const ClientIndex first = tasks[0]->index;
  v1::Model delta = OneTensor(0.5f);
  Update u;
  u.claim = {.index = first, .task_id = tasks[0]->task_id, .round = 1, .num_examples = 8};
  u.delta = &delta;
  u.metrics.set_num_examples(8);
  u.metrics.set_train_seconds(1);
  u.metrics.set_statistical_utility(30);
  u.now_s = 1;
  ASSERT_OK(engine_->FoldUpdates({&u, 1})[0]);
  const JobFacts facts = engine_->MatchFacts(1);
  EXPECT_DOUBLE_EQ(FactsOf(facts, first).utility, 30);
  EXPECT_DOUBLE_EQ(FactsOf(facts, first).utility, engine_->book().state(first).statistical_utility);
}

TEST_F(MatchFactsTest, FitsIsTheMemoryFitCheck) {
  Start({});
  const JobFacts facts = engine_->MatchFacts(0);
  EXPECT_FALSE(FactsOf(facts, 5).fits);  // 8 bytes: no batch fits
  EXPECT_TRUE(FactsOf(facts, 7).fits);   // 1 GiB
  EXPECT_TRUE(FactsOf(facts, 0).fits);   // no budget declared
}

TEST_F(MatchFactsTest, AvailabilityThroughTheDeadlineFromTheOracle) {
  FakeOracle oracle;
  oracle.probability = {{3, 0.25}, {4, 7.0}};
  Start({.deadline_s = 50, .oracle = &oracle});
  const JobFacts facts = engine_->MatchFacts(100);
  EXPECT_DOUBLE_EQ(FactsOf(facts, 3).availability, 0.25);
  EXPECT_DOUBLE_EQ(FactsOf(facts, 4).availability, 1.0);  // clamped into [0, 1]
  EXPECT_DOUBLE_EQ(FactsOf(facts, 0).availability, 1.0);
  EXPECT_EQ(oracle.asked_from, 100);
  EXPECT_EQ(oracle.asked_until, 150);
}

TEST_F(MatchFactsTest, AvailabilityIsOneWithoutAnOracle) {
  Start({});
  for (const DeviceFacts& d : engine_->MatchFacts(0).devices) EXPECT_EQ(d.availability, 1);
}

TEST_F(MatchFactsTest, AskingChangesNothing) {
  // Two engines over the same inputs plan the same round, whether or not one was asked first.
  Start({});
  std::unique_ptr<RoundEngine> asked = std::move(engine_);
  Start({});
  for (double t : {0.0, 1.0, 2.0}) (void)asked->MatchFacts(t);
  asked->Advance(3);
  engine_->Advance(3);
  std::vector<std::string> a, b;
  for (const Task* t : asked->TakeNewTasks()) a.push_back(t->client_id + t->task_id);
  for (const Task* t : engine_->TakeNewTasks()) b.push_back(t->client_id + t->task_id);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST_F(MatchFactsTest, CohortCarriesTheGatesOfferReason) {
  ReasonGate gate;
  Start({.gate = &gate});
  engine_->Advance(0);
  const v1::RoundRecord& record = engine_->current_record();
  ASSERT_GT(record.cohort_size(), 0);
  for (const v1::SelectionReason& reason : record.cohort()) {
    EXPECT_EQ(reason.match_reason(), absl::StrCat("offered ", reason.client_id()));
  }
}

TEST_F(MatchFactsTest, NoGateNoMatchReason) {
  Start({});
  engine_->Advance(0);
  ASSERT_GT(engine_->current_record().cohort_size(), 0);
  for (const v1::SelectionReason& reason : engine_->current_record().cohort()) {
    EXPECT_EQ(reason.match_reason(), "");
  }
}

}  // namespace
}  // namespace fedsched::round
