// The selection policies by name: the five built-in ones ("random", "oort", "fedcase",
// "pyramidfl", "fedsched") and any a program or a test registers with RegisterSelectionPolicy
// before it builds a config or a planner. The server and the simulator resolve a config's policy,
// apply its preset and apply the --policy flag through these same functions, so a policy behaves
// identically in both (docs/guides/EXTENDING.md "Adding a selection policy").
//
// Thread-safe: registration and lookups may run concurrently; a registered kind lives until
// the program exits, so the pointers returned stay valid.
#ifndef FEDSCHED_SERVER_PLANNER_POLICY_REGISTRY_H_
#define FEDSCHED_SERVER_PLANNER_POLICY_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy_kind.h"

namespace fedsched::planner {

// Adds `kind` under kind->name(). Errors: INVALID_ARGUMENT for a null kind or a name that is
// empty or not lower case; ALREADY_EXISTS when the name is taken (the built-in ones included).
[[nodiscard]] absl::Status RegisterSelectionPolicy(std::unique_ptr<SelectionPolicyKind> kind);

// The registered names, sorted.
std::vector<std::string> RegisteredSelectionPolicies();

// The kind registered as `name`, case-insensitive. Errors: NOT_FOUND "unknown selection policy
// \"<name>\"; registered: fedcase, fedsched, oort, pyramidfl, random[, ...]".
[[nodiscard]] absl::StatusOr<const SelectionPolicyKind*> FindSelectionPolicy(
    absl::string_view name);

// The kind a config selects: selection.policy_name if set, else selection.policy's built-in
// policy (UNSPECIFIED: random). Errors: INVALID_ARGUMENT when both are set and name different
// policies, or when the name is not registered (listing the registered names).
[[nodiscard]] absl::StatusOr<const SelectionPolicyKind*> ConfiguredSelectionPolicy(
    const v1::SelectionConfig& selection);

// The kind planner options select: options.policy_name if set, else options.policy's built-in
// policy (UNSPECIFIED: random). Errors as FindSelectionPolicy's.
[[nodiscard]] absl::StatusOr<const SelectionPolicyKind*> PlannerSelectionPolicy(
    const PlannerOptions& options);

// The registered name of the policy a config selects ("random" when it names none), or the
// name as configured when it is not registered.
std::string SelectionPolicyName(const v1::SelectionConfig& selection);

// Resolves the config's policy in place: the kind (ConfiguredSelectionPolicy), its config moved
// onto the typed fields it reads (SelectionPolicyKind::MapConfig), one spelling of the policy (a
// built-in one as selection.policy, RANDOM when nothing is named, with policy_name cleared; any
// other as selection.policy_name) and its preset applied (SelectionPolicyKind::ApplyPreset).
// Returns the kind. Idempotent. Called by round::ResolveRoundConfig and
// PlannerOptions::FromServerConfig. Errors: those of ConfiguredSelectionPolicy and MapConfig;
// `config` may then be partly changed.
[[nodiscard]] absl::StatusOr<const SelectionPolicyKind*> ResolveSelectionPolicy(
    v1::ServerConfig* config);

// The --policy flag of fedsched-server and fedsched-sim: selects the policy registered as `name`
// (case-insensitive) in `config` and sets the cache it implies
// (SelectionPolicyKind::implied_cache; the simulator's --cache_policy may override it after).
// A policy_config of another type than the policy takes is dropped. Errors: INVALID_ARGUMENT
// "--policy must be one of <registered names>, got <name>"; `config` is then unchanged.
[[nodiscard]] absl::Status ApplyPolicyFlag(const std::string& name, v1::ServerConfig* config);

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_POLICY_REGISTRY_H_
