// The cache policy of the on-device sample cache: which samples stay in RAM, which sample a miss
// may evict, how a round's training ids are drawn, whether the cache warms itself while idle
// (FedCaSe, Khan et al., SoCC 2024, building on SHADE, Khan et al., FAST 2023; docs/ALGORITHMS.md
// §4). One class per policy behind this interface, with a registry by name: the SDK's SampleCache,
// the server's planner (cache plans) and the simulator (its training and its modelled learner)
// all build the policy through MakeCachePolicy, and ask it instead of branching on the config
// enum.
//
// Built in ("importance", "lru", "lfu", "none"; docs/ALGORITHMS.md §4). Adding one
// (docs/guides/EXTENDING.md "Adding a cache policy"):
//
//   class NewestPolicy : public CachePolicy {
//    public:
//     std::string_view name() const override { return "newest"; }
//     EvictionKey Key(const CacheSampleInfo& s) const override { return {double(s.id), 0, 0}; }
//   };
//   FEDSCHED_RETURN_IF_ERROR(RegisterCachePolicy(std::make_shared<NewestPolicy>()));
//   // then, in a config: server { cache { policy_name: "newest" } }
//
// A policy object is immutable and stateless (all per-sample state is the cache's: importances,
// frequencies, ticks), so one registered instance is shared by every cache; its methods are const
// and must be safe to call from several threads at once.
#ifndef FEDSCHED_CLIENT_CACHE_CACHE_POLICY_H_
#define FEDSCHED_CLIENT_CACHE_CACHE_POLICY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cache/eviction_key.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched {

// What a policy sees of one sample when it keys or admits it. Per-sample values stay on the
// device (they are never reported).
struct CacheSampleInfo {
  // Sample id in [0, N); ids follow the order the device stored its samples in.
  int64_t id = 0;
  // The cache's read counter at the sample's last use (the read being served, for a miss).
  int64_t last_tick = 0;
  // Its importance (ImportanceModel::Importance; unseen samples: the unseen importance).
  double importance = 0;
  // Its reads over the cache's lifetime.
  int64_t frequency = 0;
};

// How a round's training ids are drawn (RoundSampler, docs/ALGORITHMS.md §4.5).
enum class CacheDraw {
  // Uniformly without replacement: a shuffled data loader.
  kUniform,
  // With replacement, p ~ importance + ls, a drawn cache hit replicated r times (FedCaSe).
  kImportance,
};

// One cache policy. Every property has the default of a plain cache (uniform draws, every miss
// admitted, no prefetch); a policy overrides what it changes.
class CachePolicy {
 public:
  virtual ~CachePolicy() = default;

  // The registered name: non-empty, lower-case letters, digits and '_'. What configs name
  // (CacheConfig.policy_name) and what outputs print.
  virtual std::string_view name() const = 0;

  // The config enum value this policy answers to (CacheConfig.policy); UNSPECIFIED for a policy
  // selectable by name only (any policy added outside config.proto).
  virtual v1::CachePolicy enum_value() const { return v1::CACHE_POLICY_UNSPECIFIED; }

  // Whether samples are kept in RAM at all. false: every read goes to storage, the planner's
  // plan carries no capacity and a replication factor of 1.
  virtual bool caches() const { return true; }

  // How PlanRound draws the round's ids.
  virtual CacheDraw draw() const { return CacheDraw::kUniform; }

  // Whether the cache loads the highest-ranked samples (by importance, then frequency) while
  // idle when a plan says the device is expected next round (SampleCache::Warm); such a policy
  // should admit by that rank too.
  virtual bool prefetches() const { return false; }

  // Whether Key depends on the importance: the cache then re-keys an entry when a reported loss
  // changes its importance.
  virtual bool keys_follow_importance() const { return false; }

  // The eviction key of a cached sample; the smallest key is evicted first. Called on every
  // admission and every hit.
  virtual EvictionKey Key(const CacheSampleInfo& sample) const = 0;

  // Admission: whether the missed `candidate` may evict the cached entry keyed `lowest` (the
  // current victim) to make room. Default: always.
  virtual bool Admits(const CacheSampleInfo& candidate, const EvictionKey& lowest) const;

  // The simulator's no-train model (sim/engine/modelled_learner.h): the share of a round's
  // draws that hit when `cached_fraction` (in [0, 1]) of the client's samples are cached and a
  // planned hit is used up to `replication` (>= 0; 0 = adaptive) times. Default: uniform draws
  // hit the cached fraction.
  virtual double ModelledHitShare(double cached_fraction, int32_t replication) const;
};

// The policy a config names when it names none: "importance" (CACHE_POLICY_UNSPECIFIED).
inline constexpr std::string_view kDefaultCachePolicy = "importance";

// Registers `policy` under policy->name() for every later MakeCachePolicy in the process (the
// built-in policies are registered before the first lookup). Thread-safe.
// Errors: INVALID_ARGUMENT for a null policy or a malformed name; ALREADY_EXISTS when the name,
// or a non-UNSPECIFIED enum_value, is taken.
[[nodiscard]] absl::Status RegisterCachePolicy(std::shared_ptr<const CachePolicy> policy);

// The registered names, sorted.
std::vector<std::string> RegisteredCachePolicyNames();

// The policy registered as `name`, or, when `name` is empty, the one answering to `value`
// (UNSPECIFIED: kDefaultCachePolicy). Cheap (a map lookup): call it per plan if need be.
// Errors: INVALID_ARGUMENT naming the unknown name or value and listing the registered names.
[[nodiscard]] absl::StatusOr<std::shared_ptr<const CachePolicy>> MakeCachePolicy(
    std::string_view name, v1::CachePolicy value = v1::CACHE_POLICY_UNSPECIFIED);

// The policy of a cache config: MakeCachePolicy(config.policy_name(), config.policy()).
[[nodiscard]] absl::StatusOr<std::shared_ptr<const CachePolicy>> MakeCachePolicy(
    const v1::CacheConfig& config);

// The name of the policy `config` selects (its policy_name when set, else the name of the policy
// answering to its enum value); for outputs, so "?" when nothing is registered for it.
std::string CachePolicyNameOf(const v1::CacheConfig& config);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_CACHE_POLICY_H_
