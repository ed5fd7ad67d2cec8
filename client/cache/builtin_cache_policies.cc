#include "client/cache/builtin_cache_policies.h"

namespace fedsched {

std::vector<std::shared_ptr<const CachePolicy>> BuiltinCachePolicies() {
  return {MakeImportanceCachePolicy(), MakeLruCachePolicy(), MakeLfuCachePolicy(),
          MakeNoCachePolicy()};
}

}  // namespace fedsched
