// The cross-job matchers "fedsched" (client_aware_matcher.cc) and "venn" (venn_matcher.cc) and
// their estimates (match_estimates.h) on small hand-made fleets (docs/ALGORITHMS.md "Scheduling
// devices across jobs").

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/fleet_ledger.h"
#include "server/jobs/match_estimates.h"
#include "server/jobs/matcher.h"

namespace fedsched::jobs {
namespace {

using ::fedsched::testing::IsOk;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A job of `group` asking for `demand` devices, K = `k`, `rounds` rounds left.
MatchJob Job(std::string name, std::string group, int64_t demand, int64_t k, int64_t rounds,
             int64_t sequence) {
  MatchJob job;
  job.name = std::move(name);
  job.group = std::move(group);
  job.demand = demand;
  job.clients_per_round = k;
  job.rounds_remaining = rounds;
  job.sequence = sequence;
  job.asking_since_s = 0;
  return job;
}

// A device eligible for `eligible`, every job knowing it with `facts`.
MatchDevice Device(std::string id, std::vector<int> eligible, MatchFacts facts = {}) {
  MatchDevice d{std::move(id), std::move(eligible), {}};
  d.facts.assign(d.eligible.size(), facts);
  return d;
}

// The fedsched cases below are sized for a job share of 1.5 x its demand (a few devices each).
std::vector<int> Match(DeviceJobMatcher& matcher, MatchInput input) {
  if (input.offer_slack == MatchInput().offer_slack) input.offer_slack = 1.5;
  std::vector<int> offers;
  matcher.Match(input, &offers);
  return offers;
}

TEST(MatchEstimatesTest, RemainingRoundsAndDemand) {
  MatchJob job = Job("j", "g", 3, 4, 5, 1);
  EXPECT_EQ(RemainingRounds(job), 5);
  EXPECT_EQ(RemainingDemand(job), 20);
  job.rounds_remaining = 0;  // its last round is still asking
  EXPECT_EQ(RemainingRounds(job), 1);
  // A target-accuracy job: 10 rounds brought it to 0.4; 0.2 more at 0.04 a round is 5 rounds.
  job.rounds_remaining = -1;
  job.rounds_committed = 10;
  job.accuracy = 0.4;
  job.target_accuracy = 0.6;
  EXPECT_EQ(RemainingRounds(job), 5);
  job.accuracy = 0.7;
  EXPECT_EQ(RemainingRounds(job), 1);
  // Nothing known: about as long again as it has run.
  job.accuracy = 0;
  EXPECT_EQ(RemainingRounds(job), 10);
  job.rounds_committed = 0;
  EXPECT_EQ(RemainingRounds(job), 1);
  // No K reported yet: its current demand stands for K.
  job.clients_per_round = 0;
  EXPECT_EQ(RemainingDemand(job), 3);
}

TEST(MatchEstimatesTest, SpeedTiersAreQuantilesFastestHighest) {
  EXPECT_THAT(SpeedTiers({10, 40, 0, 20, 30}, 2), ElementsAre(1, 0, -1, 1, 0));
  EXPECT_THAT(SpeedTiers({5, 5, 5, 9}, 2), ElementsAre(1, 1, 1, 0));  // equal times, one tier
  EXPECT_THAT(SpeedTiers({1, 2, 3}, 3), ElementsAre(2, 1, 0));
  EXPECT_THAT(SpeedTiers({1, 2, 3}, 0), ElementsAre(0, 0, 0));  // < 1 tier means 1
  EXPECT_THAT(SpeedTiers({}, 2), IsEmpty());
}

class FedschedTest : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceJobMatcher> matcher_ = MakeClientAwareMatcher(1);
};

TEST_F(FedschedTest, AScarceGroupKeepsItsDevices) {
  MatchInput input;
  // "wide" came first and has less left to do: it is served first, but takes the devices only
  // it can use (d2..d4) before those "narrow", which can use only d0 and d1, needs.
  input.jobs = {Job("wide", "any", 2, 2, 1, 1), Job("narrow", "labelled", 2, 2, 10, 2)};
  input.devices = {Device("d0", {0, 1}), Device("d1", {0, 1}), Device("d2", {0}), Device("d3", {0}),
                   Device("d4", {0})};
  EXPECT_THAT(Match(*matcher_, input), ElementsAre(1, 1, 0, 0, 0));
  EXPECT_THAT(matcher_->Reason(0), HasSubstr("scarce group"));
  EXPECT_THAT(matcher_->Reason(2), HasSubstr("shortest remaining"));
  EXPECT_THAT(MakeFifoMatcher()->Reason(0), IsEmpty());
}

TEST_F(FedschedTest, ShortestRemainingDemandFirstWithinAGroup) {
  MatchInput input;
  input.jobs = {Job("long", "g", 2, 2, 10, 1), Job("short", "g", 2, 2, 2, 2)};
  for (int i = 0; i < 4; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1}));
  // "short" takes ceil(2 x 1.5) = 3; the fourth flows on to "long".
  const std::vector<int> offers = Match(*matcher_, input);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 1), 3);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 1);
  for (size_t k = 0; k < offers.size(); ++k) {
    if (offers[k] == 1) {
      EXPECT_THAT(matcher_->Reason(k), HasSubstr("shortest remaining"));
    }
  }
}

