// Two round engines sharing one fleet through a FleetLedger, as the simulator and the server
// wire them (docs/guides/JOBS.md "Matching devices to jobs"): each engine's Presence is a
// GatedPresence over its job's gate, the ledger rematches before the engines advance, and each
// engine settles after. A device never holds tasks of both jobs, and both jobs finish.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/fleet_ledger.h"
#include "server/round/engine.h"
#include "server/round/gated_presence.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::jobs {
namespace {

using round::testing::FakePresence;
using round::testing::OneTensor;

constexpr int kDevices = 6;

// One job: its gate, its gated presence and its engine (K = 2, no over-commitment, 3 rounds).
struct JobRun {
  std::string name;
  std::unique_ptr<round::PlanningGate> gate;
  std::unique_ptr<round::GatedPresence> presence;
  std::unique_ptr<round::RoundEngine> engine;
  int committed = 0;
};

absl::Status StartJob(FleetLedger& ledger, const FakePresence& online, bool async, JobRun& run) {
  v1::ServerConfig raw;
  raw.set_clients_per_round(2);
  raw.set_min_updates(2);
  raw.set_num_rounds(3);
  raw.set_round_deadline_s(50);
  raw.mutable_selection()->set_overcommit(1.0);
  raw.mutable_training()->set_local_steps(2);
  raw.mutable_training()->set_batch_size(4);
  raw.mutable_aggregation()->set_async_fedbuff(async);
  absl::StatusOr<v1::ServerConfig> config = round::ResolveRoundConfig(raw);
  if (!config.ok()) return config.status();
  run.gate = ledger.Gate(run.name);
  run.presence = std::make_unique<round::GatedPresence>(&online, run.gate.get());
  round::EngineOptions options;
  options.config = *config;
  options.model = OneTensor(1);
  options.presence = run.presence.get();
  absl::StatusOr<std::unique_ptr<round::RoundEngine>> engine =
      round::RoundEngine::Create(std::move(options));
  if (!engine.ok()) return engine.status();
  run.engine = *std::move(engine);
  run.presence->set_engine(run.engine.get());
  // Both engines register the devices in one order: the same client ids ("c0", ...).
  absl::Status registered = round::testing::RegisterDevices(*run.engine, kDevices);
  if (!registered.ok()) return registered;
  return run.engine->Publish(0, run.engine->model(), nullptr);
}

// Every task in flight uploads at `now`.
void UploadAll(round::RoundEngine& engine, double now) {
  for (round::ClientIndex i = 0; i < kDevices; ++i) {
    const round::Task* task = engine.TaskOf(i);
    if (task == nullptr) continue;
    v1::Model delta = OneTensor(0.5f);
    round::Update u;
    u.claim = {.index = i, .task_id = task->task_id, .round = task->round, .num_examples = 8};
    u.delta = &delta;
    u.metrics.set_num_examples(8);
    u.metrics.set_train_seconds(1);
    u.now_s = now;
    ASSERT_OK(engine.FoldUpdates({&u, 1})[0]);
  }
}

// (matcher, FedBuff)
class SharedFleetTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(SharedFleetTest, TwoEnginesNeverShareADeviceAndBothFinish) {
  const auto& [matcher_name, async] = GetParam();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> matcher, MakeMatcher(matcher_name, 3));
  FleetLedger ledger(FleetOptions{}, std::move(matcher));
  FakePresence online;
  std::vector<JobRun> runs(2);
  runs[0].name = "a";
  runs[1].name = "b";
  for (int j = 0; j < 2; ++j) {
    FleetJob job;
    job.name = runs[j].name;
    job.model_architecture = "mlp";
    job.sequence = j + 1;
    ASSERT_OK(ledger.AddJob(job));
    ASSERT_OK(StartJob(ledger, online, async, runs[j]));
  }
  for (int i = 0; i < kDevices; ++i) {
    online.online.insert(i);
    ledger.UpsertDevice(FleetDevice{absl::StrCat("c", i), {"mlp"}, {}, 100});
  }
  for (int tick = 0; tick < 40; ++tick) {
    const double now = tick;
    ledger.Rematch(now);
    for (JobRun& run : runs) {
      UploadAll(*run.engine, now);
      for (const round::ClosedRound& closed : run.engine->Advance(now)) {
        ASSERT_TRUE(closed.committed) << run.name << " " << closed.failure_reason;
        ++run.committed;
        ASSERT_OK(run.engine->Publish(closed.record.round(), closed.commit.model, nullptr));
      }
      run.engine->TakeNewTasks();
      std::vector<std::string> in_flight;
      run.engine->ClientsInFlight(&in_flight);
      run.gate->Settle(in_flight, run.engine->PlanningDemand(), now);
    }
    for (round::ClientIndex i = 0; i < kDevices; ++i) {
      ASSERT_FALSE(runs[0].engine->TaskOf(i) != nullptr && runs[1].engine->TaskOf(i) != nullptr)
          << "c" << i << " holds tasks of both jobs at tick " << tick;
    }
  }
  for (const JobRun& run : runs) {
    EXPECT_TRUE(run.engine->finished()) << run.name;
    EXPECT_EQ(run.committed, 3) << run.name;
  }
}

INSTANTIATE_TEST_SUITE_P(MatchersAndModes, SharedFleetTest,
                         ::testing::Combine(::testing::Values("fifo", "random", "venn", "fedsched"),
                                            ::testing::Bool()));

}  // namespace
}  // namespace fedsched::jobs
