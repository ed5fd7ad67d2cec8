// The cache policies built into fedsched (docs/ALGORITHMS.md §4), one class per file; the
// registry (cache_policy.cc) registers them before its first lookup. A new built-in policy is one
// file plus one line in BuiltinCachePolicies (builtin_cache_policies.cc); a policy outside the
// library registers itself with RegisterCachePolicy instead.
#ifndef FEDSCHED_CLIENT_CACHE_BUILTIN_CACHE_POLICIES_H_
#define FEDSCHED_CLIENT_CACHE_BUILTIN_CACHE_POLICIES_H_

#include <memory>
#include <vector>

#include "client/cache/cache_policy.h"

namespace fedsched {

// "importance" (CACHE_POLICY_IMPORTANCE; importance_cache_policy.cc).
std::shared_ptr<const CachePolicy> MakeImportanceCachePolicy();
// "lru" (CACHE_POLICY_LRU; lru_cache_policy.cc).
std::shared_ptr<const CachePolicy> MakeLruCachePolicy();
// "lfu" (CACHE_POLICY_LFU; lfu_cache_policy.cc).
std::shared_ptr<const CachePolicy> MakeLfuCachePolicy();
// "none" (CACHE_POLICY_NONE; no_cache_policy.cc).
std::shared_ptr<const CachePolicy> MakeNoCachePolicy();

// All of the above.
std::vector<std::shared_ptr<const CachePolicy>> BuiltinCachePolicies();

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_BUILTIN_CACHE_POLICIES_H_
