// "lru": the least recently used sample is evicted; every miss is admitted; uniform draws (the
// baseline of FedCaSe's evaluation, "Oort + LRU"; docs/ALGORITHMS.md §4).
#include "client/cache/builtin_cache_policies.h"

namespace fedsched {
namespace {

class LruCachePolicy : public CachePolicy {
 public:
  std::string_view name() const override { return "lru"; }
  v1::CachePolicy enum_value() const override { return v1::CACHE_POLICY_LRU; }
  EvictionKey Key(const CacheSampleInfo& s) const override {
    return EvictionKey{static_cast<double>(s.last_tick), 0.0, 0};
  }
};

}  // namespace

std::shared_ptr<const CachePolicy> MakeLruCachePolicy() {
  return std::make_shared<LruCachePolicy>();
}

}  // namespace fedsched
