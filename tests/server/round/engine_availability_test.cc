// The round engine's learned availability forecast (ServerConfig selection.learned_availability,
// docs/ALGORITHMS.md §2.2.1): sessions from registrations and heartbeats, given to the planner.
#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/profile/profile_book.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OneTensor;
using ::testing::UnorderedElementsAre;

class AllOnline : public Presence {
 public:
  bool IsReachable(ClientIndex, double) const override { return true; }
  void CollectReachable(double, std::vector<ClientIndex>* out) const override {
    *out = {0, 1, 2, 3};
  }
};

// `restore`, when set, fills the options a restarted server adds (profiles, planner state...).
absl::StatusOr<std::unique_ptr<RoundEngine>> MakeEngine(
    bool learned, const Presence* presence,
    const std::function<void(EngineOptions&)>& restore = nullptr) {
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
  if (restore) restore(options);
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
      if (i >= 2 || std::fmod(t, 100) <= 20 || t >= 200) {
        ASSERT_OK(engine->Heartbeat(i, t));
      }
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

// A retired client's slot goes to the next new identity, which starts without its sessions;
// they stay in the population histogram.
TEST(EngineAvailabilityTest, RetiredClientsAreForgotten) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> engine, MakeEngine(true, &presence));
  ASSERT_OK(testing::RegisterDevices(*engine, 4));
  for (ClientIndex i = 0; i < 4; ++i) ASSERT_OK(engine->Heartbeat(i, 20));  // ends 6 s sessions
  const forecast::AvailabilityForecast& f = *engine->learned_availability();
  ASSERT_THAT(f.SessionsOf(1), ElementsAre(6));
  EXPECT_EQ(engine->RetireUnseen(100, 50).size(), 4u);
  for (ClientIndex i = 0; i < 4; ++i) {
    EXPECT_TRUE(f.SessionsOf(i).empty()) << i;
    EXPECT_FALSE(f.IsOnline(i)) << i;
  }
  EXPECT_EQ(f.completed_sessions(), 4);
  v1::DeviceProfile device;
  device.set_num_samples(100);
  ASSERT_OK_AND_ASSIGN(profile::ProfileBook::Registration r,
                       engine->Register("newcomer", device, 110));
  EXPECT_LT(r.index, 4u);  // a reused slot
  EXPECT_TRUE(f.SessionsOf(r.index).empty());
  EXPECT_TRUE(f.IsOnline(r.index));
}

TEST(EngineAvailabilityTest, OffByDefault) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> off, MakeEngine(false, &presence));
  EXPECT_EQ(off->learned_availability(), nullptr);
}

// Heartbeats every 2 s over [from_s, to_s] from the clients whose engine indices are
// `index_of[0..3]` (dev-0..dev-3): dev-0 is heard while t mod 100 < 20, dev-1 while
// t mod 70 < 30, dev-2 and dev-3 throughout; each thus has its own sessions.
void Heartbeats(RoundEngine& engine, const std::vector<ClientIndex>& index_of, double from_s,
                double to_s) {
  for (double t = from_s; t <= to_s; t += 2) {
    const bool heard[4] = {std::fmod(t, 100) < 20, std::fmod(t, 70) < 30, true, true};
    for (int d = 0; d < 4; ++d) {
      if (!heard[d]) continue;
      ASSERT_OK(engine.Heartbeat(index_of[static_cast<size_t>(d)], t));
    }
  }
}

// dev-0..dev-3's indices in `engine` (a restarted book numbers clients in the store's order).
std::vector<ClientIndex> IndicesOf(const RoundEngine& engine, const RoundEngine& original) {
  std::vector<ClientIndex> out;
  for (ClientIndex i = 0; i < 4; ++i) {
    std::optional<ClientIndex> index =
        engine.book().FindByClientId(original.book().profile(i).client_id());
    EXPECT_TRUE(index.has_value()) << i;
    out.push_back(index.value_or(0));
  }
  return out;
}

// `a`'s forecast about dev-d at index d answers bit-identically to `b`'s at b_index[d].
void ExpectSameForecast(const RoundEngine& a, const RoundEngine& b,
                        const std::vector<ClientIndex>& b_index, double now_s) {
  const forecast::AvailabilityForecast& fa = *a.learned_availability();
  const forecast::AvailabilityForecast& fb = *b.learned_availability();
  EXPECT_EQ(fa.completed_sessions(), fb.completed_sessions());
  for (ClientIndex d = 0; d < 4; ++d) {
    const ClientIndex j = b_index[d];
    EXPECT_EQ(fa.SessionsOf(d), fb.SessionsOf(j)) << d;
    EXPECT_EQ(fa.IsOnline(d), fb.IsOnline(j)) << d;
    for (double ahead : {5.0, 25.0, 40.0, 120.0, 3600.0}) {
      EXPECT_EQ(fa.ProbabilityOnline(d, now_s, now_s + ahead),
                fb.ProbabilityOnline(j, now_s, now_s + ahead))
          << d << " " << ahead;
    }
  }
}

