// "importance": FedCaSe's importance-aware cache (Khan et al., SoCC 2024, after SHADE, Khan et
// al., FAST 2023; docs/ALGORITHMS.md §4). Draws with p ~ importance + ls, replicates planned
// hits, keeps the highest (importance, frequency) samples, admits a miss only if it outranks the
// victim, and warms itself while idle.
#include <algorithm>

#include "client/cache/builtin_cache_policies.h"

namespace fedsched {
namespace {

class ImportanceCachePolicy : public CachePolicy {
 public:
  std::string_view name() const override { return "importance"; }
  v1::CachePolicy enum_value() const override { return v1::CACHE_POLICY_IMPORTANCE; }
  CacheDraw draw() const override { return CacheDraw::kImportance; }
  bool prefetches() const override { return true; }
  bool keys_follow_importance() const override { return true; }

  // (importance, frequency, last tick): ties among equally ranked entries go to the least
  // recently used.
  EvictionKey Key(const CacheSampleInfo& s) const override {
    return EvictionKey{s.importance, static_cast<double>(s.frequency), s.last_tick};
  }

  // SHADE's admission rule: only a candidate ranking strictly higher by (importance, frequency)
  // displaces the lowest entry, so that one-off reads cannot flush the important samples.
  bool Admits(const CacheSampleInfo& candidate, const EvictionKey& lowest) const override {
    if (candidate.importance != lowest.a) return candidate.importance > lowest.a;
    return static_cast<double>(candidate.frequency) > lowest.b;
  }

  // Importance sampling concentrates draws on the cached (important) samples: modelled as 1.5x
  // the cached fraction, each drawn hit used r times.
  double ModelledHitShare(double cached_fraction, int32_t replication) const override {
    const double f = std::min(1.0, 1.5 * cached_fraction);
    const double r = std::max(1, replication);
    return f * r / (f * r + (1 - f));
  }
};

}  // namespace

std::shared_ptr<const CachePolicy> MakeImportanceCachePolicy() {
  return std::make_shared<ImportanceCachePolicy>();
}

}  // namespace fedsched
