// The built-in aggregation rules (docs/ALGORITHMS.md §5), one class per file in this directory,
// and what several of them share. Internal to server/aggregation: the registry
// (aggregation_rule_registry.cc) registers each factory under its config.proto name; everything
// else creates rules through the registry.
#ifndef FEDSCHED_SERVER_AGGREGATION_RULES_BUILTIN_RULES_H_
#define FEDSCHED_SERVER_AGGREGATION_RULES_BUILTIN_RULES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "server/aggregation/aggregation_rule.h"
#include "server/aggregation/kernels.h"

namespace fedsched::aggregation_rules {

// Factories of the built-in rules, each a new instance; never null, never fail.
std::unique_ptr<AggregationRule> NewFedAvg();       // fedavg.cc
std::unique_ptr<AggregationRule> NewFedAvgM();      // fedavgm.cc
std::unique_ptr<AggregationRule> NewFedAdam();      // fedadam.cc
std::unique_ptr<AggregationRule> NewFedYogi();      // fedyogi.cc
std::unique_ptr<AggregationRule> NewFedAdagrad();   // fedadagrad.cc
std::unique_ptr<AggregationRule> NewTrimmedMean();  // trimmed_mean.cc
std::unique_ptr<AggregationRule> NewMedian();       // median.cc
std::unique_ptr<AggregationRule> NewKrum();         // krum.cc
std::unique_ptr<AggregationRule> NewMultiKrum();    // multi_krum.cc

// The properties of the rules that keep every update to bound Byzantine influence (trimmed
// mean, median, Krum, Multi-Krum): none of them works on a sum, so none composes with DP,
// secure aggregation or a hierarchy; FedBuff scales each kept update by its staleness weight.
AggregationRuleProperties RobustRuleProperties();

// The server optimisers' step parameters for `context` (Reddi et al., ICLR 2021, Algorithm 2;
// Hsu et al. 2019): D = sum / W, eta, momentum, beta1, beta2, tau as float.
aggregation_internal::ServerOptimizerParams OptimizerParams(const ServerStepContext& context);

// Runs rule(updates, len, out) over each slice of the coordinates, with `updates` and `out`
// offset to the slice: the coordinate-wise rules' Aggregate.
void CoordinateWise(
    const BufferedUpdates& round, ForEachSliceFn for_each_slice, float* delta,
    absl::FunctionRef<void(const std::vector<const float*>& updates, int64_t len, float* out)>
        rule);

}  // namespace fedsched::aggregation_rules

#endif  // FEDSCHED_SERVER_AGGREGATION_RULES_BUILTIN_RULES_H_
