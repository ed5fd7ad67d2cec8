// The selection policy registry (server/planner/policy_registry.h): the built-in policies'
// properties, how a config names a policy and carries its config, and the --policy flag shared
// by fedsched-server and fedsched-sim.
#include "server/planner/policy_registry.h"

#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "server/planner/oort_policy.h"
#include "server/planner/planner.h"

namespace fedsched::planner {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

const SelectionPolicyKind& Kind(const std::string& name) {
  absl::StatusOr<const SelectionPolicyKind*> kind = FindSelectionPolicy(name);
  EXPECT_TRUE(kind.ok()) << kind.status();
  return **kind;
}

TEST(PolicyRegistryTest, BuiltInPoliciesDeclareTheirProperties) {
  EXPECT_THAT(RegisteredSelectionPolicies(),
              IsSupersetOf({"fedcase", "fedsched", "oort", "pyramidfl", "random"}));
  EXPECT_EQ(Kind("random").implied_cache(), v1::CACHE_POLICY_LRU);
  EXPECT_EQ(Kind("oort").implied_cache(), v1::CACHE_POLICY_LRU);
  EXPECT_EQ(Kind("fedcase").implied_cache(), v1::CACHE_POLICY_IMPORTANCE);
  EXPECT_EQ(Kind("pyramidfl").implied_cache(), v1::CACHE_POLICY_LRU);
  EXPECT_EQ(Kind("fedsched").implied_cache(), v1::CACHE_POLICY_LRU);
  for (const char* name : {"oort", "fedcase", "pyramidfl", "fedsched"}) {
    EXPECT_FALSE(Kind(name).samples_uniformly()) << name;
    EXPECT_TRUE(Kind(name).scores_by_utility()) << name;
  }
  EXPECT_TRUE(Kind("random").samples_uniformly());
  EXPECT_TRUE(Kind("fedcase").selects_by_experience());
  EXPECT_TRUE(Kind("fedsched").selects_by_experience());
  EXPECT_FALSE(Kind("oort").selects_by_experience());
  EXPECT_EQ(Kind("pyramidfl").workload_defaults().extend_beta, 0.5);
  EXPECT_EQ(Kind("pyramidfl").workload_defaults().dropout_high, 0.6);
  EXPECT_EQ(Kind("oort").workload_defaults().extend_beta, 0);
  EXPECT_EQ(Kind("PyramidFL").record_value(), v1::SELECTION_POLICY_PYRAMIDFL);
}

TEST(PolicyRegistryTest, RegistrationRefusesDuplicatesAndBadNames) {
  EXPECT_THAT(RegisterSelectionPolicy(nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("null")));
  EXPECT_THAT(RegisterSelectionPolicy(MakeOortPolicyKind()),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("\"oort\"")));
}

TEST(PolicyRegistryTest, AConfigNamesItsPolicyByEnumOrName) {
  v1::ServerConfig config;
  config.mutable_selection()->set_policy_name("Oort");
  ASSERT_OK_AND_ASSIGN(const SelectionPolicyKind* kind, ResolveSelectionPolicy(&config));
  EXPECT_EQ(kind->name(), "oort");
  // Resolved, a built-in policy is spelled by its enum value, as every older config.
  EXPECT_EQ(config.selection().policy(), v1::SELECTION_POLICY_OORT);
  EXPECT_EQ(config.selection().policy_name(), "");

  v1::SelectionConfig both;
  both.set_policy(v1::SELECTION_POLICY_FEDCASE);
  both.set_policy_name("fedcase");
  EXPECT_OK(ConfiguredSelectionPolicy(both).status());
  both.set_policy_name("oort");
  EXPECT_THAT(ConfiguredSelectionPolicy(both).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("different policies")));

  v1::SelectionConfig unknown;
  unknown.set_policy_name("best");
  EXPECT_THAT(ConfiguredSelectionPolicy(unknown).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("registered: fedcase, fedsched, oort, pyramidfl, random")));
  EXPECT_EQ(ConfiguredSelectionPolicy(v1::SelectionConfig()).value()->name(), "random");
}

