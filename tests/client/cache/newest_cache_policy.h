// A toy cache policy, registered only in tests through the public path (RegisterCachePolicy):
// "newest" keeps the samples the device stored last (the highest ids), as a device whose newest
// data matters most might. The worked example of docs/guides/EXTENDING.md "Adding a cache policy".
#ifndef FEDSCHED_TESTS_CLIENT_CACHE_NEWEST_CACHE_POLICY_H_
#define FEDSCHED_TESTS_CLIENT_CACHE_NEWEST_CACHE_POLICY_H_

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "client/cache/cache_policy.h"

namespace fedsched::testing {

// Evicts the lowest id first and admits a miss only over a lower id, so a full cache holds the
// highest ids read so far. Uniform draws, no prefetch, keys independent of importance: the
// interface's defaults.
class NewestCachePolicy : public CachePolicy {
 public:
  std::string_view name() const override { return "newest"; }
  EvictionKey Key(const CacheSampleInfo& sample) const override {
    return EvictionKey{static_cast<double>(sample.id), 0, 0};
  }
  bool Admits(const CacheSampleInfo& candidate, const EvictionKey& lowest) const override {
    return static_cast<double>(candidate.id) > lowest.a;
  }
};

// Registers "newest" once per process (test binaries may call it from several tests).
inline absl::Status RegisterNewestCachePolicy() {
  static const absl::Status status = RegisterCachePolicy(std::make_shared<NewestCachePolicy>());
  return status;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_CLIENT_CACHE_NEWEST_CACHE_POLICY_H_
