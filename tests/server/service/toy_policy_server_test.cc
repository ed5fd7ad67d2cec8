// A selection policy registered only by this test, through the public registration path
// (planner::RegisterSelectionPolicy), named and configured from a text-format server config
// (selection.policy_name, selection.policy_config as a google.protobuf.Any), plans a real
// server's round over gRPC on 127.0.0.1: the tasks go to the clients the policy implies. The
// worked example of docs/guides/EXTENDING.md "Adding a selection policy".
#include <map>
#include <set>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/server/planner/largest_data_policy.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterLargestDataPolicy;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// K = 2 of five clients; the policy's minimum (150 samples) is its own config message.
constexpr char kConfig[] = R"pb(
  clients_per_round: 2
  min_updates: 2
  min_online_clients: 5
  num_rounds: 1
  round_deadline_s: 60
  heartbeat_interval_ms: 1000
  missed_heartbeats: 60
  training { local_steps: 1 }
  selection {
    overcommit: 1.0
    policy_name: "largest_data"
    policy_config {
      [type.googleapis.com/google.protobuf.Int64Value] { value: 150 }
    }
  }
)pb";

TEST(ToyPolicyServerTest, ARegisteredPolicyPlansTheServersRound) {
  ASSERT_OK(RegisterLargestDataPolicy());
  TestServer::Options options;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, &options.config));
  options.initial_model = PatternModel({16});
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  EXPECT_EQ(server->config().selection().policy_name(), "largest_data");
  auto stub = server->NewStub();
  const std::map<std::string, int64_t> samples = {
      {"a", 100}, {"b", 500}, {"c", 300}, {"d", 900}, {"e", 200}};
  std::map<std::string, Session> sessions;
  for (const auto& [identity, n] : samples) {
    ASSERT_OK_AND_ASSIGN(sessions[identity], RegisterRaw(*stub, identity, n));
  }
  server->Tick();

  // The two clients with the most samples have round 1's tasks; nobody else has one.
  std::set<std::string> tasked;
  for (const auto& [identity, session] : sessions) {
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, PollRaw(*stub, session));
    if (r.has_task()) {
      EXPECT_EQ(r.task().round(), 1);
      tasked.insert(identity);
    }
  }
  EXPECT_THAT(tasked, ElementsAre("b", "d"));
  // The round record explains each pick with the policy's score (the samples).
  const v1::GetStatusResponse status = server->coordinator().GetStatus(1);
  ASSERT_EQ(status.recent_rounds_size(), 1);
  std::multiset<double> scores;
  for (const v1::SelectionReason& r : status.recent_rounds(0).cohort()) {
    scores.insert(r.score());
    EXPECT_EQ(r.policy_name(), "largest_data");  // named in the record and fedsched-status
  }
  EXPECT_THAT(scores, ElementsAre(500, 900));
}

TEST(ToyPolicyServerTest, AnUnknownPolicyNameListsTheRegisteredOnes) {
  ASSERT_OK(RegisterLargestDataPolicy());
  v1::ServerConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, &config));
  config.set_store_path("/tmp/unused");  // required by ResolveServerConfig; nothing is opened
  config.mutable_selection()->set_policy_name("smallest_data");
  EXPECT_THAT(ResolveServerConfig(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("registered: fedcase, fedsched, largest_data, oort")));
  // And a config message of another type than the policy takes is refused.
  config.mutable_selection()->set_policy_name("largest_data");
  config.mutable_selection()->mutable_policy_config()->PackFrom(v1::OortConfig());
  EXPECT_THAT(
      ResolveServerConfig(config).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("google.protobuf.Int64Value")));
}

}  // namespace
}  // namespace fedsched
