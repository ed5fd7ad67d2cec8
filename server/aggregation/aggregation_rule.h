// The extension point for server aggregation rules (docs/ALGORITHMS.md §5, docs/guides/EXTENDING.md
// "Adding an aggregation rule"). A rule is one class behind this interface: it declares its
// properties, which every config check asks instead of switching on the rule, and does the
// rule's own arithmetic. The Aggregator (aggregator.h) owns what all rules share: update checks,
// clipping, FedBuff staleness weights, the running sum or the buffer of updates, threads, and
// the optimiser state's storage and persistence. Rules are created by name through the registry
// (aggregation_rule_registry.h).
//
// Two kinds of rule:
//   Linear (properties().linear): the aggregate is the example-weighted mean of the updates, so
//     the Aggregator folds each update into one running sum as it arrives (and DP, secure
//     aggregation and hierarchy tiers can work on that sum). The rule implements ServerStep: the
//     new model, and optimiser state, from the sum.
//   Non-linear (properties().needs_all_updates): the Aggregator keeps every update of the round
//     and the rule implements Aggregate: the aggregated delta D from all of them; the new model
//     is then global + server_learning_rate * D.
#ifndef FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_H_
#define FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched {

// What a rule is and what it can run with. Declared once by the rule; the config checks
// (server/round/round_config.cc, server/service/server_config.cc, server/privacy) and the round
// engine read these instead of re-deriving them from the rule's name.
struct AggregationRuleProperties {
  // The aggregate is sum_k w_k d_k / W: updates are folded into a running sum as they arrive.
  // Exactly one of `linear` and `needs_all_updates` is true. Default: true.
  bool linear = true;
  // The rule needs every update of the round at once (it keeps a copy of each, up to
  // aggregation.max_buffered_updates). Default: false.
  bool needs_all_updates = false;
  // Designed to bound the influence of Byzantine (arbitrary) updates. Default: false.
  bool robust = false;
  // Keeps server optimiser state across rounds: exactly when StateSlots() is not empty; only a
  // linear rule may (its ServerStep updates the state). Default: false.
  bool stateful = false;
  // Updates enter a running sum weighted by their num_examples, so the round engine's cap on one
  // update's weight share (server/round/influence.h) applies. Default: true.
  bool example_weighted = true;
  // Composes with differential privacy: the noise is calibrated to the clipped running sum's
  // sensitivity (docs/guides/PRIVACY.md), so the rule must aggregate through that sum. Default:
  // true.
  bool composes_with_dp = true;
  // Composes with secure aggregation, which shows the server only the sum of the round's
  // updates (docs/guides/SECURE_AGGREGATION.md). Default: true.
  bool composes_with_secure_aggregation = true;
  // Composes with hierarchical aggregation, where relays forward partial sums
  // (docs/ARCHITECTURE.md "Hierarchical aggregation"). Default: true.
  bool composes_with_hierarchy = true;
  // Composes with asynchronous FedBuff versions (docs/ALGORITHMS.md §6). Default: true.
  bool composes_with_fedbuff = true;
};

// The arguments of AggregationRule::ServerStep over a run of n coordinates. Pointers are to
// n floats each, at the same coordinate offset; none of the outputs overlap an input.
struct ServerStepSpan {
  // Most optimiser-state slots a rule may declare.
  static constexpr int kMaxStateSlots = 4;
  const float* sum = nullptr;     // running sum_k w_k d_k
  const float* global = nullptr;  // the round's global model
  float* out = nullptr;           // the new global model
  // State slot s (StateSlots() order) before the step, and where its new value goes.
  const float* state[kMaxStateSlots] = {};
  float* state_out[kMaxStateSlots] = {};
};

// What a server step may read besides the values.
struct ServerStepContext {
  const v1::AggregationConfig* config = nullptr;  // in effect (defaults filled in)
  double total_weight = 0.0;                      // W = sum of the updates' weights, > 0
  int64_t steps = 0;                              // server steps taken before this one
};

// The round's buffered updates, for a non-linear rule's Aggregate. Each update is the client's
// delta already scaled by its clip factor and FedBuff staleness weight, flattened in the
// model's layout order (ModelLayout offsets).
struct BufferedUpdates {
  const v1::AggregationConfig* config = nullptr;  // in effect (defaults filled in)
  std::vector<const float*> updates;              // K >= 1 updates of n floats each
  std::vector<int64_t> num_examples;              // their example counts, each > 0
  int64_t n = 0;                                  // values per update
};

// Runs fn(begin, end) once per slice [begin, end) of the flat coordinate range [0, n), possibly
// on several threads at once; true iff every call returned true. Coordinate-wise rules use it to
// split their work as the Aggregator splits its folds (AggregationConfig.fold_threads).
using ForEachSliceFn = absl::FunctionRef<bool(absl::FunctionRef<bool(int64_t, int64_t)>)>;

// One aggregation rule. Stateless itself (the Aggregator holds the optimiser state): const
// methods may be called concurrently, ServerStep in particular from the fold threads.
class AggregationRule {
 public:
  AggregationRule() = default;
  AggregationRule(const AggregationRule&) = delete;
  AggregationRule& operator=(const AggregationRule&) = delete;
  virtual ~AggregationRule() = default;

  virtual AggregationRuleProperties properties() const = 0;

  // Fills the rule's own defaults into `config` fields that are zero or unset (e.g. Flower's
  // server learning rate per strategy), before the Aggregator's common defaults
  // (EffectiveAggregationConfig). Default: nothing.
  virtual void ApplyDefaults(v1::AggregationConfig& config) const;

  // Stateful rules: the names of their optimiser-state slots (at most
  // ServerStepSpan::kMaxStateSlots), each one float per model coordinate, zero at the start,
  // persisted as tensors "SLOT/TENSOR" (Aggregator::SaveState). Default: none.
  virtual std::vector<std::string> StateSlots() const;

  // Checks restored values of state slot `slot` (n floats, all finite). Returns
  // INVALID_ARGUMENT with a message completing "tensor 'SLOT/NAME' ..." when they cannot be the
  // rule's state. Default: OK.
  [[nodiscard]] virtual absl::Status CheckState(int slot, const float* values, int64_t n) const;

  // Linear rules: writes the new model, and each state slot's new value, for n coordinates.
  // Called once per tensor and fold slice, possibly concurrently for disjoint coordinates, with
  // the same arguments on every call but the pointers. Returns true iff every value written is
  // finite (false makes the Aggregator fail the round's step with OUT_OF_RANGE and keep the old
  // state). Default (non-linear rules): false.
  virtual bool ServerStep(const ServerStepContext& context, const ServerStepSpan& span,
                          int64_t n) const;

  // Non-linear rules: writes the aggregated delta D (round.n floats) to `delta`. May split the
  // work with `for_each_slice`. Errors: whatever the rule documents; the Aggregator returns them
  // from Finalize with nothing changed. Default (linear rules): INTERNAL.
  [[nodiscard]] virtual absl::Status Aggregate(const BufferedUpdates& round,
                                               ForEachSliceFn for_each_slice, float* delta) const;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_H_