TEST_F(FedschedTest, AStarvingJobIsServedFirst) {
  MatchInput input;
  input.now_s = 100;
  input.starvation_bound_s = 30;
  input.jobs = {Job("short", "g", 2, 2, 1, 1), Job("long", "g", 2, 2, 50, 2)};
  input.jobs[0].asking_since_s = 90;
  input.jobs[1].asking_since_s = 60;  // waited 40 s > 30 s
  for (int i = 0; i < 4; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1}));
  // The first served takes 3 of the 4 devices.
  auto first_served = [&]() {
    const std::vector<int> offers = Match(*matcher_, input);
    EXPECT_EQ(std::count(offers.begin(), offers.end(), -1), 0);
    return std::count(offers.begin(), offers.end(), 1) == 3 ? 1 : 0;
  };
  EXPECT_EQ(first_served(), 1);
  for (size_t k = 0; k < 4; ++k) {
    if (matcher_->Reason(k).find("starving job") == 0) break;
    EXPECT_LT(k, 3u) << "no device went to the starving job";
  }
  // Within the bound, shortest remaining demand first again.
  input.jobs[1].asking_since_s = 80;
  EXPECT_EQ(first_served(), 0);
  // No bound: never starving.
  input.starvation_bound_s = 0;
  input.jobs[1].asking_since_s = 0;
  EXPECT_EQ(first_served(), 0);
}

TEST_F(FedschedTest, JobsPastTheBoundComeFirstLongestWaitFirst) {
  MatchInput input;
  input.now_s = 100;
  input.starvation_bound_s = 30;
  // Remaining demand: short 2, mid 20, long 100. "mid" and "long" both waited past the bound:
  // both go before "short", "long" (the longer wait) first although it has the most left.
  input.jobs = {Job("short", "g", 2, 2, 1, 1), Job("mid", "g", 2, 2, 10, 2),
                Job("long", "g", 2, 2, 50, 3)};
  input.jobs[0].asking_since_s = 95;
  input.jobs[1].asking_since_s = 60;
  input.jobs[2].asking_since_s = 40;
  for (int i = 0; i < 7; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1, 2}));
  std::vector<int> offers = Match(*matcher_, input);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 2), 3);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 1), 3);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 1);
  for (size_t k = 0; k < offers.size(); ++k) {
    if (offers[k] == 0) {
      EXPECT_THAT(matcher_->Reason(k), Not(HasSubstr("starving")));
    } else {
      EXPECT_THAT(matcher_->Reason(k), HasSubstr("starving job"));
    }
  }
  // Five devices: the two waiting longest take three and two; nothing is left for "short".
  input.devices.resize(5);
  offers = Match(*matcher_, input);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 2), 3);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 1), 2);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 0);
}

TEST_F(FedschedTest, DevicesBeyondAJobsSlackFlowToTheNextJob) {
  MatchInput input;
  input.jobs = {Job("a", "g", 2, 2, 1, 1), Job("b", "g", 4, 4, 1, 2), Job("c", "g", 1, 1, 5, 3)};
  for (int i = 0; i < 12; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1, 2}));
  const std::vector<int> offers = Match(*matcher_, input);
  // Remaining demand: a 2, b 4, c 5. a takes 3, b 6, c 2; the last device, wanted by nobody,
  // goes to the first job (all use it alike).
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 4);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 1), 6);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 2), 2);
  int spare = 0;
  for (size_t k = 0; k < offers.size(); ++k) spare += matcher_->Reason(k).find("spare") == 0;
  EXPECT_EQ(spare, 1);
}

