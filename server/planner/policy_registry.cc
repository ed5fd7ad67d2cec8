#include "server/planner/policy_registry.h"

#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "server/planner/fedcase_policy.h"
#include "server/planner/fedsched_policy.h"
#include "server/planner/oort_policy.h"
#include "server/planner/pyramidfl_policy.h"
#include "server/planner/random_policy.h"

namespace fedsched::planner {
namespace {

class Registry {
 public:
  // The built-in policies are registered here rather than by static initialisers in their own
  // files: a static library drops an object file nothing references, and its registration
  // with it.
  Registry() {
    for (auto* make : {MakeRandomPolicyKind, MakeOortPolicyKind, MakeFedCasePolicyKind,
                       MakePyramidFlPolicyKind, MakeFedschedPolicyKind}) {
      std::unique_ptr<SelectionPolicyKind> kind = make();
      const std::string name(kind->name());
      kinds_.emplace(name, std::move(kind));
    }
  }

  absl::Status Add(std::unique_ptr<SelectionPolicyKind> kind) ABSL_LOCKS_EXCLUDED(mu_) {
    if (kind == nullptr) return absl::InvalidArgumentError("null selection policy");
    const std::string name(kind->name());
    if (name.empty() || name != absl::AsciiStrToLower(name) ||
        name.find_first_of(" \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a selection policy's name must be non-empty lower case without spaces, got \"", name,
          "\""));
    }
    absl::MutexLock lock(&mu_);
    if (!kinds_.emplace(name, std::move(kind)).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("selection policy \"", name, "\" is already registered"));
    }
    return absl::OkStatus();
  }

  const SelectionPolicyKind* Find(absl::string_view name) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = kinds_.find(absl::AsciiStrToLower(name));
    return it == kinds_.end() ? nullptr : it->second.get();
  }

  const SelectionPolicyKind* ForRecordValue(v1::SelectionPolicy value) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, kind] : kinds_) {
      if (kind->record_value() == value) return kind.get();
    }
    return nullptr;
  }

  std::vector<std::string> Names() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, kind] : kinds_) names.push_back(name);
    return names;
  }

 private:
  mutable absl::Mutex mu_;
  // Sorted, so that error messages list the names in a stable order.
  std::map<std::string, std::unique_ptr<SelectionPolicyKind>> kinds_ ABSL_GUARDED_BY(mu_);
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

std::string RegisteredList() { return absl::StrJoin(RegisteredSelectionPolicies(), ", "); }

// The built-in policy `value` names; UNSPECIFIED (and values no policy records) select random.
const SelectionPolicyKind* BuiltIn(v1::SelectionPolicy value) {
  const SelectionPolicyKind* kind = TheRegistry().ForRecordValue(value);
  return kind != nullptr ? kind : TheRegistry().Find("random");
}

}  // namespace

absl::Status RegisterSelectionPolicy(std::unique_ptr<SelectionPolicyKind> kind) {
  return TheRegistry().Add(std::move(kind));
}

std::vector<std::string> RegisteredSelectionPolicies() { return TheRegistry().Names(); }

absl::StatusOr<const SelectionPolicyKind*> FindSelectionPolicy(absl::string_view name) {
  const SelectionPolicyKind* kind = TheRegistry().Find(name);
  if (kind == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown selection policy \"", name, "\"; registered: ", RegisteredList()));
  }
  return kind;
}

absl::StatusOr<const SelectionPolicyKind*> ConfiguredSelectionPolicy(
    const v1::SelectionConfig& selection) {
  if (selection.policy_name().empty()) return BuiltIn(selection.policy());
  const SelectionPolicyKind* kind = TheRegistry().Find(selection.policy_name());
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("selection.policy_name \"",
                                                   selection.policy_name(),
                                                   "\" is not a registered selection policy; "
                                                   "registered: ",
                                                   RegisteredList()));
  }
  if (selection.policy() != v1::SELECTION_POLICY_UNSPECIFIED &&
      kind->record_value() != selection.policy()) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection.policy ", v1::SelectionPolicy_Name(selection.policy()),
                     " and selection.policy_name \"", selection.policy_name(),
                     "\" name different policies: set one of them"));
  }
  return kind;
}

absl::StatusOr<const SelectionPolicyKind*> PlannerSelectionPolicy(const PlannerOptions& options) {
  if (options.policy_name.empty()) return BuiltIn(options.policy);
  return FindSelectionPolicy(options.policy_name);
}

std::string SelectionPolicyName(const v1::SelectionConfig& selection) {
  absl::StatusOr<const SelectionPolicyKind*> kind = ConfiguredSelectionPolicy(selection);
  return kind.ok() ? std::string((*kind)->name()) : selection.policy_name();
}

absl::StatusOr<const SelectionPolicyKind*> ResolveSelectionPolicy(v1::ServerConfig* config) {
  v1::SelectionConfig* selection = config->mutable_selection();
  FEDSCHED_ASSIGN_OR_RETURN(const SelectionPolicyKind* kind, ConfiguredSelectionPolicy(*selection));
  if (selection->has_policy_config()) FEDSCHED_RETURN_IF_ERROR(kind->MapConfig(selection));
  // One spelling per policy in the resolved config: a built-in one by its enum value (as every
  // config before policy_name), any other by its name.
  if (kind->record_value() != v1::SELECTION_POLICY_UNSPECIFIED) {
    selection->set_policy(kind->record_value());
    selection->clear_policy_name();
  } else {
    selection->set_policy_name(std::string(kind->name()));
  }
  kind->ApplyPreset(config);
  return kind;
}

absl::Status ApplyPolicyFlag(const std::string& name, v1::ServerConfig* config) {
  const SelectionPolicyKind* kind = TheRegistry().Find(name);
  if (kind == nullptr || name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--policy must be one of ", RegisteredList(), ", got \"", name, "\""));
  }
  v1::SelectionConfig* selection = config->mutable_selection();
  if (kind->record_value() != v1::SELECTION_POLICY_UNSPECIFIED) {
    selection->set_policy(kind->record_value());
    selection->clear_policy_name();
  } else {
    selection->clear_policy();
    selection->set_policy_name(std::string(kind->name()));
  }
  if (selection->has_policy_config() &&
      !PolicyConfigHolds(selection->policy_config(), kind->config_type())) {
    selection->clear_policy_config();
  }
  if (kind->implied_cache() != v1::CACHE_POLICY_UNSPECIFIED) {
    config->mutable_cache()->set_policy(kind->implied_cache());
    config->mutable_cache()->clear_policy_name();  // a cache named by name would win over it
  }
  return absl::OkStatus();
}

}  // namespace fedsched::planner
