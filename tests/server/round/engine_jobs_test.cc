// What a job's round engine tells a device-to-job matcher (PlanningDemand, ClientsInFlight) and
// the Presence that shows it only the devices the matcher gives it (GatedPresence), over a
// scripted clock (docs/guides/JOBS.md "Matching devices to jobs").
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/gated_presence.h"
#include "server/round/planning_gate.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using testing::FakePresence;
using ::testing::IsEmpty;
using testing::OneTensor;
using testing::RegisterDevices;
using ::testing::UnorderedElementsAreArray;

// Lets the engine plan exactly the client ids in `allowed`; counts its questions.
class FakeGate : public PlanningGate {
 public:
  bool MayPlan(std::string_view client_id, double) override {
    ++asked;
    return allowed.contains(std::string(client_id));
  }
  void Settle(absl::Span<const std::string>, int64_t, double) override {}
  std::set<std::string> allowed;
  int asked = 0;
};

class EngineJobsTest : public ::testing::Test {
 protected:
  // K = 2 with over-commitment 1.5 (3 slots), min_updates 1, 4 devices online.
  void Start(bool async, int32_t min_online, PlanningGate* gate = nullptr,
             int32_t backoff_after = 0) {
    v1::ServerConfig raw;
    raw.set_clients_per_round(2);
    raw.set_min_updates(1);
    raw.set_min_online_clients(min_online);
    raw.set_num_rounds(1);
    raw.set_round_deadline_s(10);
    raw.mutable_selection()->set_overcommit(1.5);
    raw.mutable_training()->set_local_steps(2);
    raw.mutable_training()->set_batch_size(4);
    raw.mutable_aggregation()->set_async_fedbuff(async);
    raw.set_replan_backoff_after_failures(backoff_after);
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
    gated_ = std::make_unique<GatedPresence>(&presence_, gate);
    EngineOptions options;
    options.config = config;
    options.model = OneTensor(1);
    options.presence = gated_.get();
    ASSERT_OK_AND_ASSIGN(engine_, RoundEngine::Create(std::move(options)));
    gated_->set_engine(engine_.get());
    ASSERT_OK(RegisterDevices(*engine_, 4));
    for (int i = 0; i < 4; ++i) presence_.online.insert(i);
    ASSERT_OK(engine_->Publish(0, engine_->model(), nullptr));
  }

  absl::Status Upload(const Task& task, double now) {
    v1::Model delta = OneTensor(0.5f);
    Update u;
    u.claim = {
        .index = task.index, .task_id = task.task_id, .round = task.round, .num_examples = 8};
    u.delta = &delta;
    u.metrics.set_num_examples(8);
    u.metrics.set_train_seconds(1);
    u.now_s = now;
    return engine_->FoldUpdates({&u, 1})[0];
  }

  std::vector<std::string> InFlight() const {
    std::vector<std::string> ids = {"stale"};
    engine_->ClientsInFlight(&ids);
    return ids;
  }

  std::string ClientId(ClientIndex i) const { return engine_->book().profile(i).client_id(); }

  FakePresence presence_;
  std::unique_ptr<GatedPresence> gated_;
  std::unique_ptr<RoundEngine> engine_;
};

TEST_F(EngineJobsTest, SynchronousDemandWhileWaitingToPlanNoneWhileARoundRuns) {
  Start(/*async=*/false, /*min_online=*/2);
  EXPECT_EQ(engine_->PlanningDemand(), 3);  // ceil(2 x 1.5)
  EXPECT_THAT(InFlight(), IsEmpty());
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(engine_->PlanningDemand(), 0);
  std::vector<std::string> ids;
  for (const Task* t : tasks) ids.push_back(t->client_id);
  EXPECT_THAT(InFlight(), UnorderedElementsAreArray(ids));
  ASSERT_OK(Upload(*tasks[0], 1));
  ASSERT_OK(engine_->FailTask(tasks[1]->index, tasks[1]->task_id, 1, "gone"));
  EXPECT_THAT(InFlight(), UnorderedElementsAreArray({tasks[2]->client_id}));
  ASSERT_OK(Upload(*tasks[2], 2));
  std::vector<ClosedRound> closed = engine_->Advance(2);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed);
  // num_rounds = 1: finished, so it asks for nobody.
  EXPECT_EQ(engine_->PlanningDemand(), 0);
  EXPECT_THAT(InFlight(), IsEmpty());
}

