// Long polls (server/service/held_polls.h) over loopback: a held poll is
// answered with the task as soon as the round is planned, at its bound with "poll again at once",
// never beyond the held-poll limit, and a client that gives up releases it.
#include <memory>
#include <optional>
#include <thread>

#include "common/testing/status_matchers.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FromGrpc;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::SetDeadline;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;

// A PollTask that asks the server to hold it up to `wait_ms`.
absl::StatusOr<v1::PollTaskResponse> LongPoll(v1::Coordinator::Stub& stub, const Session& who,
                                              int32_t wait_ms,
                                              absl::Duration deadline = absl::Seconds(60)) {
  v1::PollTaskRequest request;
  request.set_client_id(who.client_id);
  request.set_session_token(who.token);
  request.set_wait_ms(wait_ms);
  v1::PollTaskResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(stub.PollTask(&context, request, &response)));
  return response;
}

class LongPollTest : public ::testing::Test {
 protected:
  void Start(HeldPollsOptions held) {
    v1::ServerConfig raw;
    raw.set_clients_per_round(2);
    raw.set_min_updates(2);
    raw.set_min_online_clients(2);
    raw.set_num_rounds(1);
    raw.set_round_deadline_s(60);
    raw.set_heartbeat_interval_ms(1000);
    raw.set_missed_heartbeats(60);  // nobody goes offline while a test runs
    raw.mutable_selection()->set_overcommit(1.0);
    raw.mutable_training()->set_local_steps(1);
    TestServer::Options options;
    options.config = raw;
    options.initial_model = PatternModel({8, 2});
    options.held_polls = held;
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(std::move(options)));
    stub_ = server_->NewStub();
  }
  bool WaitForHeld(int n) {
    return TestServer::WaitFor([&] { return server_->service().held_polls() == n; });
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(LongPollTest, HeldPollGetsTheTaskWhenTheRoundIsPlanned) {
  Start({.max_held = 8, .max_wait = absl::Seconds(120)});
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub_, "held-a"));
  std::optional<absl::StatusOr<v1::PollTaskResponse>> answer;
  std::thread poller([&] { answer = LongPoll(*stub_, a, 120000); });
  ASSERT_TRUE(WaitForHeld(1));
  // The second client makes the round plannable; the tick plans it and wakes the held poll.
  ASSERT_OK_AND_ASSIGN(Session b, RegisterRaw(*stub_, "held-b"));
  server_->Tick();
  poller.join();
  ASSERT_TRUE(answer.has_value());
  ASSERT_OK(answer->status());
  EXPECT_TRUE((*answer)->has_task()) << (*answer)->DebugString();
  EXPECT_EQ(server_->service().held_polls(), 0);
  // A poll that asks no wait is answered at once, as before long polls.
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse other, LongPoll(*stub_, b, 0));
  EXPECT_TRUE(other.has_task());
}

TEST_F(LongPollTest, HeldPollAtItsBoundSaysPollAgainAtOnce) {
  Start({.max_held = 8, .max_wait = absl::Milliseconds(50)});
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub_, "bound-a"));
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse response, LongPoll(*stub_, a, 120000));
  ASSERT_TRUE(response.has_retry_after_ms()) << response.DebugString();
  EXPECT_EQ(response.retry_after_ms(), 0);
  EXPECT_EQ(server_->service().held_polls(), 0);
}

TEST_F(LongPollTest, PollsPastTheLimitAreAnsweredAtOnce) {
  Start({.max_held = 1, .max_wait = absl::Seconds(120)});
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub_, "limit-a"));
  ASSERT_OK_AND_ASSIGN(Session b, RegisterRaw(*stub_, "limit-b"));
  std::thread poller([&] { LongPoll(*stub_, a, 120000).status().IgnoreError(); });
  ASSERT_TRUE(WaitForHeld(1));
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse response, LongPoll(*stub_, b, 120000));
  ASSERT_TRUE(response.has_retry_after_ms()) << response.DebugString();
  EXPECT_GT(response.retry_after_ms(), 0);
  EXPECT_EQ(server_->service().held_polls(), 1);
  server_->Shutdown();  // cancels the held poll
  poller.join();
}

TEST_F(LongPollTest, ClientGivingUpReleasesItsHeldPoll) {
  Start({.max_held = 8, .max_wait = absl::Seconds(120)});
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub_, "gone-a"));
  EXPECT_THAT(LongPoll(*stub_, a, 120000, absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, ::testing::_));
  EXPECT_TRUE(WaitForHeld(0));
}

TEST_F(LongPollTest, HeldPollWithABadTokenIsRefusedAtOnce) {
  Start({.max_held = 8, .max_wait = absl::Seconds(120)});
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub_, "token-a"));
  a.token = "forged";
  EXPECT_THAT(LongPoll(*stub_, a, 120000), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_EQ(server_->service().held_polls(), 0);
}

}  // namespace
}  // namespace fedsched
