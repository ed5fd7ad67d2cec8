// "none": nothing is cached, every read goes to storage; uniform draws (docs/ALGORITHMS.md §4).
#include "client/cache/builtin_cache_policies.h"

namespace fedsched {
namespace {

class NoCachePolicy : public CachePolicy {
 public:
  std::string_view name() const override { return "none"; }
  v1::CachePolicy enum_value() const override { return v1::CACHE_POLICY_NONE; }
  bool caches() const override { return false; }
  // Never asked: nothing is admitted.
  EvictionKey Key(const CacheSampleInfo& /*sample*/) const override { return EvictionKey{}; }
  double ModelledHitShare(double /*cached_fraction*/, int32_t /*replication*/) const override {
    return 0;
  }
};

}  // namespace

std::shared_ptr<const CachePolicy> MakeNoCachePolicy() { return std::make_shared<NoCachePolicy>(); }

}  // namespace fedsched
