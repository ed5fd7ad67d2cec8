#include "server/planner/policy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/planner/cache_plan.h"
#include "server/planner/policy_kind.h"

namespace fedsched::planner {

bool PolicyConfigHolds(const google::protobuf::Any& any, absl::string_view type) {
  return !type.empty() && absl::EndsWith(any.type_url(), absl::StrCat("/", type));
}

absl::Status SelectionPolicyKind::MapConfig(v1::SelectionConfig* selection) const {
  if (!selection->has_policy_config() ||
      PolicyConfigHolds(selection->policy_config(), config_type())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "selection.policy_config of policy \"", name(), "\" must hold ",
      config_type().empty() ? "nothing (the policy takes no config)" : config_type(), ", got ",
      selection->policy_config().type_url().empty() ? "an empty Any (no type URL)"
                                                    : selection->policy_config().type_url()));
}

void PoolCandidates(const RoundContext& round, CandidatePool* pool) {
  // At a million clients the candidates' states are scattered over ~150 MB, and evaluating one
  // waits on its state's cache lines: they are fetched kPrefetchAhead candidates early.
  constexpr size_t kPrefetchAhead = 8;
  const absl::Span<const ClientIndex> candidates = round.request.candidates;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i + kPrefetchAhead < candidates.size()) {
      const auto* ahead =
          reinterpret_cast<const char*>(&round.book.state(candidates[i + kPrefetchAhead]));
      for (size_t line = 0; line < sizeof(profile::ClientState); line += 64) {
        __builtin_prefetch(ahead + line);
      }
    }
    const ClientIndex idx = candidates[i];
    if (round.book.state(idx).busy || !pool->Claim(idx)) continue;
    round.evaluator.Evaluate(idx, &pool->Add());
  }
}

void AppendExpectedNext(const RoundContext& round, size_t count, CandidatePool* pool,
                        RoundPlan* plan) {
  for (const Keyed& k : pool->BestOfStage(count)) {
    const ClientIndex index = (*pool)[k.pos].index;
    const profile::ClientState& s = round.book.state(index);
    plan->expected_next.push_back(
        {index, round.book.profile(index).client_id(),
         MakeCachePlan(round.options.cache, round.options.batch_size, s,
                       LocalStepsFor(round.options, s.num_samples), /*prefetch=*/true)});
  }
}

}  // namespace fedsched::planner