// A committed round whose commit carries the forecast: registers dev-0..dev-3, heartbeats to
// 600 s, plans at 600 s and commits at 601 s. No client's silence crosses the 6 s timeout
// between 600 s and 601 s, so the forecast at the commit is the one `engine` has after it.
RoundCommit CommitWithForecast(RoundEngine& engine) {
  RoundCommit commit;
  EXPECT_OK(testing::RegisterDevices(engine, 4));
  EXPECT_OK(engine.Publish(0, engine.model(), nullptr));
  Heartbeats(engine, {0, 1, 2, 3}, 2, 600);
  engine.Advance(600);
  const v1::Model delta = OneTensor(1);
  for (const Task* task : engine.TakeNewTasks()) {
    Update u;
    u.claim = {
        .index = task->index, .task_id = task->task_id, .round = task->round, .num_examples = 8};
    u.delta = &delta;
    u.metrics.set_num_examples(8);
    u.metrics.set_train_seconds(1);
    u.now_s = 601;
    EXPECT_OK(engine.FoldUpdates({&u, 1})[0]);
  }
  std::vector<ClosedRound> closed = engine.Advance(601);
  EXPECT_EQ(closed.size(), 1u);
  if (closed.size() != 1 || !closed[0].committed) return commit;
  return std::move(closed[0].commit);
}

// What a restart passes the engine: the commit's profiles, in an order other than the book's
// (the store lists them by client_id), and its planner state.
std::function<void(EngineOptions&)> RestoreFrom(const RoundCommit& commit,
                                                const std::string& planner_state) {
  return [&commit, planner_state](EngineOptions& options) {
    options.profiles = commit.profiles;
    std::reverse(options.profiles.begin(), options.profiles.end());
    options.planner_state = planner_state;
    options.version = 1;
    options.model = *commit.model;
  };
}

TEST(EngineAvailabilityTest, RestartResumesTheForecastExactly) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> before, MakeEngine(true, &presence));
  const RoundCommit commit = CommitWithForecast(*before);
  ASSERT_EQ(commit.profiles.size(), 4u);
  v1::PlannerState state;
  ASSERT_TRUE(state.ParseFromString(commit.planner_state));
  ASSERT_TRUE(state.has_forecast());
  EXPECT_EQ(state.forecast().clients_size(), 4);
  ASSERT_GT(before->learned_availability()->completed_sessions(), 0);
  ASSERT_FALSE(before->learned_availability()->SessionsOf(0).empty());

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> after,
                       MakeEngine(true, &presence, RestoreFrom(commit, commit.planner_state)));
  const std::vector<ClientIndex> index_of = IndicesOf(*after, *before);
  ASSERT_NE(index_of, std::vector<ClientIndex>({0, 1, 2, 3}));  // renumbered by the restart
  ExpectSameForecast(*before, *after, index_of, 601);
  // The same heartbeats afterwards (wrapping dev-0's and dev-1's rings of 16) keep it so.
  Heartbeats(*before, {0, 1, 2, 3}, 602, 2400);
  Heartbeats(*after, index_of, 602, 2400);
  ASSERT_EQ(before->learned_availability()->SessionsOf(0).size(), 16u);
  ExpectSameForecast(*before, *after, index_of, 2400);
}

TEST(EngineAvailabilityTest, RestartDropsRetiredClientsAndIgnoresAForecastWhenOff) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> before, MakeEngine(true, &presence));
  const RoundCommit commit = CommitWithForecast(*before);
  ASSERT_EQ(commit.profiles.size(), 4u);
  // dev-0's profile is gone from the store (retired): its sessions stay in the population only.
  RoundCommit without_first = commit;
  without_first.profiles.erase(
      std::find_if(without_first.profiles.begin(), without_first.profiles.end(),
                   [&](const v1::ClientProfile& p) {
                     return p.client_id() == before->book().profile(0).client_id();
                   }));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<RoundEngine> after,
      MakeEngine(true, &presence, RestoreFrom(without_first, commit.planner_state)));
  EXPECT_EQ(after->learned_availability()->completed_sessions(),
            before->learned_availability()->completed_sessions());
  for (ClientIndex d = 1; d < 4; ++d) {
    const std::optional<ClientIndex> j =
        after->book().FindByClientId(before->book().profile(d).client_id());
    ASSERT_TRUE(j.has_value());
    EXPECT_EQ(after->learned_availability()->SessionsOf(*j),
              before->learned_availability()->SessionsOf(d));
  }
  // A server with the forecast off starts without one.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> off,
                       MakeEngine(false, &presence, RestoreFrom(commit, commit.planner_state)));
  EXPECT_EQ(off->learned_availability(), nullptr);
}

TEST(EngineAvailabilityTest, RestartRefusesABadForecast) {
  AllOnline presence;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RoundEngine> before, MakeEngine(true, &presence));
  const RoundCommit commit = CommitWithForecast(*before);
  v1::PlannerState state;
  ASSERT_TRUE(state.ParseFromString(commit.planner_state));
  state.mutable_forecast()->set_sessions_per_client(4);
  EXPECT_THAT(
      MakeEngine(true, &presence, RestoreFrom(commit, state.SerializeAsString())).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learned availability forecast")));
  state.mutable_forecast()->set_sessions_per_client(16);
  state.mutable_forecast()->mutable_clients(0)->clear_client_id();
  EXPECT_THAT(MakeEngine(true, &presence, RestoreFrom(commit, state.SerializeAsString())).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("client_id")));
}

}  // namespace
}  // namespace fedsched::round
