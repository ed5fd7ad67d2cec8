// The round engine's learned availability forecast (ServerConfig selection.learned_availability,
// docs/ALGORITHMS.md §2.2.1): sessions from registrations and heartbeats, given to the planner.
#include <set>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::testing::ElementsAre;
using testing::OneTensor;
using ::testing::UnorderedElementsAre;

class AllOnline : public Presence {
 public:
  bool IsReachable(ClientIndex, double) const override { return true; }
  void CollectReachable(double, std::vector<ClientIndex>* out) const override {
    *out = {0, 1, 2, 3};
  }
};

absl::StatusOr<std::unique_ptr<RoundEngine>> MakeEngine(bool learned, const Presence* presence) {
  v1::ServerConfig raw;
  raw.set_clients_per_round(2);
  raw.set_min_updates(1);
  raw.set_min_online_clients(1);
  raw.set_num_rounds(5);
  raw.set_round_deadline_s(600);
  raw.mutable_selection()->set_overcommit(1.0);
  raw.mutable_selection()->set_learned_availability(learned);
  raw.mutable_training()->set_local_steps(2);
  raw.mutable_training()->set_batch_size(4);
  absl::StatusOr<v1::ServerConfig> config = ResolveRoundConfig(raw);
  if (!config.ok()) return config.status();
  EngineOptions options;
  options.config = *config;
  options.model = OneTensor(1);
  options.presence = presence;
  return RoundEngine::Create(std::move(options));
}

TEST(EngineAvailabilityTest, LearnedForecastKeepsOutClientsAboutToLeave) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> engine, MakeEngine(true, &presence));
  ASSERT_NE(engine->learned_availability(), nullptr);
  v1::DeviceProfile device;
  device.set_num_samples(100);
  device.set_compute_ms_per_sample(5000);  // 8 samples a task: about 40 s
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(engine->Register(absl::StrCat("dev-", i), device, 0).status());
  }
  ASSERT_OK(engine->Publish(0, engine->model(), nullptr));
  // Clients 0 and 1 heartbeat (every 2 s, timeout 6 s) for 20 s of every 100 s: sessions of 26 s.
  // Clients 2 and 3 heartbeat throughout. At 224 s clients 0 and 1 are 24 s into a session.
  for (double t = 0; t <= 224; t += 2) {
    for (ClientIndex i = 0; i < 4; ++i) {
      if (i >= 2 || std::fmod(t, 100) <= 20 || t >= 200) ASSERT_OK(engine->Heartbeat(i, t));
    }
  }
  const forecast::AvailabilityForecast& f = *engine->learned_availability();
  EXPECT_THAT(f.SessionsOf(0), ElementsAre(26, 26));
  EXPECT_TRUE(f.SessionsOf(2).empty());
  EXPECT_EQ(f.ProbabilityOnline(0, 224, 264), 0.0);
  // Online for longer than any session seen: the Pareto tail, 224 / (224 + 40).
  EXPECT_NEAR(f.ProbabilityOnline(2, 224, 264), 224.0 / 264.0, 1e-12);
  engine->Advance(224);
  std::set<ClientIndex> picked;
  for (const Task* t : engine->TakeNewTasks()) {
    EXPECT_GT(t->predicted_s, 30);
    picked.insert(t->index);
  }
  EXPECT_THAT(picked, UnorderedElementsAre(2, 3));
}

TEST(EngineAvailabilityTest, PlanningEndsSilentSessions) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> engine, MakeEngine(true, &presence));
  ASSERT_OK(testing::RegisterDevices(*engine, 4));
  ASSERT_OK(engine->Publish(0, engine->model(), nullptr));
  for (ClientIndex i = 0; i < 4; ++i) ASSERT_OK(engine->Heartbeat(i, 10));
  // Registered at 0 s and silent until 10 s (timeout 6 s): the heartbeat ends the first session
  // at 6 s and opens another; silent since, the plan at 100 s ends that one at 16 s.
  engine->Advance(100);
  for (ClientIndex i = 0; i < 4; ++i) {
    EXPECT_THAT(engine->learned_availability()->SessionsOf(i), ElementsAre(6, 6)) << i;
  }
}

TEST(EngineAvailabilityTest, OffByDefault) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> off, MakeEngine(false, &presence));
  EXPECT_EQ(off->learned_availability(), nullptr);
}

}  // namespace
}  // namespace fedsched::round
