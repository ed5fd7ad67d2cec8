// "lfu": the least frequently read sample is evicted (ties: the least recently used); every miss
// is admitted; uniform draws (a baseline; docs/ALGORITHMS.md §4).
#include "client/cache/builtin_cache_policies.h"

namespace fedsched {
namespace {

class LfuCachePolicy : public CachePolicy {
 public:
  std::string_view name() const override { return "lfu"; }
  v1::CachePolicy enum_value() const override { return v1::CACHE_POLICY_LFU; }
  EvictionKey Key(const CacheSampleInfo& s) const override {
    return EvictionKey{static_cast<double>(s.frequency), static_cast<double>(s.last_tick), 0};
  }
};

}  // namespace

std::shared_ptr<const CachePolicy> MakeLfuCachePolicy() {
  return std::make_shared<LfuCachePolicy>();
}

}  // namespace fedsched
