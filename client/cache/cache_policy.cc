// The cache policy registry: a process-wide map from name to the one shared instance.
#include "client/cache/cache_policy.h"

#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/cache/builtin_cache_policies.h"

namespace fedsched {
namespace {

class Registry {
 public:
  // The built-ins go in before anyone can look up or register, so that a test registering a
  // name of its own cannot shadow one of them.
  Registry() {
    for (std::shared_ptr<const CachePolicy>& p : BuiltinCachePolicies()) {
      by_name_.emplace(std::string(p->name()), std::move(p));
    }
  }

  absl::Status Add(std::shared_ptr<const CachePolicy> policy) {
    absl::MutexLock lock(&mu_);
    const std::string name(policy->name());
    if (by_name_.count(name) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("cache policy \"", name, "\" is already registered"));
    }
    if (policy->enum_value() != v1::CACHE_POLICY_UNSPECIFIED &&
        FindByEnumLocked(policy->enum_value()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("cache policy \"", name, "\": ", v1::CachePolicy_Name(policy->enum_value()),
                       " already answers to another policy"));
    }
    by_name_.emplace(name, std::move(policy));
    return absl::OkStatus();
  }

  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    return NamesLocked();
  }

  absl::StatusOr<std::shared_ptr<const CachePolicy>> Find(std::string_view name,
                                                          v1::CachePolicy value) const {
    absl::MutexLock lock(&mu_);
    if (name.empty()) {
      if (value == v1::CACHE_POLICY_UNSPECIFIED)
        name = kDefaultCachePolicy;
      else if (std::shared_ptr<const CachePolicy> p = FindByEnumLocked(value))
        return p;
      else {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown cache policy value ", static_cast<int>(value),
                         "; registered policies: ", absl::StrJoin(NamesLocked(), ", ")));
      }
    }
    auto it = by_name_.find(std::string(name));
    if (it == by_name_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown cache policy \"", std::string(name),
                       "\"; registered policies: ", absl::StrJoin(NamesLocked(), ", ")));
    }
    return it->second;
  }

 private:
  std::vector<std::string> NamesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> names;
    for (const auto& [name, policy] : by_name_) names.push_back(name);
    return names;
  }

  std::shared_ptr<const CachePolicy> FindByEnumLocked(v1::CachePolicy value) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [name, policy] : by_name_) {
      if (policy->enum_value() == value) return policy;
    }
    return nullptr;
  }

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const CachePolicy>> by_name_ ABSL_GUARDED_BY(mu_);
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();  // never destroyed: used until exit
  return *registry;
}

bool IsPolicyName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

bool CachePolicy::Admits(const CacheSampleInfo& /*candidate*/,
                         const EvictionKey& /*lowest*/) const {
  return true;
}

double CachePolicy::ModelledHitShare(double cached_fraction, int32_t /*replication*/) const {
  // Written as the replicated share with r = 1, so that it rounds exactly as the importance
  // policy's formula does at r = 1.
  const double f = cached_fraction;
  const double r = 1;
  return f * r / (f * r + (1 - f));
}

absl::Status RegisterCachePolicy(std::shared_ptr<const CachePolicy> policy) {
  if (policy == nullptr) return absl::InvalidArgumentError("RegisterCachePolicy: null policy");
  if (!IsPolicyName(policy->name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache policy name \"", std::string(policy->name()),
                     "\" must be non-empty lower-case letters, digits and '_'"));
  }
  return TheRegistry().Add(std::move(policy));
}

std::vector<std::string> RegisteredCachePolicyNames() { return TheRegistry().Names(); }

absl::StatusOr<std::shared_ptr<const CachePolicy>> MakeCachePolicy(std::string_view name,
                                                                   v1::CachePolicy value) {
  return TheRegistry().Find(name, value);
}

absl::StatusOr<std::shared_ptr<const CachePolicy>> MakeCachePolicy(const v1::CacheConfig& config) {
  return MakeCachePolicy(config.policy_name(), config.policy());
}

std::string CachePolicyNameOf(const v1::CacheConfig& config) {
  absl::StatusOr<std::shared_ptr<const CachePolicy>> policy = MakeCachePolicy(config);
  return policy.ok() ? std::string((*policy)->name()) : "?";
}

}  // namespace fedsched
