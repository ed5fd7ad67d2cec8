// A round in a real server (gRPC on 127.0.0.1) with an aggregation rule registered only by the
// tests (tests/server/aggregation/geometric_median_rule.cc, docs/guides/EXTENDING.md "Adding an
// aggregation rule"): the config names it, three clients upload, and the committed model is the
// rule's aggregate, not FedAvg's.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "tests/server/aggregation/geometric_median_rule.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FilledLike;
using ::fedsched::testing::kGeometricMedianRule;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;
using ::fedsched::testing::UploadRaw;

constexpr int64_t kChunk = 1024;

TEST(CustomRuleServerTest, RoundAggregatesWithTheRegisteredRule) {
  v1::ServerConfig raw;
  raw.set_clients_per_round(3);
  raw.set_min_updates(3);
  raw.set_min_online_clients(3);
  raw.set_num_rounds(1);
  raw.set_round_deadline_s(60);
  raw.set_heartbeat_interval_ms(1000);
  raw.set_missed_heartbeats(60);  // nobody goes offline while the test runs
  raw.mutable_selection()->set_overcommit(1.0);
  raw.mutable_training()->set_local_steps(1);
  raw.mutable_transport()->set_chunk_bytes(kChunk);
  raw.mutable_aggregation()->set_rule_name(kGeometricMedianRule);
  raw.mutable_aggregation()->set_clip_update_norm(1e6);  // the deltas arrive unclipped
  const v1::Model global = PatternModel({600, 10});
  TestServer::Options options;
  options.config = raw;
  options.initial_model = global;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(std::move(options)));
  EXPECT_EQ(server->config().aggregation().rule_name(), kGeometricMedianRule);
  std::unique_ptr<v1::Coordinator::Stub> stub = server->NewStub();

  std::vector<Session> clients;
  for (const char* identity : {"a", "b", "c"}) {
    ASSERT_OK_AND_ASSIGN(Session s, RegisterRaw(*stub, identity));
    clients.push_back(s);
  }
  server->Tick();
  // Deltas 1, 2 and 9 in every coordinate, equal examples: three points on a line, whose
  // geometric median is the middle one (FedAvg would move the model by 4).
  const float values[] = {1.0f, 2.0f, 9.0f};
  for (size_t k = 0; k < clients.size(); ++k) {
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse poll, PollRaw(*stub, clients[k]));
    ASSERT_TRUE(poll.has_task()) << poll.DebugString();
    const std::string payload = FilledLike(global, values[k]).SerializeAsString();
    ASSERT_OK(UploadRaw(*stub, UploadMessages(clients[k], poll.task(), payload, 10, kChunk)));
  }
  server->Tick();
  ASSERT_TRUE(TestServer::WaitFor([&] { return server->coordinator().committed_round() >= 1; }));
  ASSERT_OK_AND_ASSIGN(v1::Model committed, server->store().LoadModel(1));
  ASSERT_EQ(committed.tensors_size(), global.tensors_size());
  for (int t = 0; t < global.tensors_size(); ++t) {
    ASSERT_EQ(committed.tensors(t).data_size(), global.tensors(t).data_size());
    for (int i = 0; i < global.tensors(t).data_size(); ++i) {
      ASSERT_NEAR(committed.tensors(t).data(i), global.tensors(t).data(i) + 2.0f, 1e-4)
          << "tensor " << t << " index " << i;
    }
  }
}

}  // namespace
}  // namespace fedsched
