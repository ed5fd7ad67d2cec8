#include "server/planner/random_policy.h"

#include <vector>

namespace fedsched::planner {

void RandomPolicy::Select(const RoundContext& round, CandidatePool* pool, RoundPlan* plan) {
  std::vector<Keyed>& stage = pool->stage();
  stage.clear();
  for (ClientIndex idx : round.request.candidates) {
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

}  // namespace fedsched::planner