TEST_F(FedschedTest, DevicesThatFitTheDeadlineFirstThenAvailabilityThenUtility) {
  MatchInput input;
  input.jobs = {Job("a", "g", 2, 2, 1, 1)};  // takes 3
  input.jobs[0].deadline_s = 30;
  input.devices = {Device("slow", {0}, {50, 9, 1}),      Device("unknown", {0}, {0, 9, 1}),
                   Device("flaky", {0}, {10, 9, 0.3}),   Device("steady", {0}, {25, 1, 0.95}),
                   Device("useful", {0}, {20, 5, 0.91}), Device("useless", {0}, {5, 1, 0.92})};
  // Every device goes to its one job; what ranks first shows in which were taken, not spare.
  const std::vector<int> offers = Match(*matcher_, input);
  EXPECT_THAT(offers, ElementsAre(0, 0, 0, 0, 0, 0));
  std::vector<std::string> taken;
  for (size_t k = 0; k < offers.size(); ++k) {
    if (matcher_->Reason(k).find("spare") != 0) taken.push_back(input.devices[k].client_id);
  }
  // In time: flaky, steady, useful, useless; the three most available (0.9 bucket), utility
  // deciding among them: useful (5) before steady and useless (1).
  EXPECT_THAT(taken, ElementsAre("steady", "useful", "useless"));
  EXPECT_THAT(matcher_->Reason(3), HasSubstr("fits deadline"));
  EXPECT_THAT(matcher_->Reason(0), HasSubstr("misses deadline"));
}

TEST_F(FedschedTest, WithoutADeadlineTheFastestTierFirst) {
  MatchInput input;
  input.speed_tiers = 2;
  input.jobs = {Job("a", "g", 2, 2, 1, 1), Job("b", "g", 2, 2, 5, 2)};
  const double times[] = {40, 10, 30, 20, 50, 60};
  for (int i = 0; i < 6; ++i) {
    input.devices.push_back(Device(absl::StrCat("d", i), {0, 1}, {times[i], 1, 1}));
  }
  // "a" (shortest) takes the fast tier (10, 20, 30); "b" the rest.
  EXPECT_THAT(Match(*matcher_, input), ElementsAre(1, 0, 0, 0, 1, 1));
  EXPECT_THAT(matcher_->Reason(1), HasSubstr("fast tier"));
  EXPECT_THAT(matcher_->Reason(5), HasSubstr("slow tier"));
}

TEST_F(FedschedTest, EqualDevicesAreDrawnAfreshEachMatch) {
  MatchInput input;
  input.jobs = {Job("a", "g", 2, 2, 1, 1), Job("b", "g", 2, 2, 9, 2)};
  for (int i = 0; i < 30; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1}));
  // "a" takes 3 of 30 equal devices; over Matches at different times, not always the same 3.
  std::vector<std::vector<int>> taken;
  for (int m = 0; m < 5; ++m) {
    input.now_s = m;
    const std::vector<int> offers = Match(*matcher_, input);
    std::vector<int> mine;
    for (size_t k = 0; k < offers.size(); ++k) {
      if (offers[k] == 0 && matcher_->Reason(k).find("spare") != 0) mine.push_back(k);
    }
    ASSERT_EQ(mine.size(), 3u);
    taken.push_back(mine);
  }
  EXPECT_TRUE(
      std::any_of(taken.begin(), taken.end(), [&](const auto& t) { return t != taken[0]; }));
  // The same seed and inputs give the same offers.
  auto again = MakeClientAwareMatcher(1);
  EXPECT_EQ(Match(*again, input), Match(*MakeClientAwareMatcher(1), input));
}

TEST_F(FedschedTest, SpareDevicesSpreadInProportionToDemand) {
  MatchInput input;
  input.jobs = {Job("a", "g", 2, 2, 1, 1), Job("b", "g", 6, 6, 9, 2)};
  for (int i = 0; i < 40; ++i) input.devices.push_back(Device(absl::StrCat("d", i), {0, 1}));
  // a takes 3, b 9; the 28 spare devices go to whichever has had least for its demand: 10 and 30.
  const std::vector<int> offers = Match(*matcher_, input);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 10);
  EXPECT_EQ(std::count(offers.begin(), offers.end(), 1), 30);
}