TEST_F(EngineJobsTest, DemandIsAtLeastMinOnlineClients) {
  Start(/*async=*/false, /*min_online=*/4);
  EXPECT_EQ(engine_->PlanningDemand(), 4);
}

TEST_F(EngineJobsTest, NoDemandWhileBackingOff) {
  Start(/*async=*/false, /*min_online=*/2, /*gate=*/nullptr, /*backoff_after=*/1);
  engine_->Advance(0);
  ASSERT_EQ(engine_->TakeNewTasks().size(), 3u);
  // Nobody uploads: the round fails at its deadline (10 s) and the next waits 1 s.
  std::vector<ClosedRound> closed = engine_->Advance(10);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_FALSE(closed[0].committed);
  ASSERT_GT(engine_->next_plan_s(), 10);
  EXPECT_EQ(engine_->PlanningDemand(), 0);
  // Past the backoff, with too few devices reachable to plan: it asks again.
  presence_.online = {0};
  engine_->Advance(12);
  EXPECT_EQ(engine_->PlanningDemand(), 3);
}

TEST_F(EngineJobsTest, FedBuffDemandIsItsFreeSlots) {
  Start(/*async=*/true, /*min_online=*/2);
  EXPECT_EQ(engine_->PlanningDemand(), 3);
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(engine_->PlanningDemand(), 0);
  ASSERT_OK(engine_->FailTask(tasks[0]->index, tasks[0]->task_id, 1, "gone"));
  EXPECT_EQ(engine_->PlanningDemand(), 1);
  ASSERT_OK(engine_->FailTask(tasks[1]->index, tasks[1]->task_id, 1, "gone"));
  ASSERT_OK(engine_->FailTask(tasks[2]->index, tasks[2]->task_id, 1, "gone"));
  EXPECT_EQ(engine_->PlanningDemand(), 3);
}

TEST_F(EngineJobsTest, GatedPresencePlansOnlyWhatTheGateAllows) {
  FakeGate gate;
  Start(/*async=*/false, /*min_online=*/2, &gate);
  gate.allowed = {ClientId(1), ClientId(3)};
  engine_->Advance(0);
  std::vector<const Task*> tasks = engine_->TakeNewTasks();
  std::vector<std::string> planned;
  for (const Task* t : tasks) planned.push_back(t->client_id);
  EXPECT_THAT(planned, UnorderedElementsAreArray({ClientId(1), ClientId(3)}));
  EXPECT_EQ(engine_->reachable_at_last_plan(), 2);
  // Devices with a task of the engine stay reachable without asking the gate.
  gate.allowed.clear();
  gate.asked = 0;
  EXPECT_TRUE(gated_->IsReachable(1, 1));
  EXPECT_EQ(gate.asked, 0);
  EXPECT_FALSE(gated_->IsReachable(0, 1));
  EXPECT_EQ(gate.asked, 1);
  engine_->Advance(1);
  EXPECT_THAT(engine_->TakeTaskFailures(), IsEmpty());
  // Offline stays offline, whatever the gate says.
  presence_.online.erase(1);
  EXPECT_FALSE(gated_->IsReachable(1, 1));
}

TEST_F(EngineJobsTest, WithoutAGateThePresenceIsTheBase) {
  Start(/*async=*/false, /*min_online=*/2, /*gate=*/nullptr);
  std::vector<ClientIndex> reachable;
  gated_->CollectReachable(0, &reachable);
  EXPECT_EQ(reachable.size(), 4u);
  engine_->Advance(0);
  EXPECT_EQ(engine_->TakeNewTasks().size(), 3u);
}

}  // namespace
}  // namespace fedsched::round
