// PyramidFL (Li et al., MobiCom 2022; docs/ALGORITHMS.md §10) as a selection policy: Oort's
// selection (its authors run sample_mode "oort") with the participants' local steps extended into
// their predicted idle time and update dropout by utility rank, both of which the planner applies
// after any policy's selection (CandidateEvaluator::ExtendWorkload, the planner's dropout).
#ifndef FEDSCHED_SERVER_PLANNER_PYRAMIDFL_POLICY_H_
#define FEDSCHED_SERVER_PLANNER_PYRAMIDFL_POLICY_H_

#include <memory>

#include "server/planner/policy_kind.h"

namespace fedsched::planner {

// "pyramidfl" (SELECTION_POLICY_PYRAMIDFL): OortPolicy; config OortConfig (the same as
// selection.oort). Workload defaults: extension beta 0.5 (liecn/PyramidFL
// training/evals/configs/*/conf_ours.yml) and update dropout in [0.1, 0.6] (liecn/PyramidFL
// training/argParser.py), each unless the config sets or disables it. --policy gives it the LRU
// cache. Registered by policy_registry.cc.
std::unique_ptr<SelectionPolicyKind> MakePyramidFlPolicyKind();

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_PYRAMIDFL_POLICY_H_
