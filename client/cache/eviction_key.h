// The eviction order of the on-device sample cache: a key per cached sample, computed by the cache
// policy (client/cache/cache_policy.h) and ordered by CacheEntries (client/cache/cache_entries.h).
#ifndef FEDSCHED_CLIENT_CACHE_EVICTION_KEY_H_
#define FEDSCHED_CLIENT_CACHE_EVICTION_KEY_H_

#include <cstdint>

namespace fedsched {

// Eviction order key, compared lexicographically on (a, b, c); the smallest is the next victim.
// The built-in policies use (importance, frequency, last tick) under "importance", (last tick,
// 0, 0) under "lru" and (frequency, last tick, 0) under "lfu".
struct EvictionKey {
  double a = 0;
  double b = 0;
  int64_t c = 0;
  bool operator<(const EvictionKey& o) const {
    if (a != o.a) return a < o.a;
    if (b != o.b) return b < o.b;
    return c < o.c;
  }
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_EVICTION_KEY_H_
