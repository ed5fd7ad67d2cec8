// The cache policy interface and its registry (client/cache/cache_policy.h): the built-in
// policies by name and by config enum, their declared properties, the registration rules, and a
// SampleCache driven by a plan that names its policy.
#include "client/cache/cache_policy.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/cache/sample_cache.h"
#include "client/cache/sample_store.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

std::shared_ptr<const CachePolicy> Policy(std::string_view name, v1::CachePolicy value) {
  absl::StatusOr<std::shared_ptr<const CachePolicy>> p = MakeCachePolicy(name, value);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

TEST(CachePolicyRegistryTest, BuiltinsAnswerToTheirNamesAndEnumValues) {
  EXPECT_THAT(RegisteredCachePolicyNames(), IsSupersetOf({"importance", "lfu", "lru", "none"}));
  EXPECT_EQ(Policy("", v1::CACHE_POLICY_UNSPECIFIED)->name(), kDefaultCachePolicy);
  EXPECT_EQ(Policy("", v1::CACHE_POLICY_IMPORTANCE)->name(), "importance");
  EXPECT_EQ(Policy("", v1::CACHE_POLICY_LRU)->name(), "lru");
  EXPECT_EQ(Policy("", v1::CACHE_POLICY_LFU)->name(), "lfu");
  EXPECT_EQ(Policy("", v1::CACHE_POLICY_NONE)->name(), "none");
  for (const char* name : {"importance", "lru", "lfu", "none"}) {
    EXPECT_EQ(Policy(name, v1::CACHE_POLICY_UNSPECIFIED)->name(), name);
  }
  // The name wins over the enum; a config is read the same way.
  EXPECT_EQ(Policy("lfu", v1::CACHE_POLICY_LRU)->name(), "lfu");
  v1::CacheConfig config;
  config.set_policy(v1::CACHE_POLICY_LRU);
  config.set_policy_name("none");
  EXPECT_EQ(CachePolicyNameOf(config), "none");
  config.clear_policy_name();
  EXPECT_EQ(CachePolicyNameOf(config), "lru");
  // One shared instance per policy: a lookup allocates nothing.
  EXPECT_EQ(Policy("lru", v1::CACHE_POLICY_UNSPECIFIED), Policy("", v1::CACHE_POLICY_LRU));
}

TEST(CachePolicyRegistryTest, AnUnknownNameOrValueIsAnErrorListingTheRegisteredNames) {
  EXPECT_THAT(MakeCachePolicy("fifo"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"fifo\""), HasSubstr("importance, lfu, lru"))));
  EXPECT_THAT(MakeCachePolicy("", static_cast<v1::CachePolicy>(42)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("42"), HasSubstr("registered policies"))));
}

class NamedPolicy : public CachePolicy {
 public:
  NamedPolicy(std::string name, v1::CachePolicy value) : name_(std::move(name)), value_(value) {}
  std::string_view name() const override { return name_; }
  v1::CachePolicy enum_value() const override { return value_; }
  EvictionKey Key(const CacheSampleInfo& s) const override { return EvictionKey{}; }

 private:
  std::string name_;
  v1::CachePolicy value_;
};

TEST(CachePolicyRegistryTest, RegistrationRefusesTakenNamesTakenValuesAndMalformedNames) {
  EXPECT_THAT(RegisterCachePolicy(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(
      RegisterCachePolicy(std::make_shared<NamedPolicy>("lru", v1::CACHE_POLICY_UNSPECIFIED)),
      StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("\"lru\"")));
  EXPECT_THAT(RegisterCachePolicy(std::make_shared<NamedPolicy>("lru_again", v1::CACHE_POLICY_LRU)),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("CACHE_POLICY_LRU")));
  for (const char* bad : {"", "Fifo", "two words", "dash-ed"}) {
    EXPECT_THAT(
        RegisterCachePolicy(std::make_shared<NamedPolicy>(bad, v1::CACHE_POLICY_UNSPECIFIED)),
        StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_))
        << bad;
  }
  EXPECT_THAT(RegisteredCachePolicyNames(), ::testing::Not(::testing::Contains("lru_again")));
}

