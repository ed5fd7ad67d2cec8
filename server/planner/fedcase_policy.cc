#include "server/planner/fedcase_policy.h"

#include <algorithm>

#include "server/planner/workload.h"

namespace fedsched::planner {
namespace {

bool Fits(const Candidate& c) { return c.fits; }
double ExperienceOf(const Candidate& c) { return c.experience; }

auto Chooser(const RoundContext& round, CandidatePool* pool, Note note) {
  return ChooseIfOnline(round, pool, note, /*exploited=*/false, /*explore_pick=*/false);
}

}  // namespace

void ExperienceTracker::Observe(double duration_s, double utility) {
  if (!has_range_) {
    range_ = {duration_s, duration_s, utility, utility};
    has_range_ = true;
  }
  range_.min_duration_s = std::min(range_.min_duration_s, duration_s);
  range_.max_duration_s = std::max(range_.max_duration_s, duration_s);
  range_.min_utility = std::min(range_.min_utility, utility);
  range_.max_utility = std::max(range_.max_utility, utility);
}

void ExperienceTracker::ExportTo(v1::FedCaseState* f) const {
  f->set_has_range(has_range_);
  f->set_min_duration_s(range_.min_duration_s);
  f->set_max_duration_s(range_.max_duration_s);
  f->set_min_utility(range_.min_utility);
  f->set_max_utility(range_.max_utility);
}

void ExperienceTracker::ImportFrom(const v1::FedCaseState& f) {
  has_range_ = f.has_range();
  range_ = {f.min_duration_s(), f.max_duration_s(), f.min_utility(), f.max_utility()};
}

void FedCasePolicy::Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  oort_.BeginRound();
  PoolCandidates(round, pool);
  if (pool->empty()) return;
  ScoreExperience(round, pool);
  const size_t top = std::min(
      round.slots, static_cast<size_t>(std::max(0, CeilToInt(round.options.fedcase.top_ratio *
                                                             round.options.clients_per_round))));

  pool->FillStage(Fits, ExperienceOf);
  pool->TakeTop(top, Chooser(round, pool, kNoteFedCaseTop));
  if (pool->num_chosen() < round.slots) FillBase(round, pool, plan);
  if (pool->num_chosen() < round.slots) {
    pool->FillStage([](const Candidate& c) { return !c.fits; },
                    [](const Candidate& c) { return -c.t_s; });
    pool->TakeTop(round.slots - pool->num_chosen(), Chooser(round, pool, kNoteFedCaseLate));
  }
  if (round.options.cache.prefetch && top > 0) {
    // Expected next round: the best by experience among those not picked now.
    pool->FillStage(Fits, ExperienceOf);
    AppendExpectedNext(round, top, pool, plan);
  }
}

void FedCasePolicy::Describe(const Candidate& c, const profile::ClientState& client,
                             v1::SelectionReason* reason) const {
  oort_.DescribeTerms(c, client, reason);
  reason->set_experience(c.experience);
  reason->set_score(c.note == kNoteFedCaseTop ? c.experience : c.score);
}

void FedCasePolicy::ScoreExperience(const RoundContext& round, CandidatePool* pool) {
  // Running extremes over all history, this round's candidates included.
  for (const Candidate& c : pool->candidates()) experience_->Observe(c.t_s, c.utility);
  const double speed_weight = round.options.fedcase.speed_weight;
  for (Candidate& c : pool->candidates()) {
    c.experience = FedCaseExperience(c.t_s, c.utility, experience_->range(), speed_weight);
    c.score = c.experience;  // the random base set keeps it; Oort's overwrites it
  }
}

void FedCasePolicy::FillBase(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  if (round.options.fedcase.base_policy == v1::FedCaseConfig::BASE_POLICY_RANDOM) {
    pool->FillStage(Fits, [](const Candidate&) { return 0.0; });
    pool->TakeRandom(round.slots - pool->num_chosen(), round.rng,
                     Chooser(round, pool, kNoteFedCaseRandom));
  } else {
    oort_.Fill(round, /*fits_only=*/true, pool, plan);
  }
}

}  // namespace fedsched::planner