TEST(PolicyRegistryTest, PolicyConfigMapsOntoTheTypedField) {
  v1::ServerConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(selection {
             policy_name: "pyramidfl"
             policy_config {
               [type.googleapis.com/fedsched.v1.OortConfig] { exploration_factor: 0.5 }
             }
           })pb",
      &config));
  v1::ServerConfig resolved = config;
  ASSERT_OK(ResolveSelectionPolicy(&resolved).status());
  EXPECT_EQ(resolved.selection().oort().exploration_factor(), 0.5);
  EXPECT_FALSE(resolved.selection().has_policy_config());
  ASSERT_OK_AND_ASSIGN(PlannerOptions options, PlannerOptions::FromServerConfig(config));
  EXPECT_EQ(options.oort.exploration_factor, 0.5);
  EXPECT_EQ(options.policy, v1::SELECTION_POLICY_PYRAMIDFL);
  EXPECT_EQ(options.extend_workload_beta, 0.5);

  // The same value in both places is accepted; different values are not.
  v1::ServerConfig same = config;
  same.mutable_selection()->mutable_oort()->set_exploration_factor(0.5);
  EXPECT_OK(ResolveSelectionPolicy(&same).status());
  v1::ServerConfig different = config;
  different.mutable_selection()->mutable_oort()->set_exploration_factor(0.7);
  EXPECT_THAT(ResolveSelectionPolicy(&different).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("selection.oort")));

  // A message the policy does not take.
  v1::ServerConfig wrong;
  wrong.mutable_selection()->set_policy(v1::SELECTION_POLICY_OORT);
  wrong.mutable_selection()->mutable_policy_config()->PackFrom(v1::FedCaseConfig());
  EXPECT_THAT(ResolveSelectionPolicy(&wrong).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fedsched.v1.OortConfig")));
  v1::ServerConfig none;
  none.mutable_selection()->mutable_policy_config()->PackFrom(v1::OortConfig());
  EXPECT_THAT(ResolveSelectionPolicy(&none).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes no config")));

  // An empty Any, and the right type with contents that do not parse, say so.
  v1::ServerConfig empty;
  empty.mutable_selection()->set_policy(v1::SELECTION_POLICY_RANDOM);
  empty.mutable_selection()->mutable_policy_config();
  EXPECT_THAT(ResolveSelectionPolicy(&empty).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("an empty Any")));
  v1::ServerConfig garbled;
  garbled.mutable_selection()->set_policy(v1::SELECTION_POLICY_OORT);
  garbled.mutable_selection()->mutable_policy_config()->set_type_url(
      "type.googleapis.com/fedsched.v1.OortConfig");
  garbled.mutable_selection()->mutable_policy_config()->set_value("\xff\xff\xff");
  EXPECT_THAT(ResolveSelectionPolicy(&garbled).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not parse")));
}

TEST(PolicyRegistryTest, PolicyFlagSetsThePolicyAndItsCacheOrNamesTheChoices) {
  v1::ServerConfig config;
  config.mutable_cache()->set_policy(v1::CACHE_POLICY_LFU);
  ASSERT_OK(ApplyPolicyFlag("FEDCASE", &config));
  EXPECT_EQ(config.selection().policy(), v1::SELECTION_POLICY_FEDCASE);
  EXPECT_EQ(config.cache().policy(), v1::CACHE_POLICY_IMPORTANCE);
  const v1::ServerConfig before = config;
  EXPECT_THAT(ApplyPolicyFlag("best", &config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--policy must be one of fedcase, fedsched, oort, pyramidfl, "
                                 "random")));
  EXPECT_EQ(config.SerializeAsString(), before.SerializeAsString());
}

}  // namespace
}  // namespace fedsched::planner
