// A selection policy as the rest of fedsched sees it: its registered name, the properties the
// planner, the round config and the tools ask it instead of switching on an enum, its preset and
// config, and a factory for the SelectionPolicy (policy.h) that selects one planner's rounds.
// One subclass per policy, in the policy's own file: RandomPolicyKind (random_policy.h),
// OortPolicyKind (oort_policy.h), FedCasePolicyKind (fedcase_policy.h), PyramidFlPolicyKind
// (pyramidfl_policy.h) and FedschedPolicyKind (fedsched_policy.h). They are registered by name in
// policy_registry.h, where a program or a test registers its own (docs/guides/EXTENDING.md "Adding
// a selection policy").
#ifndef FEDSCHED_SERVER_PLANNER_POLICY_KIND_H_
#define FEDSCHED_SERVER_PLANNER_POLICY_KIND_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy.h"

namespace fedsched::planner {

class ExperienceTracker;
class OortPacer;

// What SelectionPolicyKind::Create gets: the planner's validated options (the policy's own
// config is options.policy_config) and the learned state the planner owns. Pointers are not
// owned and outlive the policy; Oort records its preferred duration in `pacer`, FedCaSe folds
// candidates into `experience`, others may only read them.
struct PolicyResources {
  const PlannerOptions& options;
  OortPacer* pacer;
  ExperienceTracker* experience;
};

// Defaults the policy gives the planner's workload options when the config leaves them zero
// (config.proto WorkloadExtensionConfig). All zero: the planner's own defaults (off).
struct WorkloadDefaults {
  double extend_beta = 0;   // selection.extend_workload.beta, in [0, 1]
  double dropout_low = 0;   // selection.extend_workload.dropout_low, in [0, dropout_high]
  double dropout_high = 0;  // selection.extend_workload.dropout_high, in [0, 1)
};

// One selection policy's definition. Implementations are immutable after registration and
// thread-safe (const methods only).
class SelectionPolicyKind {
 public:
  virtual ~SelectionPolicyKind() = default;

  // The registry key: lower case, no spaces, unique (e.g. "oort"). What --policy and
  // selection.policy_name name.
  virtual absl::string_view name() const = 0;

  // The config.proto SelectionPolicy value of a built-in policy, written into the round record
  // (SelectionReason.policy) and the planner state; SELECTION_POLICY_UNSPECIFIED (the default)
  // for a policy without one, which is configured by selection.policy_name only.
  virtual v1::SelectionPolicy record_value() const { return v1::SELECTION_POLICY_UNSPECIFIED; }

  // Full name of the message selection.policy_config may hold for this policy (e.g.
  // "fedsched.v1.OortConfig"); empty (the default): the policy takes no config.
  virtual absl::string_view config_type() const { return ""; }

  // The cache policy the policy was measured with, which --policy sets with it in the server and
  // the simulator alike (ApplyPolicyFlag). CACHE_POLICY_UNSPECIFIED (the default): none implied;
  // the config's cache stays.
  virtual v1::CachePolicy implied_cache() const { return v1::CACHE_POLICY_UNSPECIFIED; }

  // The workload extension and update dropout the policy turns on by default.
  virtual WorkloadDefaults workload_defaults() const { return {}; }

  // True when the policy selects by FedCaSe's per-client experience, so the planner persists
  // the experiences in its state (they are learned under every policy). Default: false.
  virtual bool selects_by_experience() const { return false; }

  // True when the round record's Oort terms (score, statistical utility, speed penalty) are the
  // policy's selection scores, so fedsched-status shows them. Default: false.
  virtual bool scores_by_utility() const { return false; }

  // True when every eligible client is equally likely to be picked, as differential privacy's
  // accountant assumes (amplification by uniform sampling); privacy refuses any other policy.
  // Default: false.
  virtual bool samples_uniformly() const { return false; }

  // Expands the policy's preset into `config` in place (fedsched's levers), keeping what the
  // config names. Called by round::ResolveRoundConfig and PlannerOptions::FromServerConfig
  // after MapConfig. Default: nothing.
  virtual void ApplyPreset(v1::ServerConfig* config) const {}

  // Called when selection->policy_config is set (ResolveSelectionPolicy): checks it against
  // config_type() and moves it onto the typed field the policy reads, if it has one (OortConfig
  // onto selection.oort). Errors: INVALID_ARGUMENT when
  // the Any holds another type or does not parse, or when the typed field is also set to a
  // different value. The default checks the type and leaves the Any for Create.
  [[nodiscard]] virtual absl::Status MapConfig(v1::SelectionConfig* selection) const;

  // Creates the policy for one planner. Errors: INVALID_ARGUMENT for a config it refuses.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const = 0;
};

// Unpacks `any` into `out` when it holds a T (any's type URL ends in T's full name). Errors:
// INVALID_ARGUMENT naming `policy` when it holds another type or does not parse.
template <typename T>
[[nodiscard]] absl::Status UnpackPolicyConfig(absl::string_view policy,
                                              const google::protobuf::Any& any, T* out) {
  const std::string field =
      std::string("selection.policy_config of policy \"") + std::string(policy) + "\"";
  if (!any.Is<T>()) {
    return absl::InvalidArgumentError(
        field + " must hold a " + T::descriptor()->full_name() + ", got " +
        (any.type_url().empty() ? std::string("an empty Any (no type URL)") : any.type_url()));
  }
  if (!any.UnpackTo(out)) {
    return absl::InvalidArgumentError(field + " holds a " + T::descriptor()->full_name() +
                                      " whose contents do not parse");
  }
  return absl::OkStatus();
}

// True when `any` holds a message of full name `type` (its type URL ends in "/<type>"); false
// for an empty `type`.
bool PolicyConfigHolds(const google::protobuf::Any& any, absl::string_view type);

// For MapConfig implementations: when selection->policy_config holds a `T`, moves it onto
// `*typed` (which must be empty or equal) and clears the Any. Errors as MapConfig's, naming
// `typed_field` (e.g. "selection.oort").
template <typename T>
[[nodiscard]] absl::Status MoveAnyOnto(absl::string_view policy, absl::string_view typed_field,
                                       v1::SelectionConfig* selection, T* typed) {
  if (!selection->has_policy_config()) return absl::OkStatus();
  T from_any;
  absl::Status s = UnpackPolicyConfig(policy, selection->policy_config(), &from_any);
  if (!s.ok()) return s;
  if (typed->ByteSizeLong() > 0 && typed->SerializeAsString() != from_any.SerializeAsString()) {
    return absl::InvalidArgumentError(std::string(typed_field) +
                                      " and selection.policy_config are both set, to different "
                                      "values: set one of them");
  }
  *typed = std::move(from_any);
  selection->clear_policy_config();
  return absl::OkStatus();
}

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_POLICY_KIND_H_
