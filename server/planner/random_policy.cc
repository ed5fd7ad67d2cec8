#include "server/planner/random_policy.h"

#include <vector>

namespace fedsched::planner {

void RandomPolicy::Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  std::vector<Keyed>& stage = pool->stage();
  stage.clear();
  // Each busy check waits on the candidate's ClientState at a million clients: the states are
  // fetched kPrefetchAhead candidates early.
  constexpr size_t kPrefetchAhead = 8;
  const absl::Span<const ClientIndex> candidates = round.request.candidates;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i + kPrefetchAhead < candidates.size()) {
      __builtin_prefetch(&round.book.state(candidates[i + kPrefetchAhead]).busy);
    }
    const ClientIndex idx = candidates[i];
    if (round.book.state(idx).busy || !pool->Claim(idx)) continue;
    stage.push_back({0.0, idx});
  }
  pool->TakeRandom(
      round.slots, round.draws,
      [&round, pool](uint32_t idx) {
        Candidate c;
        round.evaluator.Evaluate(idx, &c);
        if (!round.evaluator.Admissible(c)) return false;
        pool->Add() = c;
        pool->Choose(static_cast<uint32_t>(pool->size() - 1), kNoteRandom);
        return true;
      },
      /*positions_are_clients=*/true);
}

namespace {

class RandomPolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "random"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_RANDOM; }
  v1::CachePolicy implied_cache() const override { return v1::CACHE_POLICY_LRU; }
  bool samples_uniformly() const override { return true; }
  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return std::make_unique<RandomPolicy>();
  }
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakeRandomPolicyKind() {
  return std::make_unique<RandomPolicyKind>();
}

}  // namespace fedsched::planner
