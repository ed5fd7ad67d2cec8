// Leaving first (REFL's intelligent participant selection; docs/ALGORITHMS.md §2.7) on small
// hand-made fleets: the narrowing alone (NarrowToLeavingFirst) and through Planner::PlanRound.
#include "server/planner/leaving_first.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/planner/planner.h"

namespace fedsched::planner {
namespace {

using ::fedsched::testing::StatusIs;
using profile::ProfileBook;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::UnorderedElementsAreArray;

// Every client is online from time 0 until its own session end (seconds), then offline for good.
class SessionEnds : public AvailabilityOracle {
 public:
  explicit SessionEnds(std::vector<double> end_s) : end_s_(std::move(end_s)) {}
  double ProbabilityOnline(ClientIndex i, double now_s, double until_s) const override {
    return until_s <= end_s_[i] ? 1.0 : 0.0;
  }

 private:
  std::vector<double> end_s_;
};

class LeavingFirstTest : public ::testing::Test {
 protected:
  // `n` registered clients, all as fast (10 ms per sample).
  void SetUpFleet(int n) {
    ASSERT_OK_AND_ASSIGN(book_, ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
    for (int i = 0; i < n; ++i) {
      v1::DeviceProfile d;
      d.set_device_model("phone");
      d.set_compute_ms_per_sample(10);
      d.set_num_samples(100);
      ASSERT_OK(book_->OnRegister(absl::StrCat("c", i), d, 0.0).status());
    }
  }

  std::vector<ClientIndex> All() const {
    std::vector<ClientIndex> all(book_->size());
    for (ClientIndex i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }

  LeavingFirstCounts Narrow(const LeavingFirstOptions& o, const AvailabilityOracle* oracle,
                            int64_t round, double window_s, size_t slots, uint64_t seed,
                            std::vector<ClientIndex>* out) {
    std::mt19937_64 rng(seed);
    return NarrowToLeavingFirst(o, All(), *book_, oracle, /*min_online_probability=*/0.5, round,
                                /*now_s=*/0, window_s, slots, rng, out);
  }

  std::unique_ptr<ProfileBook> book_;
};

// Leaving first on, with a cool-down of `cooldown_rounds`.
LeavingFirstOptions On(int32_t cooldown_rounds = 0) {
  LeavingFirstOptions o;
  o.enabled = true;
  o.cooldown_rounds = cooldown_rounds;
  return o;
}

// K tasks per round, no over-commitment, one step of 10 samples (0.1 s on these clients), leaving
// first on with window `window_s` (0: the last round's length).
PlannerOptions SmallRounds(v1::SelectionPolicy policy, int32_t k, double window_s) {
  PlannerOptions o;
  o.policy = policy;
  o.clients_per_round = k;
  o.overcommit = 1.0;
  o.local_steps = 1;
  o.batch_size = 10;
  o.round_deadline_s = 1000;
  o.leaving_first.enabled = true;
  o.leaving_first.window_s = window_s;
  return o;
}

// Ten clients; with W = 100 s the leaving ones are those whose session ends in [100, 200):
// clients 2, 5 and 7. The others stay beyond 200 s (0, 1, 3, 4, 6) or leave before 100 s (8, 9).
const std::vector<double> kEnds = {500, 900, 150, 250, 1e9, 120, 300, 199, 50, 99};

TEST_F(LeavingFirstTest, TakesEveryLeavingClientAndTopsUpAtRandomFromTheOthers) {
  SetUpFleet(10);
  const SessionEnds oracle(kEnds);
  const LeavingFirstOptions o = On();
  std::vector<ClientIndex> out;
  std::set<ClientIndex> drawn;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const LeavingFirstCounts counts = Narrow(o, &oracle, 1, 100, 5, seed, &out);
    EXPECT_EQ(counts.eligible, 10u);
    EXPECT_EQ(counts.leaving, 3u);
    EXPECT_EQ(counts.cooled, 0u);
    ASSERT_EQ(out.size(), 5u);
    EXPECT_EQ(std::vector<ClientIndex>(out.begin(), out.begin() + 3),
              (std::vector<ClientIndex>{2, 5, 7}));
    for (size_t k = 3; k < out.size(); ++k) {
      EXPECT_EQ(std::count(out.begin(), out.end(), out[k]), 1);
      EXPECT_TRUE(out[k] != 2 && out[k] != 5 && out[k] != 7) << out[k];
      drawn.insert(out[k]);
    }
  }
  // The top-up is uniform over the seven others: over 40 draws of two, each of them comes up.
  EXPECT_EQ(drawn, (std::set<ClientIndex>{0, 1, 3, 4, 6, 8, 9}));
}

TEST_F(LeavingFirstTest, MoreLeavingClientsThanTasksAreAllOffered) {
  SetUpFleet(10);
  const SessionEnds oracle(kEnds);
  const LeavingFirstOptions o = On();
  std::vector<ClientIndex> out;
  Narrow(o, &oracle, 1, 100, 2, 1, &out);
  EXPECT_EQ(out, (std::vector<ClientIndex>{2, 5, 7}));  // the policy picks 2 of these
}

TEST_F(LeavingFirstTest, NoOracleOrNoWindowMeansNobodyIsLeaving) {
  SetUpFleet(10);
  const SessionEnds oracle(kEnds);
  const LeavingFirstOptions o = On();
  std::vector<ClientIndex> out;
  EXPECT_EQ(Narrow(o, nullptr, 1, 100, 4, 3, &out).leaving, 0u);
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(Narrow(o, &oracle, 1, /*window_s=*/0, 4, 3, &out).leaving, 0u);
  EXPECT_EQ(out.size(), 4u);
}

TEST_F(LeavingFirstTest, FewerEligibleThanTasksOffersThemAllOnceAndSkipsBusyOnes) {
  SetUpFleet(4);
  ASSERT_OK(book_->OnTaskAssigned(1, 1, 0));  // busy
  const SessionEnds oracle({150, 150, 150, 150});
  const LeavingFirstOptions o = On();
  std::mt19937_64 rng(1);
  std::vector<ClientIndex> out;
  const std::vector<ClientIndex> candidates = {3, 0, 1, 3, 2};
  const LeavingFirstCounts counts =
      NarrowToLeavingFirst(o, candidates, *book_, &oracle, 0.5, 2, 0, 100, 5, rng, &out);
  EXPECT_EQ(counts.eligible, 3u);
  EXPECT_EQ(out, (std::vector<ClientIndex>{3, 0, 2}));
}

TEST_F(LeavingFirstTest, ClientsInTheirCoolDownComeLastAndOnlyWhenTheOthersRunOut) {
  SetUpFleet(10);
  // Clients 0-5 were selected in round 8; in round 10 with a cool-down of 3 they sit out.
  for (ClientIndex i = 0; i < 6; ++i) {
    ASSERT_OK(book_->OnTaskAssigned(i, 8, 0));
    ASSERT_OK(book_->OnTaskFailed(i, profile::TaskFailure::kStraggler, 1, 1));
  }
  const LeavingFirstOptions o = On(/*cooldown_rounds=*/3);
  std::vector<ClientIndex> out;
  LeavingFirstCounts counts = Narrow(o, nullptr, 10, 100, 4, 5, &out);
  EXPECT_EQ(counts.cooled, 6u);
  EXPECT_THAT(out, UnorderedElementsAreArray({6, 7, 8, 9}));
  // Six tasks: the four others, then two of the cooled clients.
  counts = Narrow(o, nullptr, 10, 100, 6, 5, &out);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_THAT(std::vector<ClientIndex>(out.begin(), out.begin() + 4),
              UnorderedElementsAreArray({6, 7, 8, 9}));
  EXPECT_LT(out[4], 6u);
  EXPECT_LT(out[5], 6u);
  // In round 11 the cool-down (round - last_selected_round < 3) is over.
  EXPECT_EQ(Narrow(o, nullptr, 11, 100, 4, 5, &out).cooled, 0u);
}

TEST_F(LeavingFirstTest, TheSameSeedNarrowsTheSame) {
  SetUpFleet(10);
  const SessionEnds oracle(kEnds);
  const LeavingFirstOptions o = On();
  std::vector<ClientIndex> a;
  std::vector<ClientIndex> b;
  Narrow(o, &oracle, 1, 100, 6, 9, &a);
  Narrow(o, &oracle, 1, 100, 6, 9, &b);
  EXPECT_EQ(a, b);
}

// Through the planner, under every built-in policy: every leaving client is a participant (all
// fit and are predicted online until they finish).
TEST_F(LeavingFirstTest, ThePlannerSelectsEveryLeavingClientUnderEveryPolicy) {
  for (v1::SelectionPolicy policy :
       {v1::SELECTION_POLICY_RANDOM, v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_FEDCASE}) {
    SCOPED_TRACE(v1::SelectionPolicy_Name(policy));
    SetUpFleet(10);
    const SessionEnds oracle(kEnds);
    const PlannerOptions o = SmallRounds(policy, 4, /*window_s=*/100);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner, Planner::Create(o, book_.get()));
    const std::vector<ClientIndex> all = All();
    ASSERT_OK_AND_ASSIGN(
        RoundPlan plan,
        planner->PlanRound({.round = 1, .now_s = 0, .candidates = all, .availability = &oracle}));
    std::vector<ClientIndex> picked;
    for (const PlannedTask& t : plan.participants) picked.push_back(t.index);
    EXPECT_EQ(picked.size(), 4u);
    EXPECT_THAT(picked, IsSupersetOf({2, 5, 7}));
  }
}

// Without a configured window, W is the last round's length, and a restored planner narrows the
// same.
TEST_F(LeavingFirstTest, TheWindowIsTheLastRoundsLengthAndSurvivesARestart) {
  SetUpFleet(10);
  const SessionEnds oracle(kEnds);
  const PlannerOptions o = SmallRounds(v1::SELECTION_POLICY_RANDOM, 2, /*window_s=*/0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner, Planner::Create(o, book_.get()));
  const std::vector<ClientIndex> all = All();
  // Round 1 knows no round length yet: nobody is leaving, two clients at random.
  ASSERT_OK_AND_ASSIGN(
      RoundPlan first,
      planner->PlanRound({.round = 1, .now_s = 0, .candidates = all, .availability = &oracle}));
  ASSERT_EQ(first.participants.size(), 2u);
  planner->OnRoundFinished(1, /*committed=*/true, /*now_s=*/100);
  EXPECT_DOUBLE_EQ(planner->ExportState().last_round_length_s(), 100);
  // Round 2 at 0 s (the oracle's clock) with W = 100 s: 2, 5 and 7 are leaving; 2 of them.
  std::vector<ClientIndex> idle;
  for (ClientIndex i : all) {
    if (!book_->state(i).busy) idle.push_back(i);
  }
  const v1::PlannerState state = planner->ExportState();
  ASSERT_OK_AND_ASSIGN(
      RoundPlan second,
      planner->PlanRound({.round = 2, .now_s = 0, .candidates = idle, .availability = &oracle}));
  for (const PlannedTask& t : second.participants) {
    EXPECT_TRUE(t.index == 2 || t.index == 5 || t.index == 7) << t.index;
  }
  // A planner restored from the state before round 2 plans it the same.
  for (const PlannedTask& t : second.participants) {
    ASSERT_OK(book_->OnTaskFailed(t.index, profile::TaskFailure::kDropped, 0, 0));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> restored, Planner::Create(o, book_.get()));
  ASSERT_OK(restored->ImportState(state));
  ASSERT_OK_AND_ASSIGN(
      RoundPlan again,
      restored->PlanRound({.round = 2, .now_s = 0, .candidates = idle, .availability = &oracle}));
  ASSERT_EQ(again.participants.size(), second.participants.size());
  for (size_t k = 0; k < again.participants.size(); ++k) {
    EXPECT_EQ(again.participants[k].index, second.participants[k].index);
  }
}

TEST_F(LeavingFirstTest, BadSettingsAreRefusedByName) {
  v1::ServerConfig config;
  config.mutable_selection()->mutable_leaving_first()->set_window_s(-1);
  EXPECT_THAT(
      PlannerOptions::FromServerConfig(config).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("selection.leaving_first.window_s")));
  config.mutable_selection()->mutable_leaving_first()->set_window_s(std::nan(""));
  EXPECT_THAT(
      PlannerOptions::FromServerConfig(config).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("selection.leaving_first.window_s")));
  config.mutable_selection()->mutable_leaving_first()->set_window_s(60);
  config.mutable_selection()->mutable_leaving_first()->set_cooldown_rounds(-2);
  EXPECT_THAT(PlannerOptions::FromServerConfig(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("selection.leaving_first.cooldown_rounds")));
  v1::PlannerState state;
  state.set_version(1);
  state.set_last_round_length_s(-5);
  SetUpFleet(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Planner> planner,
                       Planner::Create(PlannerOptions{}, book_.get()));
  EXPECT_THAT(planner->ImportState(state),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out-of-range")));
}

}  // namespace
}  // namespace fedsched::planner
