#include "server/planner/oort_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/types/span.h"

namespace fedsched::planner {
namespace {

// Stage filters: with `fits_only`, only candidates predicted to finish by the deadline.
auto Eligible(bool fits_only) {
  return [fits_only](const Candidate& c) { return !fits_only || c.fits; };
}
double ScoreOf(const Candidate& c) { return c.score; }

// Chooses a candidate predicted online as exploited (tried) or explored (never tried).
auto Chooser(const RoundContext& round, CandidatePool* pool, Note note, bool exploited) {
  return ChooseIfOnline(round, pool, note, exploited, /*explore_pick=*/!exploited);
}

// Whether some registered (live) client was never selected. Oort judges its exploration stop
// over every registered client (getTopK's self.unexplored), not over the round's candidates:
// under churn the online clients may all be tried while others, offline now, never were.
// O(book size), run only in rounds without a never-tried candidate.
bool AnyRegisteredNeverTried(const profile::ProfileBook& book) {
  for (ClientIndex i = 0; i < static_cast<ClientIndex>(book.size()); ++i) {
    const profile::ClientState& st = book.state(i);
    if (!st.retired && st.last_selected_round == 0) return true;
  }
  return false;
}

}  // namespace

void OortPolicy::Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  BeginRound();
  PoolCandidates(round, pool);
  if (pool->empty()) return;
  const bool scored = Fill(round, /*fits_only=*/false, pool, plan);
  if (round.options.cache.prefetch && scored) {
    // Expected next round: the best-scoring tried clients not picked now.
    pool->FillStage([](const Candidate& c) { return c.tried; }, ScoreOf);
    AppendExpectedNext(round, round.slots, pool, plan);
  }
}

void OortPolicy::Describe(const Candidate& c, const profile::ClientState& client,
                          v1::SelectionReason* reason) const {
  DescribeTerms(c, client, reason);
  reason->set_score(c.score);
}

void OortPolicy::DescribeTerms(const Candidate& c, const profile::ClientState& client,
                               v1::SelectionReason* reason) const {
  if (!scored_ || !(terms_.preferred_duration_s > 0)) return;
  const OortScoreTerms st =
      OortScore(c.utility, c.t_s, std::max<int64_t>(1, client.last_selected_round), terms_);
  reason->set_statistical_utility(st.utility);
  reason->set_speed_penalty(st.speed_penalty);
}

bool OortPolicy::Fill(const RoundContext& round, bool fits_only, CandidatePool* pool,
                      RoundPlan* plan) {
  // Oort's getTopK runs its pacer first, on every selection.
  pacer_->BeginSelection(round.request.round);
  if (pool->num_chosen() >= round.slots) return false;
  // Oort's share of the round: everything when it selects alone, the slots left by FedCaSe's
  // top clients when it is FedCaSe's base set.
  const size_t oort_slots = round.slots - pool->num_chosen();
  const bool first_round =
      round.rounds_planned == 0 || (round.attempt > 1 && round.rounds_planned == 1);
  if (first_round) {
    // Oort's first round is uniform (docs/ALGORITHMS.md §3): nothing is known yet.
    pool->FillStage(Eligible(fits_only), [](const Candidate&) { return 0.0; });
    pool->TakeRandom(oort_slots, round.draws, Chooser(round, pool, kNoteOortInitial, false));
    return false;
  }
  // As getTopK: epsilon decays per selection, before it sizes the exploitation.
  pacer_->DecayEpsilon();
  ComputeRoundTerms(round, *pool, plan);
  const size_t tried_left = ScorePool(round, fits_only, pool);
  const size_t exploit_len =
      std::min(tried_left, static_cast<size_t>(std::floor((1.0 - pacer_->epsilon()) * oort_slots)));
  Exploit(round, exploit_len, pool);
  if (any_never_tried_) {
    Explore(round, oort_slots - exploit_len, pool);
  } else if (!round.options.oort.resume_exploration && !AnyRegisteredNeverTried(round.book)) {
    // Every registered client has been tried: Oort stops exploring for good and fills the rest
    // of this round uniformly at random (rng.choice over the feasible clients), counted as
    // exploited (Oort appends the fill to its exploited list). resume_exploration never stops:
    // clients who register later are explored (docs/ALGORITHMS.md §3.4).
    pacer_->StopExploring();
    if (pool->num_chosen() < round.slots) {
      pool->FillStage(Eligible(fits_only), [](const Candidate&) { return 0.0; });
      pool->TakeRandom(round.slots - pool->num_chosen(), round.draws,
                       Chooser(round, pool, kNoteOortFillExploit, true));
    }
  }
  // Otherwise (never-tried clients are registered but none is a candidate now, or exploration
  // never stops) nobody is explored this round and epsilon keeps moving: the shortfall fill
  // below takes the rest uniformly, not counted as exploited (getTopK's exploration branch with
  // an empty feasible set of unexplored clients).
  FillShortfall(round, fits_only, pool);
  return true;
}

