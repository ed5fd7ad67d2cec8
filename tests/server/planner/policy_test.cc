// Unit tests of the planner's parts below Planner: the candidate pool's staging steps, candidate
// evaluation and cache plans, the Oort pacer, the experience tracker, and each SelectionPolicy
// driven directly through a RoundContext.
#include "server/planner/policy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/planner/cache_plan.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/experience_tracker.h"
#include "server/planner/fedcase_policy.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/oort_policy.h"
#include "server/planner/policy_registry.h"
#include "server/planner/random_policy.h"
#include "server/planner/top_ratio.h"
#include "server/planner/workload.h"

namespace fedsched::planner {
namespace {

using ::fedsched::testing::StatusIs;
using profile::ProfileBook;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// CandidatePool

// A pool of n available candidates with score i (client index i).
void FillPool(CandidatePool* pool, int n) {
  pool->BeginRound(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Candidate& c = pool->Add();
    c.index = static_cast<ClientIndex>(i);
    c.score = i;
  }
}

TEST(CandidatePoolTest, ClaimSkipsDuplicatesUntilTheNextRound) {
  CandidatePool pool;
  pool.BeginRound(4);
  EXPECT_TRUE(pool.Claim(2));
  EXPECT_FALSE(pool.Claim(2));
  EXPECT_TRUE(pool.Claim(3));
  pool.BeginRound(8);  // a grown book
  EXPECT_TRUE(pool.Claim(2));
  EXPECT_TRUE(pool.Claim(7));
  EXPECT_FALSE(pool.Claim(7));
}

TEST(CandidatePoolTest, PositionOfFindsTheCandidateAddedAfterItsClaim) {
  CandidatePool pool;
  pool.BeginRound(6);
  ASSERT_TRUE(pool.Claim(4));
  pool.Add().index = 4;
  ASSERT_TRUE(pool.Claim(1));  // claimed, never added
  ASSERT_TRUE(pool.Claim(2));
  pool.Add().index = 2;
  EXPECT_EQ(pool.PositionOf(4), 0u);
  EXPECT_EQ(pool.PositionOf(2), 1u);
  EXPECT_EQ(pool.PositionOf(1), CandidatePool::kNoPosition);
  EXPECT_EQ(pool.PositionOf(5), CandidatePool::kNoPosition);
  pool.BeginRound(6);
  EXPECT_EQ(pool.PositionOf(4), CandidatePool::kNoPosition);  // claims are per round
}

TEST(CandidatePoolTest, TakeTopOffersByDecreasingKeyAndSkipsRejected) {
  CandidatePool pool;
  FillPool(&pool, 10);
  pool.FillStage([](const Candidate&) { return true; }, [](const Candidate& c) { return c.score; });
  std::vector<uint32_t> offered;
  // Odd positions are rejected: the three best even ones are taken.
  const size_t taken = pool.TakeTop(3, [&](uint32_t pos) {
    offered.push_back(pos);
    if (pos % 2 == 1) {
      pool[pos].status = kRejected;
      return false;
    }
    pool.Choose(pos, kNoteFedCaseTop);
    return true;
  });
  EXPECT_EQ(taken, 3u);
  EXPECT_EQ(std::set<uint32_t>(pool.chosen().begin(), pool.chosen().end()),
            (std::set<uint32_t>{8, 6, 4}));
  EXPECT_EQ(std::set<uint32_t>(offered.begin(), offered.end()).size(), offered.size());
  for (uint32_t pos : offered) EXPECT_GE(pos, 3u);  // nothing below the 7th best was asked
  EXPECT_EQ(pool[8].status, kSelected);
  EXPECT_EQ(pool[8].note, kNoteFedCaseTop);
}

TEST(CandidatePoolTest, TakeRandomOffersEachEntryAtMostOnceAndIsSeeded) {
  auto draw = [](uint64_t seed) {
    CandidatePool pool;
    FillPool(&pool, 50);
    pool.FillStage([](const Candidate&) { return true; }, [](const Candidate&) { return 0.0; });
    std::mt19937_64 rng(seed);
    RngDraws draws(rng);
    std::vector<uint32_t> offered;
    pool.TakeRandom(100, draws, [&](uint32_t pos) {
      offered.push_back(pos);
      if (pos < 10) return false;
      pool.Choose(pos, kNoteRandom);
      return true;
    });
    EXPECT_EQ(pool.num_chosen(), 40u);
    EXPECT_EQ(offered.size(), 50u);
    EXPECT_EQ(std::set<uint32_t>(offered.begin(), offered.end()).size(), 50u);
    return offered;
  };
  EXPECT_EQ(draw(3), draw(3));
  EXPECT_NE(draw(3), draw(4));
}

TEST(CandidatePoolTest, TakeWeightedFollowsTheWeightsAndDrawsZeroWeightsLast) {
  // Weights 0, 1, 2, 3 (position = weight): over many draws of one, frequencies ~ 1:2:3, and
  // position 0 (weight floored at 1e-12) is taken only when nothing else is left.
  std::map<uint32_t, int> first;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    CandidatePool pool;
    FillPool(&pool, 4);
    pool.FillStage([](const Candidate&) { return true; },
                   [](const Candidate& c) { return c.score; });
    std::mt19937_64 rng(seed);
    RngDraws draws(rng);
    std::vector<uint32_t> order;
    pool.TakeWeighted(4, draws, [&](uint32_t pos) {
      order.push_back(pos);
      pool.Choose(pos, kNoteOortExploit);
      return true;
    });
    ASSERT_EQ(order.size(), 4u);
    EXPECT_EQ(order.back(), 0u);
    ++first[order.front()];
  }
  EXPECT_EQ(first[0], 0);
  EXPECT_NEAR(first[1] / 3000.0, 1.0 / 6, 0.03);
  EXPECT_NEAR(first[2] / 3000.0, 2.0 / 6, 0.03);
  EXPECT_NEAR(first[3] / 3000.0, 3.0 / 6, 0.03);
}

TEST(CandidatePoolTest, StageTrimmingAndBestOfStage) {
  CandidatePool pool;
  FillPool(&pool, 6);
  pool[4].score = 5;  // ties with position 5
  auto all = [](const Candidate&) { return true; };
  auto score = [](const Candidate& c) { return c.score; };
  pool.FillStage(all, score);
  EXPECT_EQ(pool.NthLargestStageKey(3), 3.0);  // 5, 5, 3, 2, 1, 0
  pool.KeepStageKeysAtLeast(2.0);
  EXPECT_EQ(pool.stage().size(), 4u);
  pool.FillStage(all, score);
  pool.KeepBestOfStage(2);
  std::set<uint32_t> kept;
  for (const Keyed& k : pool.stage()) kept.insert(k.pos);
  EXPECT_EQ(kept, (std::set<uint32_t>{4, 5}));
  pool.FillStage(all, score);
  std::vector<uint32_t> best;
  for (const Keyed& k : pool.BestOfStage(3)) best.push_back(k.pos);
  EXPECT_THAT(best, ElementsAre(4, 5, 3));  // ties by position
  EXPECT_EQ(pool.BestOfStage(100).size(), 6u);
}

TEST(CandidatePoolTest, NoteTextNamesEveryNote) {
  EXPECT_STREQ(NoteText(kNoteNone), "");
  EXPECT_STREQ(NoteText(kNoteRandom), "random");
  EXPECT_STREQ(NoteText(kNoteOortFillExplore), "oort-fill-explore");
  EXPECT_STREQ(NoteText(kNoteFedCaseLate), "fedcase-completion-fill");
  EXPECT_STREQ(NoteText(static_cast<Note>(200)), "");
}

// ---------------------------------------------------------------------------------------------
// Workload and cache plans

TEST(WorkloadTest, CeilToIntAndLocalSteps) {
  EXPECT_EQ(CeilToInt(10 * 1.3), 13);
  EXPECT_EQ(CeilToInt(13.01), 14);
  PlannerOptions o;
  o.batch_size = 32;
  o.local_epochs = 2;
  EXPECT_EQ(LocalStepsFor(o, 100), 8);  // 2 x ceil(100 / 32)
  EXPECT_EQ(LocalStepsFor(o, 0), 2);    // at least one batch per epoch
  o.local_steps = 5;
  EXPECT_EQ(LocalStepsFor(o, 100), 5);
}

TEST(CachePlanTest, CapacityFollowsTheFractionAndTheStorageBudget) {
  CachePlanOptions cache;
  profile::ClientState s;
  s.num_samples = 1000;
  s.sample_bytes = 100;
  v1::CachePlan p = MakeCachePlan(cache, 32, s, 4, /*prefetch=*/true);
  EXPECT_EQ(p.policy(), v1::CACHE_POLICY_IMPORTANCE);
  EXPECT_EQ(p.samples_to_train(), 128);
  EXPECT_TRUE(p.prefetch());
  EXPECT_EQ(p.replication_factor(), 0);  // the device's adaptive factor
  EXPECT_EQ(p.capacity_samples(), 100);
  EXPECT_EQ(p.capacity_bytes(), 10'000);
  s.storage_budget_bytes = 2'550;
  p = MakeCachePlan(cache, 32, s, 4, false);
  EXPECT_EQ(p.capacity_samples(), 25);
  EXPECT_EQ(p.capacity_bytes(), 2'500);
  cache.policy = v1::CACHE_POLICY_NONE;
  p = MakeCachePlan(cache, 32, s, 4, false);
  EXPECT_EQ(p.replication_factor(), 1);
  EXPECT_EQ(p.capacity_samples(), 0);
}

// A policy named by name (client/cache/cache_policy.h) travels in the plan and is asked, not
// the enum: "none" by name plans no capacity although the enum says IMPORTANCE.
TEST(CachePlanTest, APolicyNamedByNameIsCarriedAndAsked) {
  CachePlanOptions cache;
  cache.policy_name = "none";
  profile::ClientState s;
  s.num_samples = 1000;
  s.sample_bytes = 100;
  v1::CachePlan p = MakeCachePlan(cache, 32, s, 4, false);
  EXPECT_EQ(p.policy_name(), "none");
  EXPECT_EQ(p.replication_factor(), 1);
  EXPECT_EQ(p.capacity_samples(), 0);
  cache.policy_name = "lfu";
  p = MakeCachePlan(cache, 32, s, 4, false);
  EXPECT_EQ(p.policy_name(), "lfu");
  EXPECT_EQ(p.capacity_samples(), 100);
  v1::CacheConfig config;
  config.set_policy_name("lfu");
  EXPECT_EQ(CachePlanOptions::FromConfig(config).policy_name, "lfu");
}

// ---------------------------------------------------------------------------------------------
// OortPacer and ExperienceTracker

// Oort's getTopK decays epsilon per selection, not per committed round, and stops exploring
// for good once every client was tried.
TEST(OortPacerTest, EpsilonDecaysPerSelectionToItsFloorAndStops) {
  OortOptions o;
  o.exploration_factor = 0.5;
  o.exploration_decay = 0.5;
  o.exploration_min = 0.2;
  OortPacer pacer(o);
  pacer.RecordExploitedUtility(3);
  pacer.RecordExploitedUtility(4);
  EXPECT_EQ(pacer.FinishRound(/*committed=*/true), 7);
  EXPECT_EQ(pacer.epsilon(), 0.5);  // rounds do not decay it
  pacer.DecayEpsilon();
  EXPECT_EQ(pacer.epsilon(), 0.25);
  pacer.DecayEpsilon();
  EXPECT_EQ(pacer.epsilon(), 0.2);
  pacer.StopExploring();
  pacer.DecayEpsilon();
  EXPECT_EQ(pacer.epsilon(), 0);
  v1::OortState state;
  pacer.ExportTo(&state);
  OortPacer restored(o);
  restored.ImportFrom(state);
  restored.DecayEpsilon();
  EXPECT_EQ(restored.epsilon(), 0);  // still stopped
}

// Oort's pacer: per selection, the history gains the last round's MEAN exploited utility (0 at
// the first selection); at round R >= 2 x step with R % step == 0 the sums of the two windows
// are compared and the new percentile applies to round R itself.
TEST(OortPacerTest, PacerComparesMeanUtilityAndDecidesInTheSameRound) {
  OortOptions o;
  o.pacer_step = 2;
  OortPacer pacer(o);
  for (int64_t round = 1; round <= 6; ++round) {
    pacer.BeginSelection(round);
    // Round 4: windows {0, m} vs {m, m} changed by 100 %: kept. Round 6: {m, m} vs {m, m}.
    if (round == 4) {
      EXPECT_EQ(pacer.round_threshold_percent(), 30) << round;
    }
    if (round == 6) {
      EXPECT_EQ(pacer.round_threshold_percent(), 35) << round;
    }
    // Two exploited updates of utility 10 (mean 10) and one more in round 5 (still mean 10).
    pacer.RecordExploitedUtility(10);
    pacer.RecordExploitedUtility(10);
    if (round == 5) pacer.RecordExploitedUtility(10);
    pacer.FinishRound(true);
  }
  EXPECT_EQ(pacer.round_threshold_percent(), 35);  // flat mean utility: + pacer_delta
  pacer.set_preferred_duration_s(4.5);
  v1::OortState state;
  pacer.ExportTo(&state);
  EXPECT_EQ(state.exploit_utility_history_size(), 4);
  ASSERT_OK(OortPacer::Validate(state));
  OortPacer restored(o);
  restored.ImportFrom(state);
  EXPECT_EQ(restored.epsilon(), pacer.epsilon());
  EXPECT_EQ(restored.round_threshold_percent(), 35);
  EXPECT_EQ(restored.preferred_duration_s(), 4.5);
  v1::OortState again;
  restored.ExportTo(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());

  state.set_epsilon(1.5);
  EXPECT_THAT(OortPacer::Validate(state),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out-of-range")));
  state.set_epsilon(0.5);
  state.add_exploit_utility_history(NAN);
  EXPECT_THAT(OortPacer::Validate(state),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
}

// hold_round_threshold (fedsched's own, docs/ALGORITHMS.md §3.5): the same flat utility that
// relaxes T under Oort's rule leaves the percentile at round_threshold, the history is still kept,
// and a state saved under Oort's rule comes back with the configured percentile.
TEST(OortPacerTest, HeldThresholdNeverMovesAndOverridesARestoredOne) {
  OortOptions o;
  o.pacer_step = 2;
  o.hold_round_threshold = true;
  OortPacer pacer(o);
  for (int64_t round = 1; round <= 12; ++round) {
    pacer.BeginSelection(round);
    EXPECT_EQ(pacer.round_threshold_percent(), 30) << round;
    pacer.RecordExploitedUtility(10);
    pacer.FinishRound(true);
  }
  v1::OortState state;
  pacer.ExportTo(&state);
  EXPECT_EQ(state.exploit_utility_history_size(), 4);
  state.set_round_threshold_percent(55);  // as Oort's pacer would have left it
  ASSERT_OK(OortPacer::Validate(state));
  OortPacer restored(o);
  restored.ImportFrom(state);
  EXPECT_EQ(restored.round_threshold_percent(), 30);
  o.hold_round_threshold = false;
  OortPacer oort_rule(o);
  oort_rule.ImportFrom(state);
  EXPECT_EQ(oort_rule.round_threshold_percent(), 55);
}

TEST(ExperienceTrackerTest, KeepsRunningExtremesAndRoundTrips) {
  ExperienceTracker t;
  EXPECT_FALSE(t.has_range());
  t.Observe(5, 10);
  t.Observe(2, 30);
  t.Observe(9, 20);
  ASSERT_TRUE(t.has_range());
  EXPECT_EQ(t.range().min_duration_s, 2);
  EXPECT_EQ(t.range().max_duration_s, 9);
  EXPECT_EQ(t.range().min_utility, 10);
  EXPECT_EQ(t.range().max_utility, 30);
  v1::FedCaseState state;
  t.ExportTo(&state);
  ExperienceTracker restored;
  restored.ImportFrom(state);
  EXPECT_TRUE(restored.has_range());
  EXPECT_EQ(restored.range().max_duration_s, 9);
}

// The incremental ranking FedCaSe takes its top clients from is the full sort of every
// experience, (-experience, index) ascending, after a seeded run of completions in which
// clients complete again (their experience moves) and the extremes move under earlier ones.
TEST(ExperienceTrackerTest, RankedIsTheFullSortUnderChurn) {
  std::mt19937_64 rng(47);
  std::uniform_int_distribution<int> client(0, 39);
  std::uniform_real_distribution<double> seconds(1.0, 100.0);
  std::uniform_real_distribution<double> utility(0.0, 50.0);
  ExperienceTracker t;
  for (int step = 0; step < 400; ++step) {
    // A few ties on purpose: equal (duration, utility) pairs give equal experiences.
    const double d = step % 7 == 0 ? 10.0 : seconds(rng);
    const double u = step % 7 == 0 ? 5.0 : utility(rng);
    t.OnCompleted(static_cast<ClientIndex>(client(rng)), d, u, 0.1);
    if (step % 50 != 49) continue;
    std::vector<std::pair<double, ClientIndex>> full;
    for (const auto& [index, e] : t.experiences()) full.emplace_back(-e, index);
    std::sort(full.begin(), full.end());
    const std::vector<std::pair<double, ClientIndex>> ranked(t.ranked().begin(), t.ranked().end());
    ASSERT_EQ(ranked, full) << "after " << step + 1 << " completions";
    for (const auto& [index, e] : t.experiences()) EXPECT_EQ(t.ExperienceOf(index), e);
  }
  EXPECT_FALSE(t.ExperienceOf(40).has_value());
  // A restored tracker ranks the restored experiences.
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({}));
  for (int i = 0; i < 40; ++i) {
    v1::DeviceProfile d;
    d.set_num_samples(10);
    ASSERT_OK(book->OnRegister(absl::StrCat("e", i), d, 0.0).status());
  }
  v1::FedCaseState state;
  t.ExportTo(&state, book.get());
  ExperienceTracker restored;
  restored.ImportFrom(state, book.get());
  EXPECT_TRUE(std::equal(restored.ranked().begin(), restored.ranked().end(), t.ranked().begin(),
                         t.ranked().end()));
}

// ---------------------------------------------------------------------------------------------
// The policies, driven directly

// A book of clients whose predicted seconds are ms / 100 (10 samples per task, no transfer, no
// I/O; as in planner_test), and a RoundContext over all of them.
class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(book_, ProfileBook::Create({.heartbeat_timeout_s = 1e9}));
    options_.clients_per_round = 4;
    options_.overcommit = 1.0;
    options_.batch_size = 10;
    options_.local_steps = 1;
    options_.round_deadline_s = 1000;
    ASSERT_OK_AND_ASSIGN(predictor_, profile::RoundTimePredictor::Create(options_.predictor));
  }

  // Registers a client with a benchmark of `ms` per sample; with `utility` > 0 it is also
  // measured (tried in round 1, statistical utility `utility`).
  ClientIndex Add(double ms, double utility = 0) {
    v1::DeviceProfile d;
    d.set_device_model("phone");
    d.set_compute_ms_per_sample(ms);
    d.set_num_samples(1000);
    auto r = book_->OnRegister(absl::StrCat("d", book_->size()), d, 0.0);
    EXPECT_TRUE(r.ok()) << r.status();
    if (utility > 0) {
      v1::UpdateMetrics m;
      m.set_num_examples(10);
      m.set_train_seconds(ms / 100);
      m.set_statistical_utility(utility);
      EXPECT_OK(book_->OnTaskAssigned(r->index, 1, 0));
      EXPECT_OK(book_->OnTaskSucceeded(r->index, m, {.completion_s = ms / 100}, 0));
    }
    return r->index;
  }

  // Runs `policy` over every client (listed twice: duplicates must be skipped) and returns the
  // chosen candidates in selection order.
  std::vector<Candidate> Run(SelectionPolicy& policy, size_t slots, int64_t rounds_planned,
                             uint64_t seed = 1) {
    candidates_.clear();
    for (int pass = 0; pass < 2; ++pass) {
      for (ClientIndex i = 0; i < book_->size(); ++i) candidates_.push_back(i);
    }
    request_ = {.round = rounds_planned + 1, .now_s = 0, .candidates = candidates_};
    const CandidateEvaluator evaluator(options_, *book_, predictor_, memory_, request_);
    std::mt19937_64 rng(seed);
    RngDraws draws(rng);
    const RoundContext round{.request = request_,
                             .options = options_,
                             .book = *book_,
                             .evaluator = evaluator,
                             .slots = slots,
                             .attempt = 1,
                             .rounds_planned = rounds_planned,
                             .rng = rng,
                             .draws = draws};
    plan_ = RoundPlan();
    pool_.BeginRound(book_->size());
    policy.Select(round, &pool_, &plan_);
    std::vector<Candidate> chosen;
    for (uint32_t pos : pool_.chosen()) chosen.push_back(pool_[pos]);
    return chosen;
  }

  std::unique_ptr<ProfileBook> book_;
  PlannerOptions options_;
  profile::RoundTimePredictor predictor_ = *profile::RoundTimePredictor::Create({});
  fit::MemoryPredictor memory_ = *fit::MemoryPredictor::Create({});
  std::vector<ClientIndex> candidates_;
  PlanRequest request_;
  CandidatePool pool_;
  RoundPlan plan_;
};

TEST_F(PolicyTest, FactoryPicksThePolicyOfTheOptions) {
  OortPacer pacer(options_.oort);
  ExperienceTracker experience;
  auto make = [&](v1::SelectionPolicy p) -> std::unique_ptr<SelectionPolicy> {
    options_.policy = p;
    absl::StatusOr<const SelectionPolicyKind*> kind = PlannerSelectionPolicy(options_);
    if (!kind.ok()) return nullptr;
    auto policy =
        (*kind)->Create({.options = options_, .pacer = &pacer, .experience = &experience});
    return policy.ok() ? std::move(*policy) : nullptr;
  };
  EXPECT_NE(dynamic_cast<RandomPolicy*>(make(v1::SELECTION_POLICY_UNSPECIFIED).get()), nullptr);
  EXPECT_NE(dynamic_cast<RandomPolicy*>(make(v1::SELECTION_POLICY_RANDOM).get()), nullptr);
  EXPECT_NE(dynamic_cast<OortPolicy*>(make(v1::SELECTION_POLICY_OORT).get()), nullptr);
  EXPECT_NE(dynamic_cast<FedCasePolicy*>(make(v1::SELECTION_POLICY_FEDCASE).get()), nullptr);
  EXPECT_NE(dynamic_cast<OortPolicy*>(make(v1::SELECTION_POLICY_PYRAMIDFL).get()), nullptr);
  EXPECT_NE(dynamic_cast<FedCasePolicy*>(make(v1::SELECTION_POLICY_FEDSCHED).get()), nullptr);
}

TEST_F(PolicyTest, RandomPicksDistinctNonBusyClientsDeterministically) {
  for (int i = 0; i < 20; ++i) Add(100 + i);
  ASSERT_OK(book_->OnTaskAssigned(7, 1, 0));  // busy
  RandomPolicy policy;
  const std::vector<Candidate> a = Run(policy, 5, 0, /*seed=*/9);
  ASSERT_EQ(a.size(), 5u);
  std::set<ClientIndex> picked;
  for (const Candidate& c : a) {
    picked.insert(c.index);
    EXPECT_EQ(c.note, kNoteRandom);
    EXPECT_EQ(c.status, kSelected);
    EXPECT_THAT(c.t_s, DoubleNear((100 + c.index) / 100.0, 1e-12));
  }
  EXPECT_EQ(picked.size(), 5u);
  EXPECT_FALSE(picked.contains(7));
  EXPECT_TRUE(plan_.expected_next.empty());
  std::vector<ClientIndex> again;
  for (const Candidate& c : Run(policy, 5, 0, 9)) again.push_back(c.index);
  std::vector<ClientIndex> first;
  for (const Candidate& c : a) first.push_back(c.index);
  EXPECT_EQ(again, first);
  // Everyone when there are fewer candidates than slots.
  EXPECT_EQ(Run(policy, 100, 0).size(), 19u);
}

TEST_F(PolicyTest, OortFirstRoundIsUniformThenExploitsTheBestScores) {
  // Four tried clients (t = 1, 2, 4, 8 s; U = 10, 20, 40, 80) and four never tried.
  const double ms[] = {100, 200, 400, 800};
  const double utility[] = {10, 20, 40, 80};
  for (int i = 0; i < 4; ++i) Add(ms[i], utility[i]);
  for (int i = 0; i < 4; ++i) Add(300);
  options_.oort.exploration_factor = 0.5;
  OortPacer pacer(options_.oort);
  OortPolicy policy(&pacer);

  for (const Candidate& c : Run(policy, 4, /*rounds_planned=*/0)) {
    EXPECT_EQ(c.note, kNoteOortInitial);
    EXPECT_TRUE(c.explore_pick);
  }
  EXPECT_EQ(plan_.preferred_duration_s, 0);
  EXPECT_TRUE(plan_.expected_next.empty());

  const std::vector<Candidate> chosen = Run(policy, 4, /*rounds_planned=*/1);
  ASSERT_EQ(chosen.size(), 4u);
  // floor((1 - 0.5) x 4) = 2 exploited, 2 explored.
  int exploited = 0;
  for (const Candidate& c : chosen) {
    EXPECT_EQ(c.exploited, c.tried);
    EXPECT_EQ(c.note, c.tried ? kNoteOortExploit : kNoteOortExplore);
    exploited += c.exploited ? 1 : 0;
  }
  EXPECT_EQ(exploited, 2);
  // T = the 30th percentile of every candidate's duration {1, 2, 3, 3, 3, 3, 4, 8} = 3 s.
  EXPECT_THAT(plan_.preferred_duration_s, DoubleNear(3.0, 1e-12));
  EXPECT_EQ(pacer.preferred_duration_s(), plan_.preferred_duration_s);
  // Prefetch: the two tried clients not picked.
  EXPECT_EQ(plan_.expected_next.size(), 2u);
  for (const PrefetchHint& h : plan_.expected_next) {
    for (const Candidate& c : chosen) EXPECT_NE(h.index, c.index);
  }
  v1::SelectionReason r;
  r.set_speed_penalty(1);
  policy.Describe(chosen[0], book_->state(chosen[0].index), &r);
  EXPECT_EQ(r.score(), chosen[0].score);
  EXPECT_GT(r.speed_penalty(), 0);
}

TEST_F(PolicyTest, FedCaseJoinsTheBaseSetWithTheTopExperiencedThenTakesLateClients) {
  // c0 1 s, c1 2 s, c2 3 s; c3 is too slow for the deadline (20 s > 10 s). Experience fixed at
  // completion: c0 best (1 s, U 100), then c1, then c2.
  Add(100, 100);
  Add(200, 50);
  Add(300, 10);
  Add(2000, 60);
  options_.round_deadline_s = 10;
  options_.clients_per_round = 2;
  options_.fedcase.top_ratio = 0.5;  // one top client
  options_.fedcase.base_policy = v1::FedCaseConfig::BASE_POLICY_RANDOM;
  OortPacer pacer(options_.oort);
  ExperienceTracker experience;
  experience.OnCompleted(2, 3, 10, 0.1);
  experience.OnCompleted(1, 2, 50, 0.1);
  experience.OnCompleted(0, 1, 100, 0.1);
  FedCasePolicy policy(&pacer, &experience);

  // Two slots: the random base set's two, joined with c0, keep the two fastest: c0 first.
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::vector<Candidate> chosen = Run(policy, 2, 1, seed);
    ASSERT_EQ(chosen.size(), 2u);
    EXPECT_EQ(chosen[0].index, 0u);
    EXPECT_LT(chosen[0].t_s, chosen[1].t_s);
    EXPECT_EQ(chosen[0].experience, *experience.ExperienceOf(0));
  }
  // Four slots: the three fitting, then the late one.
  const std::vector<Candidate> chosen = Run(policy, 4, 1);
  ASSERT_EQ(chosen.size(), 4u);
  EXPECT_EQ(chosen[3].index, 3u);
  EXPECT_EQ(chosen[3].note, kNoteFedCaseLate);
  EXPECT_FALSE(chosen[3].fits);
  EXPECT_EQ(plan_.preferred_duration_s, 0);  // Oort did not score
  v1::SelectionReason r;
  policy.Describe(chosen[0], book_->state(chosen[0].index), &r);
  EXPECT_EQ(r.experience(), chosen[0].experience);
  EXPECT_EQ(r.statistical_utility(), 0);  // no Oort terms under the random base

  // On Oort's base set the base goes through Oort's stages.
  options_.fedcase.base_policy = v1::FedCaseConfig::BASE_POLICY_OORT;
  const std::vector<Candidate> on_oort = Run(policy, 3, 1);
  ASSERT_EQ(on_oort.size(), 3u);
  EXPECT_GT(plan_.preferred_duration_s, 0);
}

TEST(TopRatioLearnerTest, DrawsAtRandomUntilRoundNineCommittedThenPredicts) {
  TopRatioLearner learner;
  std::mt19937_64 rng(3);
  // Ratio 0.5 always works best: loss drops fast when 0.5 was used.
  for (int round = 1; round <= 12; ++round) {
    RngDraws draws(rng);
    const double ratio = learner.Draw(draws, rng);
    if (round < 10) {
      EXPECT_NEAR(ratio * 10, std::round(ratio * 10), 1e-12) << round;
      EXPECT_GE(ratio, 0.1);
      EXPECT_LE(ratio, 0.9);
    }
    learner.AddLoss(2.0 - 0.1 * round);
    learner.FinishRound(/*committed=*/true, 60.0 * round);
  }
  EXPECT_EQ(learner.committed_rounds(), 12);
  EXPECT_EQ(learner.rows().size(), 11u);  // the first committed round is the baseline
  EXPECT_NEAR(learner.rows()[0][0], 0.1, 1e-12);
  EXPECT_EQ(learner.rows()[0][1], 60);
  v1::FedCaseState state;
  learner.ExportTo(&state);
  TopRatioLearner restored;
  ASSERT_OK(restored.ImportFrom(state));
  EXPECT_EQ(restored.rows(), learner.rows());
  EXPECT_EQ(restored.targets(), learner.targets());
  state.add_ratios(0.5);
  EXPECT_EQ(restored.ImportFrom(state).code(), absl::StatusCode::kInvalidArgument);
}

// Draw grows only the trees' paths to the query point; its ratio and its draws must be the full
// forest's (RegressionForest::Fit then Predict) bit for bit, over a history with tied times.
TEST(TopRatioLearnerTest, DrawPredictsAsTheFullForestBitForBit) {
  TopRatioLearner learner;
  std::mt19937_64 rng(7);
  std::mt19937_64 noise(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double loss = 3.0;
  for (int round = 1; round <= 60; ++round) {
    std::mt19937_64 full_rng = rng;  // the state Draw starts from
    RngDraws draws(rng);
    const double ratio = learner.Draw(draws, rng);
    if (learner.committed_rounds() >= TopRatioLearner::kLearnAfterRounds) {
      RngDraws full_draws(full_rng);
      double expected = static_cast<double>(full_draws.PickIndex(9) + 1) / 10.0;
      RegressionForest forest;
      forest.Fit(learner.rows(), learner.targets(), TopRatioLearner::kForestTrees,
                 /*bootstrap=*/true, full_rng);
      const double predicted = forest.Predict(learner.AimPoint());
      if (predicted != 0) expected = predicted;
      EXPECT_EQ(ratio, expected) << round;
      EXPECT_EQ(rng(), full_rng()) << round;  // the same draws were made
    }
    loss -= 0.05 * unit(noise);
    learner.AddLoss(loss);
    // Round times on a 30 s grid: many rows tie on time_diff.
    learner.FinishRound(/*committed=*/true, 30.0 * (2 * round + (round % 3)));
  }
}

// ---------------------------------------------------------------------------------------------
// SELECTION_POLICY_FEDSCHED: the preset (docs/ALGORITHMS.md §11)

TEST(SelectionPresetTest, FedschedExpandsToItsLeversAndKeepsWhatTheConfigNames) {
  v1::ServerConfig config;
  config.mutable_selection()->set_policy(v1::SELECTION_POLICY_FEDSCHED);
  v1::ServerConfig expanded = config;
  ASSERT_OK(ResolveSelectionPolicy(&expanded).status());
  EXPECT_TRUE(expanded.selection().workload_sizing());
  EXPECT_TRUE(expanded.selection().oort().hold_round_threshold());
  EXPECT_EQ(expanded.selection().extend_workload().beta(), 0.5);
  EXPECT_EQ(expanded.cache().policy(), v1::CACHE_POLICY_LRU);
  EXPECT_EQ(expanded.selection().policy(), v1::SELECTION_POLICY_FEDSCHED);
  // The planner reads the same levers from the unexpanded config; no update dropout.
  ASSERT_OK_AND_ASSIGN(PlannerOptions o, PlannerOptions::FromServerConfig(config));
  EXPECT_TRUE(o.workload_sizing);
  EXPECT_TRUE(o.oort.hold_round_threshold);
  EXPECT_EQ(o.extend_workload_beta, 0.5);
  EXPECT_EQ(o.update_dropout_high, 0);
  EXPECT_EQ(o.cache.policy, v1::CACHE_POLICY_LRU);
  // It selects as FedCaSe does.
  OortPacer pacer(o.oort);
  ExperienceTracker experience;
  ASSERT_OK_AND_ASSIGN(const SelectionPolicyKind* kind, PlannerSelectionPolicy(o));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SelectionPolicy> policy,
                       kind->Create({.options = o, .pacer = &pacer, .experience = &experience}));
  EXPECT_NE(dynamic_cast<FedCasePolicy*>(policy.get()), nullptr);

  // A cache policy, beta or the extension's switch the config names is kept.
  config.mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  config.mutable_selection()->mutable_extend_workload()->set_beta(0.25);
  ASSERT_OK_AND_ASSIGN(o, PlannerOptions::FromServerConfig(config));
  EXPECT_EQ(o.cache.policy, v1::CACHE_POLICY_IMPORTANCE);
  EXPECT_EQ(o.extend_workload_beta, 0.25);
  config.mutable_selection()->mutable_extend_workload()->set_disable(true);
  ASSERT_OK_AND_ASSIGN(o, PlannerOptions::FromServerConfig(config));
  EXPECT_EQ(o.extend_workload_beta, 0);

  // The registry names it, case-insensitive; unknown names are named in the error.
  ASSERT_OK_AND_ASSIGN(const SelectionPolicyKind* found, FindSelectionPolicy("FedSched"));
  EXPECT_EQ(found->record_value(), v1::SELECTION_POLICY_FEDSCHED);
  EXPECT_THAT(FindSelectionPolicy("best").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"best\"")));

  // Any other policy: unchanged.
  v1::ServerConfig fedcase;
  fedcase.mutable_selection()->set_policy(v1::SELECTION_POLICY_FEDCASE);
  v1::ServerConfig untouched = fedcase;
  ASSERT_OK(ResolveSelectionPolicy(&untouched).status());
  EXPECT_EQ(untouched.SerializeAsString(), fedcase.SerializeAsString());
}

}  // namespace
}  // namespace fedsched::planner