TEST(CachePolicyTest, BuiltinsDeclareTheirProperties) {
  const auto importance = Policy("importance", v1::CACHE_POLICY_UNSPECIFIED);
  const auto lru = Policy("lru", v1::CACHE_POLICY_UNSPECIFIED);
  const auto lfu = Policy("lfu", v1::CACHE_POLICY_UNSPECIFIED);
  const auto none = Policy("none", v1::CACHE_POLICY_UNSPECIFIED);
  EXPECT_EQ(importance->draw(), CacheDraw::kImportance);
  EXPECT_TRUE(importance->prefetches());
  EXPECT_TRUE(importance->keys_follow_importance());
  for (const auto& p : {lru, lfu, none}) {
    EXPECT_EQ(p->draw(), CacheDraw::kUniform) << p->name();
    EXPECT_FALSE(p->prefetches()) << p->name();
    EXPECT_FALSE(p->keys_follow_importance()) << p->name();
  }
  EXPECT_TRUE(importance->caches() && lru->caches() && lfu->caches());
  EXPECT_FALSE(none->caches());

  const CacheSampleInfo s{/*id=*/3, /*last_tick=*/7, /*importance=*/2.5, /*frequency=*/4};
  EXPECT_EQ(importance->Key(s).a, 2.5);
  EXPECT_EQ(importance->Key(s).b, 4);
  EXPECT_EQ(importance->Key(s).c, 7);
  EXPECT_EQ(lru->Key(s).a, 7);
  EXPECT_EQ(lfu->Key(s).a, 4);
  EXPECT_EQ(lfu->Key(s).b, 7);
  // Admission: only the importance policy refuses a candidate that does not outrank the victim.
  const EvictionKey victim{2.5, 4, 1};
  EXPECT_FALSE(importance->Admits(s, victim));  // a tie does not outrank
  EXPECT_TRUE(importance->Admits(CacheSampleInfo{3, 7, 2.5, 5}, victim));
  EXPECT_TRUE(importance->Admits(CacheSampleInfo{3, 7, 3.0, 0}, victim));
  EXPECT_TRUE(lru->Admits(s, victim));
  EXPECT_TRUE(lfu->Admits(s, victim));

  // The simulator's modelled hit share (sim/engine/modelled_learner.h).
  EXPECT_DOUBLE_EQ(lru->ModelledHitShare(0.1, 2), 0.1);
  EXPECT_DOUBLE_EQ(none->ModelledHitShare(0.1, 2), 0.0);
  EXPECT_DOUBLE_EQ(importance->ModelledHitShare(0.1, 2), 0.3 / (0.3 + 0.85));
  EXPECT_DOUBLE_EQ(importance->ModelledHitShare(0.1, 0), 0.15);
}

TEST(CachePolicyTest, APlanNamingAPolicySelectsItInTheCache) {
  std::vector<std::string> samples(20, std::string(10, 'x'));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<InMemorySampleStore> store,
                       InMemorySampleStore::Create(samples, SampleStoreOptions()));
  SampleCacheOptions options;
  options.store = store.get();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SampleCache> cache, SampleCache::Create(options));
  v1::CachePlan plan;
  plan.set_policy(v1::CACHE_POLICY_IMPORTANCE);
  plan.set_policy_name("lfu");
  ASSERT_OK(cache->ApplyPlan(plan));
  EXPECT_EQ(cache->policy(), v1::CACHE_POLICY_LFU);
  EXPECT_EQ(cache->cache_policy().name(), "lfu");
  plan.set_policy_name("fifo");
  EXPECT_THAT(cache->ApplyPlan(plan), StatusIs(absl::StatusCode::kInvalidArgument,
                                               AllOf(HasSubstr("cache plan"), HasSubstr("\"fifo\""),
                                                     HasSubstr("registered policies"))));
  EXPECT_EQ(cache->cache_policy().name(), "lfu");  // unchanged
  options.policy_name = "fifo";
  EXPECT_THAT(SampleCache::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("policy_name")));
}

}  // namespace
}  // namespace fedsched