void OortPolicy::ComputeRoundTerms(const RoundContext& round, const CandidatePool& pool,
                                   RoundPlan* plan) {
  // As getTopK: T is the round_threshold-th percentile of every candidate's predicted duration
  // (Oort: of every registered client), tried or not; the utility clip, floor and max are taken
  // over every candidate with a positive utility, never-tried clients' registration utility
  // included (get_norm). FedCaSe's top clients take part.
  // One pass over the pool for both: T's durations and the positive utilities, each in pool
  // order.
  const std::vector<Candidate>& all = pool.candidates();
  values_.clear();
  utilities_.clear();
  double min_utility = std::numeric_limits<double>::infinity();
  double max_utility = 0;
  for (const Candidate& c : all) {
    values_.push_back(c.t_s);
    if (!(c.utility > 0)) continue;
    utilities_.push_back(c.utility);
    min_utility = std::min(min_utility, c.utility);
    max_utility = std::max(max_utility, c.utility);
  }
  terms_ = OortRoundTerms();
  terms_.round = round.request.round;
  terms_.round_penalty = round.options.oort.round_penalty;
  terms_.preferred_duration_s =
      PercentileInPlace(absl::MakeSpan(values_), pacer_->round_threshold_percent());
  terms_.clip_utility =
      PercentileInPlace(absl::MakeSpan(utilities_), 100.0 * round.options.oort.clip_bound);
  terms_.min_utility = utilities_.empty() ? 0.0 : min_utility;
  terms_.max_utility = max_utility;
  scored_ = true;
  pacer_->set_preferred_duration_s(terms_.preferred_duration_s);
  plan->preferred_duration_s = terms_.preferred_duration_s;
}

size_t OortPolicy::ScorePool(const RoundContext& round, bool fits_only, CandidatePool* pool) {
  // The exploit and explore stages are staged here, in the same pass: Exploit chooses or
  // rejects only tried candidates, so the never-tried ones are still as scored when Explore
  // takes its stage.
  const auto eligible = Eligible(fits_only);
  tried_stage_.clear();
  never_tried_stage_.clear();
  any_never_tried_ = false;
  std::vector<Candidate>& all = pool->candidates();
  for (uint32_t pos = 0; pos < all.size(); ++pos) {
    Candidate& c = all[pos];
    const bool stage = c.status == kAvailable && eligible(c);
    if (c.tried) {
      c.score =
          OortScore(c.utility, c.t_s, round.book.state(c.index).last_selected_round, terms_).score;
      if (stage) tried_stage_.push_back({c.score, pos});
    } else {
      any_never_tried_ = true;
      // Exploration weight: registration utility x speed penalty.
      c.score =
          c.utility * OortSpeedPenalty(c.t_s, terms_.preferred_duration_s, terms_.round_penalty);
      if (stage) never_tried_stage_.push_back({c.score, pos});
    }
  }
  return tried_stage_.size();  // tried clients Oort may still exploit
}

void OortPolicy::Exploit(const RoundContext& round, size_t exploit_len, CandidatePool* pool) {
  // p ~ score among the tried clients scoring >= cut_off x the NEXT score after the
  // exploit_len best (Oort's scores[sortedClientUtil[exploitLen]]; the last one when all of
  // them are exploited).
  if (exploit_len == 0) return;
  // The tried candidates still available and eligible, keyed by score, in pool order.
  pool->stage().swap(tried_stage_);
  const size_t next = std::min(exploit_len + 1, pool->stage().size());
  const double cut = round.options.oort.cut_off_util * pool->NthLargestStageKey(next);
  pool->KeepStageKeysAtLeast(cut);
  pool->TakeWeighted(exploit_len, round.draws, Chooser(round, pool, kNoteOortExploit, true));
}

void OortPolicy::Explore(const RoundContext& round, size_t explore_len, CandidatePool* pool) {
  // p ~ weight among the sample_window x explore_len never-tried with the largest one.
  if (explore_len == 0) return;
  // The never-tried candidates available and eligible, keyed by weight, in pool order.
  pool->stage().swap(never_tried_stage_);
  pool->KeepBestOfStage(static_cast<size_t>(round.options.oort.sample_window) * explore_len);
  pool->TakeWeighted(explore_len, round.draws, Chooser(round, pool, kNoteOortExplore, false));
}

void OortPolicy::FillShortfall(const RoundContext& round, bool fits_only,
                               CandidatePool* pool) const {
  // As getTopK's last loop (rng.choice over the feasible clients): a pool too small, or
  // candidates predicted offline, leave slots that are filled uniformly among the remaining
  // candidates. They do not count as exploited for the pacer: Oort's exploitClients holds only
  // the exploited draw when it explores.
  if (pool->num_chosen() >= round.slots) return;
  pool->FillStage(Eligible(fits_only), [](const Candidate&) { return 0.0; });
  pool->TakeRandom(round.slots - pool->num_chosen(), round.draws, [&round, pool](uint32_t pos) {
    const bool tried = (*pool)[pos].tried;
    return ChooseIfOnline(round, pool, tried ? kNoteOortFillExploit : kNoteOortFillExplore,
                          /*exploited=*/false, /*explore_pick=*/!tried)(pos);
  });
}

namespace {

class OortPolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "oort"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_OORT; }
  absl::string_view config_type() const override { return "fedsched.v1.OortConfig"; }
  v1::CachePolicy implied_cache() const override { return v1::CACHE_POLICY_LRU; }
  bool scores_by_utility() const override { return true; }
  absl::Status MapConfig(v1::SelectionConfig* selection) const override {
    return MoveAnyOnto(name(), "selection.oort", selection, selection->mutable_oort());
  }
  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return std::make_unique<OortPolicy>(resources.pacer);
  }
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakeOortPolicyKind() {
  return std::make_unique<OortPolicyKind>();
}

}  // namespace fedsched::planner