TEST_F(FedschedTest, LessContendedDevicesFirstAmongEquals) {
  MatchInput input;
  input.jobs = {Job("a", "g1", 1, 1, 1, 1), Job("b", "g2", 1, 1, 1, 2)};
  // "a" takes 2 of 3; the one only it can use (d2) is among them, so "b" keeps one of d0, d1.
  input.devices = {Device("d0", {0, 1}), Device("d1", {0, 1}), Device("d2", {0})};
  input.jobs[1].group = "g1";  // one group: equal supply, a first by remaining then sequence
  const std::vector<int> offers = Match(*matcher_, input);
  EXPECT_EQ(offers[2], 0);
  EXPECT_THAT(offers, Contains(1));
}

// Every offer names a job the device is eligible for, with demand; every offer has a reason.
void CheckOffersKeepTheContract(DeviceJobMatcher& matcher, uint64_t seed) {
  std::mt19937_64 rng(seed);
  MatchInput input;
  input.now_s = 100;
  input.starvation_bound_s = 20;
  input.speed_tiers = 1 + static_cast<int>(rng() % 4);
  const int n_jobs = 1 + static_cast<int>(rng() % 6);
  for (int j = 0; j < n_jobs; ++j) {
    MatchJob job = Job(absl::StrCat("j", j), absl::StrCat("g", rng() % 3), rng() % 5, 1 + rng() % 5,
                       static_cast<int64_t>(rng() % 8) - 1, j + 1);
    job.deadline_s = (rng() % 2) * 40.0;
    job.asking_since_s = static_cast<double>(rng() % 100);
    input.jobs.push_back(job);
  }
  for (int k = 0; k < 40; ++k) {
    MatchDevice d{absl::StrCat("d", k), {}, {}};
    for (int j = 0; j < n_jobs; ++j) {
      if (rng() % 2 == 0) continue;
      d.eligible.push_back(j);
      d.facts.push_back(MatchFacts{static_cast<double>(rng() % 80), static_cast<double>(rng() % 9),
                                   static_cast<double>(rng() % 100) / 100});
    }
    input.devices.push_back(std::move(d));
  }
  const std::vector<int> offers = Match(matcher, input);
  ASSERT_EQ(offers.size(), input.devices.size());
  for (size_t k = 0; k < offers.size(); ++k) {
    const std::vector<int>& eligible = input.devices[k].eligible;
    if (offers[k] < 0) {
      EXPECT_THAT(matcher.Reason(k), IsEmpty());
      continue;
    }
    EXPECT_THAT(eligible, Contains(offers[k])) << "seed " << seed << " device " << k;
    EXPECT_GT(input.jobs[offers[k]].demand, 0) << "seed " << seed << " device " << k;
    EXPECT_THAT(matcher.Reason(k), Not(IsEmpty())) << "seed " << seed << " device " << k;
  }
}

TEST(CrossJobMatcherTest, OffersOnlyEligibleJobsWithDemandAndGiveReasons) {
  for (const char* name : {"fedsched", "venn"}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> matcher, MakeMatcher(name, 7));
    EXPECT_EQ(matcher->name(), name);
    for (uint64_t seed = 1; seed <= 40; ++seed) CheckOffersKeepTheContract(*matcher, seed);
  }
}

