// fedsched's own scheduler (docs/ALGORITHMS.md §11) as a selection policy: FedCaSe's selection
// (Khan et al., SoCC 2024) with a preset of the planner's levers, each of which is an option of
// any policy; the preset is their one tested combination (docs/reports/SIMULATION.md "One
// configuration for both models").
#ifndef FEDSCHED_SERVER_PLANNER_FEDSCHED_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_FEDSCHED_POLICY_H_

#include <memory>

#include "server/planner/policy_kind.h"

namespace fedsched::planner {

// "fedsched" (SELECTION_POLICY_FEDSCHED): FedCasePolicy; config FedCaseConfig (the same as
// selection.fedcase). Its preset (ApplyPreset) turns selection.workload_sizing and
// selection.oort.hold_round_threshold on, sets selection.extend_workload.beta 0.5 when unset and
// the extension is not disabled, and cache.policy LRU when unspecified; fields the config names
// keep their values (except the two switches). --policy gives it the LRU cache. Its preset's
// aggregation part, stragglers' late updates folded where the aggregation allows it, depends on
// the aggregation rule and is applied by round::ResolveRoundConfig. Selects by experience, so
// the planner persists experiences. Registered by policy_registry.cc.
std::unique_ptr<SelectionPolicyKind> MakeFedschedPolicyKind();

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_FEDSCHED_POLICY_H_
