// The registry of device-to-job matchers by name (matcher.h).

#include "server/jobs/matcher.h"

#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace fedsched::jobs {
namespace {

bool ValidMatcherName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

class Registry {
 public:
  // The built-ins are registered here rather than by static initialisers in their own files: a
  // static library drops an object file nothing references, and its registration with it.
  Registry() {
    factories_.emplace("fifo", [](uint64_t) { return MakeFifoMatcher(); });
    factories_.emplace("random", [](uint64_t seed) { return MakeRandomMatcher(seed); });
    factories_.emplace("venn", [](uint64_t seed) { return MakeVennMatcher(seed); });
    factories_.emplace("fedsched", [](uint64_t seed) { return MakeClientAwareMatcher(seed); });
  }

  absl::Status Add(std::string name, MatcherFactory factory) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!ValidMatcherName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a matcher's name must be non-empty lower case [a-z0-9_], got \"", name, "\""));
    }
    if (!factory) {
      return absl::InvalidArgumentError(absl::StrCat("matcher \"", name, "\": null factory"));
    }
    absl::MutexLock lock(&mu_);
    if (!factories_.emplace(name, std::move(factory)).second) {
      return absl::AlreadyExistsError(absl::StrCat("matcher \"", name, "\" is already registered"));
    }
    return absl::OkStatus();
  }

  // The factory registered under `name`, copied out so that it runs without the lock.
  MatcherFactory Find(std::string_view name) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = factories_.find(name);
    return it == factories_.end() ? MatcherFactory() : it->second;
  }

  std::vector<std::string> Names() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, factory] : factories_) names.push_back(name);
    return names;
  }

 private:
  mutable absl::Mutex mu_;
  // Sorted, so that MatcherNames and error messages list the names in a stable order.
  std::map<std::string, MatcherFactory, std::less<>> factories_ ABSL_GUARDED_BY(mu_);
};

Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

absl::Status RegisterMatcher(std::string name, MatcherFactory factory) {
  return TheRegistry().Add(std::move(name), std::move(factory));
}

absl::StatusOr<std::unique_ptr<DeviceJobMatcher>> MakeMatcher(std::string_view name,
                                                              uint64_t seed) {
  if (name.empty()) name = "fifo";
  MatcherFactory factory = TheRegistry().Find(name);
  if (!factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown matcher \"", std::string(name),
                     "\"; registered: ", absl::StrJoin(MatcherNames(), ", ")));
  }
  std::unique_ptr<DeviceJobMatcher> matcher = factory(seed);
  if (matcher == nullptr) {
    return absl::InternalError(
        absl::StrCat("matcher \"", std::string(name), "\": its factory returned null"));
  }
  return matcher;
}

std::vector<std::string> MatcherNames() { return TheRegistry().Names(); }

}  // namespace fedsched::jobs
