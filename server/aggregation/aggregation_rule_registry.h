// The registry of aggregation rules by name (docs/guides/EXTENDING.md "Adding an aggregation
// rule"). The built-in rules are registered on first use under the names of config.proto's
// AggregationRule values ("fedavg", "fedavgm", "fedadam", "fedyogi", "fedadagrad",
// "trimmed_mean", "median", "krum", "multi_krum"); a program (or a test) adds its own with
// RegisterAggregationRule or a static AggregationRuleRegistrar, and a config names it in
// AggregationConfig.rule_name. All functions are thread-safe.
#ifndef FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_REGISTRY_H_
#define FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"
#include "server/aggregation/aggregation_rule.h"

namespace fedsched {

// Makes a new instance of one rule. Must not return null.
using AggregationRuleFactory = std::function<std::unique_ptr<AggregationRule>()>;

// Registers `factory` under `name` (lower case letters, digits and '_', not empty).
// Errors: INVALID_ARGUMENT for a malformed name or a null factory; ALREADY_EXISTS if the name is
// taken (built-in names included).
[[nodiscard]] absl::Status RegisterAggregationRule(absl::string_view name,
                                                   AggregationRuleFactory factory);

// Registers a rule at static initialisation, from the translation unit that defines it:
//   const AggregationRuleRegistrar kRegistrar("my_rule", [] { return std::make_unique<My>(); });
// Aborts the program with the error if the registration fails (a duplicate name is a bug).
// Only for code linked as object files (tests, binaries): a static library's unreferenced
// object file, and its registrar, is dropped by the linker.
class AggregationRuleRegistrar {
 public:
  AggregationRuleRegistrar(absl::string_view name, AggregationRuleFactory factory);
};

// The registered names, sorted.
std::vector<std::string> RegisteredAggregationRuleNames();

// The name of the rule `config` selects: rule_name if set, else the built-in name of `rule`
// (UNSPECIFIED: "fedavg"). Errors: INVALID_ARGUMENT if `rule` is not a known enum value, if
// `rule` and rule_name are both set and name different rules, or if rule_name is not registered
// (the message lists the registered names).
[[nodiscard]] absl::StatusOr<std::string> ResolveAggregationRuleName(
    const v1::AggregationConfig& config);

// A new instance of the rule `config` selects. Errors: as ResolveAggregationRuleName.
[[nodiscard]] absl::StatusOr<std::unique_ptr<AggregationRule>> CreateAggregationRule(
    const v1::AggregationConfig& config);

// The properties of the rule `config` selects. Errors: as ResolveAggregationRuleName.
[[nodiscard]] absl::StatusOr<AggregationRuleProperties> AggregationRulePropertiesOf(
    const v1::AggregationConfig& config);

// How messages name the rule `config` selects: a built-in by its enum name (e.g.
// "AGGREGATION_RULE_MEDIAN", whether `rule` or rule_name selects it), any other by rule_name;
// nothing set: "AGGREGATION_RULE_FEDAVG".
std::string AggregationRuleDisplayName(const v1::AggregationConfig& config);

// The built-in enum value registered as `name`, or AGGREGATION_RULE_UNSPECIFIED for any other.
v1::AggregationRule BuiltinAggregationRule(absl::string_view name);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_AGGREGATION_AGGREGATION_RULE_REGISTRY_H_