TEST(CrossJobMatcherTest, ADeviceAJobsModelCannotFitIsNeverOfferedToIt) {
  for (const char* name : {"fedsched", "venn"}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> matcher, MakeMatcher(name, 7));
    FleetLedger ledger(FleetOptions{}, std::move(matcher));
    FleetJob big;
    big.name = "big";
    big.model_architecture = "mlp";
    big.sequence = 1;
    FleetJob small = big;
    small.name = "small";
    small.sequence = 2;
    ASSERT_THAT(ledger.AddJob(big), IsOk());
    ASSERT_THAT(ledger.AddJob(small), IsOk());
    for (int i = 0; i < 4; ++i) ledger.UpsertDevice({absl::StrCat("d", i), {"mlp"}, {}, 100});
    auto gate_big = ledger.Gate("big");
    auto gate_small = ledger.Gate("small");
    round::JobFacts facts;
    facts.clients_per_round = 1;
    facts.rounds_remaining = 1;  // "big" is the shortest: it would be served first
    for (int i = 0; i < 4; ++i) {
      round::DeviceFacts f;
      f.client_id = absl::StrCat("d", i);
      f.fits = i == 3;
      facts.devices.push_back(f);
    }
    gate_big->Describe(facts, 0);
    gate_big->Settle({}, 1, 0);
    gate_small->Settle({}, 1, 0);
    ledger.Rematch(1);
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(gate_big->MayPlan(absl::StrCat("d", i), 1)) << name;
    EXPECT_TRUE(gate_big->MayPlan("d3", 1)) << name;
    EXPECT_THAT(gate_big->OfferReason("d3"), Not(IsEmpty())) << name;
  }
}

// One device, two jobs asking for it: "a" (first by submission) from t = 3, "b" from t = 0. At
// t = 10, "b" has waited the bound: FIFO still serves "a" (a starvation), fedsched serves "b".
int64_t StarvationsOf(std::unique_ptr<DeviceJobMatcher> matcher, std::string* b_reason) {
  FleetLedger ledger(FleetOptions{.starvation_bound_s = 10}, std::move(matcher));
  for (const char* name : {"a", "b"}) {
    FleetJob job;
    job.name = name;
    job.model_architecture = "mlp";
    job.sequence = name[0] == 'a' ? 1 : 2;
    EXPECT_THAT(ledger.AddJob(job), IsOk());
  }
  ledger.UpsertDevice({"d0", {"mlp"}, {}, 100});
  auto a = ledger.Gate("a");
  auto b = ledger.Gate("b");
  b->Settle({}, 1, 0);
  a->Settle({}, 1, 3);
  ledger.Rematch(5);
  ledger.Rematch(10);
  *b_reason = b->OfferReason("d0");
  for (const FleetJobView& v : ledger.Snapshot()) {
    if (v.name == "b") return v.starved;
  }
  return -1;
}

// One device, three jobs asking for it: "a" from t = 0, "b" from t = 2, "c" from t = 20. At
// t = 10 "a" and "b" are past the bound and "a", waiting longer, is served: "b" waits on, but
// for a job that waited longer, which is no starvation. Under FIFO by submission ("c" first),
// both are passed over for "c", which waited less: one starvation each.
std::vector<int64_t> StarvationsOfThree(std::unique_ptr<DeviceJobMatcher> matcher) {
  FleetLedger ledger(FleetOptions{.starvation_bound_s = 5}, std::move(matcher));
  int64_t sequence = 3;
  for (const char* name : {"a", "b", "c"}) {
    FleetJob job;
    job.name = name;
    job.model_architecture = "mlp";
    job.sequence = sequence--;
    EXPECT_THAT(ledger.AddJob(job), IsOk());
  }
  ledger.UpsertDevice({"d0", {"mlp"}, {}, 100});
  ledger.Gate("a")->Settle({}, 1, 0);
  ledger.Gate("b")->Settle({}, 1, 2);
  ledger.Gate("c")->Settle({}, 1, 8);
  ledger.Rematch(10);
  std::vector<int64_t> starved;
  for (const FleetJobView& v : ledger.Snapshot()) starved.push_back(v.starved);
  return starved;
}

TEST(CrossJobMatcherTest, PassedOverOnlyForALongerWaitIsNoStarvation) {
  EXPECT_THAT(StarvationsOfThree(MakeClientAwareMatcher(1)), ElementsAre(0, 0, 0));
  EXPECT_THAT(StarvationsOfThree(MakeFifoMatcher()), ElementsAre(1, 1, 0));
}

TEST(CrossJobMatcherTest, TheStarvationBoundHoldsThroughTheLedger) {
  std::string reason;
  EXPECT_EQ(StarvationsOf(MakeFifoMatcher(), &reason), 1);
  EXPECT_EQ(reason, "");
  EXPECT_EQ(StarvationsOf(MakeClientAwareMatcher(1), &reason), 0);
  EXPECT_THAT(reason, HasSubstr("starving job"));
}

