#include "server/aggregation/aggregation_rule_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "server/aggregation/rules/builtin_rules.h"

namespace fedsched {
namespace {

struct Builtin {
  v1::AggregationRule rule;
  const char* name;
  std::unique_ptr<AggregationRule> (*factory)();
};

// config.proto's AggregationRule values and the rule each names.
constexpr Builtin kBuiltins[] = {
    {v1::AGGREGATION_RULE_FEDAVG, "fedavg", &aggregation_rules::NewFedAvg},
    {v1::AGGREGATION_RULE_FEDAVGM, "fedavgm", &aggregation_rules::NewFedAvgM},
    {v1::AGGREGATION_RULE_FEDADAM, "fedadam", &aggregation_rules::NewFedAdam},
    {v1::AGGREGATION_RULE_FEDYOGI, "fedyogi", &aggregation_rules::NewFedYogi},
    {v1::AGGREGATION_RULE_FEDADAGRAD, "fedadagrad", &aggregation_rules::NewFedAdagrad},
    {v1::AGGREGATION_RULE_TRIMMED_MEAN, "trimmed_mean", &aggregation_rules::NewTrimmedMean},
    {v1::AGGREGATION_RULE_MEDIAN, "median", &aggregation_rules::NewMedian},
    {v1::AGGREGATION_RULE_KRUM, "krum", &aggregation_rules::NewKrum},
    {v1::AGGREGATION_RULE_MULTI_KRUM, "multi_krum", &aggregation_rules::NewMultiKrum},
};

class Registry {
 public:
  Registry() {
    for (const Builtin& b : kBuiltins) factories_.emplace(b.name, b.factory);
  }

  absl::Status Register(absl::string_view name, AggregationRuleFactory factory) {
    absl::MutexLock lock(&mu_);
    if (!factories_.emplace(std::string(name), std::move(factory)).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("aggregation rule '", name, "' is already registered"));
    }
    return absl::OkStatus();
  }

  // The factory registered as `name`, or null.
  AggregationRuleFactory Find(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = factories_.find(std::string(name));
    return it == factories_.end() ? nullptr : it->second;
  }

  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, factory] : factories_) names.push_back(name);
    return names;  // std::map: sorted
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, AggregationRuleFactory> factories_ ABSL_GUARDED_BY(mu_);
};

Registry& TheRegistry() {
  static Registry* const registry = new Registry();  // never destroyed: used by static registrars
  return *registry;
}

bool WellFormedName(absl::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

const char* BuiltinName(v1::AggregationRule rule) {
  for (const Builtin& b : kBuiltins) {
    if (b.rule == rule) return b.name;
  }
  return nullptr;
}

}  // namespace

absl::Status RegisterAggregationRule(absl::string_view name, AggregationRuleFactory factory) {
  if (!WellFormedName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("aggregation rule name '", name,
                                                   "' must be lower-case letters, digits and '_'"));
  }
  if (factory == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation rule '", name, "' registered without a factory"));
  }
  return TheRegistry().Register(name, std::move(factory));
}

AggregationRuleRegistrar::AggregationRuleRegistrar(absl::string_view name,
                                                   AggregationRuleFactory factory) {
  if (absl::Status s = RegisterAggregationRule(name, std::move(factory)); !s.ok()) {
    std::fprintf(stderr, "fedsched: %s\n", s.ToString().c_str());
    std::abort();
  }
}

std::vector<std::string> RegisteredAggregationRuleNames() { return TheRegistry().Names(); }

absl::StatusOr<std::string> ResolveAggregationRuleName(const v1::AggregationConfig& config) {
  if (!v1::AggregationRule_IsValid(config.rule())) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.rule: unknown value ", static_cast<int>(config.rule())));
  }
  const char* by_enum = BuiltinName(config.rule());
  if (config.rule_name().empty()) return std::string(by_enum != nullptr ? by_enum : "fedavg");
  if (by_enum != nullptr && config.rule_name() != by_enum) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.rule ", v1::AggregationRule_Name(config.rule()),
                     " and aggregation.rule_name '", config.rule_name(),
                     "' name different rules: set one of them"));
  }
  if (TheRegistry().Find(config.rule_name()) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregation.rule_name '", config.rule_name(),
                     "' is not a registered aggregation rule; registered: ",
                     absl::StrJoin(RegisteredAggregationRuleNames(), ", ")));
  }
  return config.rule_name();
}

absl::StatusOr<std::unique_ptr<AggregationRule>> CreateAggregationRule(
    const v1::AggregationConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(std::string name, ResolveAggregationRuleName(config));
  const AggregationRuleFactory factory = TheRegistry().Find(name);
  std::unique_ptr<AggregationRule> rule = factory();
  if (rule == nullptr) {
    return absl::InternalError(absl::StrCat("aggregation rule '", name, "': factory gave null"));
  }
  // What the Aggregator can run: a running sum or every update, and only a sum composes with
  // DP, secure aggregation and relays' partial sums.
  const AggregationRuleProperties p = rule->properties();
  const bool consistent =
      p.linear != p.needs_all_updates && p.stateful == !rule->StateSlots().empty() &&
      rule->StateSlots().size() <= static_cast<size_t>(ServerStepSpan::kMaxStateSlots) &&
      (p.linear || !(p.composes_with_dp || p.composes_with_secure_aggregation ||
                     p.composes_with_hierarchy || p.stateful));
  if (!consistent) {
    return absl::InternalError(absl::StrCat(
        "aggregation rule '", name, "' declares inconsistent properties: exactly one of linear ",
        "and needs_all_updates; stateful iff it has state slots (at most ",
        ServerStepSpan::kMaxStateSlots, "); a rule that needs all updates neither keeps state ",
        "nor composes with DP, secure aggregation or hierarchy"));
  }
  return rule;
}

absl::StatusOr<AggregationRuleProperties> AggregationRulePropertiesOf(
    const v1::AggregationConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<AggregationRule> rule, CreateAggregationRule(config));
  return rule->properties();
}

std::string AggregationRuleDisplayName(const v1::AggregationConfig& config) {
  v1::AggregationRule rule = config.rule();
  if (rule == v1::AGGREGATION_RULE_UNSPECIFIED && !config.rule_name().empty()) {
    rule = BuiltinAggregationRule(config.rule_name());
    if (rule == v1::AGGREGATION_RULE_UNSPECIFIED) return config.rule_name();
  }
  return v1::AggregationRule_Name(
      rule == v1::AGGREGATION_RULE_UNSPECIFIED ? v1::AGGREGATION_RULE_FEDAVG : rule);
}

v1::AggregationRule BuiltinAggregationRule(absl::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (name == b.name) return b.rule;
  }
  return v1::AGGREGATION_RULE_UNSPECIFIED;
}

}  // namespace fedsched
