// The aggregation block of a config: range checks and Flower's defaults (docs/ALGORITHMS.md §5).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregation_rule_registry.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/stale_updates.h"

namespace fedsched {
namespace {

// Default fold threads: the hardware threads, at most this many.
constexpr int kDefaultMaxFoldThreads = 4;

absl::Status CheckUnit(const char* field, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.", field, " must be in [0, 1), got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const char* field, double value) {
  if (!(value >= 0.0) || std::isinf(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.", field, " must be finite and >= 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::AggregationConfig> EffectiveAggregationConfig(
    const v1::AggregationConfig& config) {
  v1::AggregationConfig c = config;
  FEDSCHED_ASSIGN_OR_RETURN(const std::string name, ResolveAggregationRuleName(c));
  FEDSCHED_ASSIGN_OR_RETURN(const std::unique_ptr<AggregationRule> rule, CreateAggregationRule(c));
  // A built-in is named by its enum value (so effective configs read as before), any other rule
  // by rule_name.
  c.set_rule(BuiltinAggregationRule(name));
  if (c.rule() != v1::AGGREGATION_RULE_UNSPECIFIED) {
    c.clear_rule_name();
  } else {
    c.set_rule_name(name);
  }
  FEDSCHED_RETURN_IF_ERROR(CheckNonNegative("server_learning_rate", c.server_learning_rate()));
  FEDSCHED_RETURN_IF_ERROR(CheckUnit("beta1", c.beta1()));
  FEDSCHED_RETURN_IF_ERROR(CheckUnit("beta2", c.beta2()));
  FEDSCHED_RETURN_IF_ERROR(CheckNonNegative("tau", c.tau()));
  FEDSCHED_RETURN_IF_ERROR(CheckUnit("server_momentum", c.server_momentum()));
  if (!(c.trim_beta() >= 0.0 && c.trim_beta() < 0.5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.trim_beta must be in [0, 0.5), got ", c.trim_beta()));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckNonNegative("clip_update_norm", c.clip_update_norm()));
  if (c.krum_byzantine() < 0) {
    return absl::InvalidArgumentError("aggregation.krum_byzantine must be >= 0");
  }
  if (c.multi_krum_m() < 0) {
    return absl::InvalidArgumentError("aggregation.multi_krum_m must be >= 0");
  }
  if (c.max_buffered_updates() < 0) {
    return absl::InvalidArgumentError("aggregation.max_buffered_updates must be >= 0");
  }
  if (c.max_staleness() < 0) {
    return absl::InvalidArgumentError(
        "aggregation.max_staleness must be >= 1 (0 is unset and means the default, 10)");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckStaleUpdatesConfig(c.stale_updates()));
  if (c.fold_threads() < 0 || c.fold_threads() > kMaxFoldThreads) {
    return absl::InvalidArgumentError(absl::StrCat("aggregation.fold_threads must be in [0, ",
                                                   kMaxFoldThreads, "], got ", c.fold_threads()));
  }

  // The rule's own defaults (Flower's, docs/ALGORITHMS.md §5), then those common to all rules.
  rule->ApplyDefaults(c);
  if (c.server_learning_rate() == 0.0) c.set_server_learning_rate(1.0);
  // Fields with presence take their default only when unset: an explicit 0 is a value.
  if (!c.has_beta1()) c.set_beta1(0.9);
  if (!c.has_beta2()) c.set_beta2(0.99);
  if (c.tau() == 0.0) c.set_tau(1e-9);
  if (!c.has_server_momentum()) c.set_server_momentum(0.9);
  if (!c.has_trim_beta()) c.set_trim_beta(0.2);
  if (!c.has_krum_byzantine()) c.set_krum_byzantine(1);
  if (c.max_buffered_updates() == 0) c.set_max_buffered_updates(1000);
  if (c.max_staleness() == 0) c.set_max_staleness(10);
  if (c.stale_updates().enable()) ApplyStaleUpdatesDefaults(*c.mutable_stale_updates());
  if (c.fold_threads() == 0) {
    const int hardware = static_cast<int>(std::thread::hardware_concurrency());
    c.set_fold_threads(std::clamp(hardware, 1, kDefaultMaxFoldThreads));
  }
  return c;
}

}  // namespace fedsched