TEST(VennMatcherTest, FollowsTheGroupPlanAndShortestRemainingDemand) {
  // Venn's golden case "starved_count_one" (venn_golden_test.cc): group 1 absorbs group 0's
  // devices, so "a" gets nothing; within group 1 "b" (remaining 1) before "c" (2).
  MatchInput input;
  input.jobs = {Job("a", "g0", 7, 7, 1, 1), Job("b", "g1", 1, 1, 1, 2), Job("c", "g1", 2, 2, 1, 3)};
  input.devices = {Device("d0", {0, 1, 2}), Device("d1", {0, 1, 2}), Device("d2", {1, 2}),
                   Device("d3", {1, 2}), Device("d4", {1, 2})};
  auto venn = MakeVennMatcher(1);
  // Each job's demand in turn; devices of the group beyond them go to its first job, "b".
  EXPECT_THAT(Match(*venn, input), ElementsAre(1, 2, 2, 1, 1));
  EXPECT_EQ(venn->Reason(0), "group plan; shortest remaining");
  EXPECT_EQ(venn->Reason(3), "group plan; spare for shortest remaining");
}

TEST(VennMatcherTest, ATieredJobGetsOnlyDevicesOfItsTier) {
  MatchInput input;
  input.speed_tiers = 2;
  input.jobs = {Job("a", "g", 2, 2, 1, 1)};
  for (int i = 0; i < 20; ++i) {
    input.devices.push_back(Device(absl::StrCat("d", i), {0}, {20.0 - i, 1, 1}));
  }
  // With 20 devices for a demand of 2 (c = 10), the fast tier (s = 10/20) pays: 2 < 0.5 x 10 +
  // 1; the slow one (s = 1) never does. The draw decides: over seeds, both happen.
  int tiered = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto venn = MakeVennMatcher(seed);
    const std::vector<int> offers = Match(*venn, input);
    std::vector<int> within_demand;
    int offered = 0;
    for (size_t k = 0; k < offers.size(); ++k) {
      offered += offers[k] == 0 ? 1 : 0;
      if (offers[k] == 0 && venn->Reason(k).find("spare") == std::string::npos) {
        within_demand.push_back(static_cast<int>(k));
      }
    }
    ASSERT_EQ(within_demand.size(), 2u);
    if (venn->Reason(within_demand[0]).find("tier match") != std::string::npos) {
      ++tiered;
      // Fast tier: d10..d19 (times 10 down to 1), in device order; only they are offered.
      EXPECT_THAT(within_demand, ElementsAre(10, 11)) << seed;
      EXPECT_EQ(offered, 10) << seed;
      for (int k = 0; k < 10; ++k) EXPECT_EQ(offers[k], -1) << seed;
    } else {
      EXPECT_THAT(within_demand, ElementsAre(0, 1)) << seed;
      EXPECT_EQ(offered, 20) << seed;
    }
  }
  EXPECT_GT(tiered, 0);
  EXPECT_LT(tiered, 20);
}

TEST(VennMatcherTest, ATierIsKeptUntilTheJobAsksForNothing) {
  MatchInput input;
  input.speed_tiers = 2;
  input.jobs = {Job("a", "g", 2, 2, 1, 1)};
  for (int i = 0; i < 20; ++i) {
    input.devices.push_back(Device(absl::StrCat("d", i), {0}, {20.0 - i, 1, 1}));
  }
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto venn = MakeVennMatcher(seed);
    const std::vector<int> first = Match(*venn, input);
    // Same request, next Match: the same choice (no new draw).
    EXPECT_EQ(Match(*venn, input), first) << seed;
  }
}

TEST(VennMatcherTest, EqualTimesNeverTierAJobOutOfItsDevices) {
  MatchInput input;
  input.speed_tiers = 2;
  input.jobs = {Job("a", "g", 2, 2, 1, 1)};
  // Every device in the fastest tier; the slowest tier is empty, so it is never kept.
  for (int i = 0; i < 20; ++i)
    input.devices.push_back(Device(absl::StrCat("d", i), {0}, {10, 1, 1}));
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto venn = MakeVennMatcher(seed);
    const std::vector<int> offers = Match(*venn, input);
    EXPECT_EQ(std::count(offers.begin(), offers.end(), 0), 20) << seed;
  }
}

}  // namespace
}  // namespace fedsched::jobs
