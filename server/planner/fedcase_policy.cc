#include "server/planner/fedcase_policy.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "server/planner/workload.h"

namespace fedsched::planner {
namespace {

bool Fits(const Candidate& c) { return c.fits; }
double ExperienceOf(const Candidate& c) { return c.experience; }

auto Chooser(const RoundContext& round, CandidatePool* pool, Note note) {
  return ChooseIfOnline(round, pool, note, /*exploited=*/false, /*explore_pick=*/false);
}

}  // namespace

void FedCasePolicy::Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  oort_.BeginRound();
  PoolCandidates(round, pool);
  if (pool->empty()) return;
  for (Candidate& c : pool->candidates()) {
    const std::optional<double> experience = experience_->ExperienceOf(c.index);
    c.experienced = experience.has_value();
    c.experience = experience.value_or(0.0);
    c.score = c.experience;  // the random base set keeps it; Oort's overwrites it
  }
  FillBase(round, pool, plan);
  const size_t top = TopCount(round);
  JoinExperienced(round, top, pool);
  pool->KeepFastestChosen(round.slots);
  if (pool->num_chosen() < round.slots) {
    pool->FillStage([](const Candidate& c) { return !c.fits; },
                    [](const Candidate& c) { return -c.t_s; });
    pool->TakeTop(round.slots - pool->num_chosen(), Chooser(round, pool, kNoteFedCaseLate));
  }
  if (round.options.cache.prefetch && top > 0) {
    // Expected next round: the best by experience among those not picked now.
    pool->FillStage([](const Candidate& c) { return c.experienced; }, ExperienceOf);
    AppendExpectedNext(round, top, pool, plan);
  }
}

void FedCasePolicy::Describe(const Candidate& c, const profile::ClientState& client,
                             v1::SelectionReason* reason) const {
  oort_.DescribeTerms(c, client, reason);
  reason->set_experience(c.experience);
  reason->set_score(c.note == kNoteFedCaseTop ? c.experience : c.score);
}

void FedCasePolicy::FillBase(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  if (round.options.fedcase.base_policy == v1::FedCaseConfig::BASE_POLICY_RANDOM) {
    pool->FillStage(Fits, [](const Candidate&) { return 0.0; });
    pool->TakeRandom(round.slots - pool->num_chosen(), round.draws,
                     Chooser(round, pool, kNoteFedCaseRandom));
  } else {
    oort_.Fill(round, /*fits_only=*/true, pool, plan);
  }
}

size_t FedCasePolicy::TopCount(const RoundContext& round) {
  if (experience_->experiences().empty()) return 0;  // the review code's empty fedcase_clients
  const double fixed = round.options.fedcase.top_ratio;
  double ratio = fixed;
  if (fixed > 0) {
    experience_->top_ratio().RecordRatio(fixed);
  } else {
    ratio = experience_->top_ratio().Draw(round.draws, round.rng);
  }
  // Python's int(ratio * K): truncation.
  const double count = std::floor(ratio * round.options.clients_per_round);
  return count > 0 ? static_cast<size_t>(count) : 0;
}

void FedCasePolicy::JoinExperienced(const RoundContext& round, size_t top, CandidatePool* pool) {
  if (top == 0) return;
  // The best `top` of every experienced client (ties by index), as the review code sorts its
  // whole fedcase_clients table before filtering the active ones (the tracker keeps them
  // ranked); those in the pool and still available are offered in pool order, all in one
  // TakeTop block, as a FillStage over the pool stages them.
  std::vector<Keyed>& stage = pool->stage();
  stage.clear();
  size_t k = 0;
  for (const auto& [neg_experience, index] : experience_->ranked()) {
    if (k == top) break;
    const uint32_t pos = pool->PositionOf(index);
    if (pos != CandidatePool::kNoPosition && (*pool)[pos].status == kAvailable) {
      stage.push_back({-static_cast<double>(k), pos});
    }
    ++k;
  }
  std::sort(stage.begin(), stage.end(),
            [](const Keyed& a, const Keyed& b) { return a.pos < b.pos; });
  pool->TakeTop(pool->stage().size(), Chooser(round, pool, kNoteFedCaseTop));
}

namespace {

class FedCasePolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "fedcase"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_FEDCASE; }
  absl::string_view config_type() const override { return "fedsched.v1.FedCaseConfig"; }
  v1::CachePolicy implied_cache() const override { return v1::CACHE_POLICY_IMPORTANCE; }
  bool selects_by_experience() const override { return true; }
  bool scores_by_utility() const override { return true; }
  absl::Status MapConfig(v1::SelectionConfig* selection) const override {
    return MoveAnyOnto(name(), "selection.fedcase", selection, selection->mutable_fedcase());
  }
  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return std::make_unique<FedCasePolicy>(resources.pacer, resources.experience);
  }
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakeFedCasePolicyKind() {
  return std::make_unique<FedCasePolicyKind>();
}

}  // namespace fedsched::planner
