// Commits run outside the coordinator's lock: under FedBuff, uploads for the next version are
// accepted while a slow evaluation of the previous one runs (docs/ARCHITECTURE.md "An upload's
// path", step 5). Uses the in-memory store.
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "server/service/server_config.h"
#include "server/store/memory_store.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

v1::Model Model(float v) {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(2);
  w->add_data(v);
  w->add_data(v);
  return model;
}

class CommitTest : public ::testing::Test {
 protected:
  // `fedbuff`: asynchronous versions, else synchronous rounds (both K = 2, min_updates 1).
  void Start(Evaluator evaluator, bool fedbuff = true) {
    v1::ServerConfig raw;
    raw.set_store_path("unused-memory-store");
    raw.set_clients_per_round(2);
    raw.set_min_updates(1);
    raw.set_min_online_clients(2);
    raw.set_num_rounds(10);
    raw.mutable_selection()->set_overcommit(2.0);  // 4 tasks in flight for K = 2
    raw.mutable_training()->set_local_steps(2);
    raw.mutable_aggregation()->set_async_fedbuff(fedbuff);
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw));
    CoordinatorOptions options;
    options.config = config;
    options.store = &store_;
    options.initial_model = Model(0);
    options.evaluator = std::move(evaluator);
    options.clock = [] { return kT0; };
    options.enrolment_key = testing::kTestEnrolmentKey;
    ASSERT_OK_AND_ASSIGN(coordinator_, Coordinator::Create(std::move(options)));
  }

  struct Client {
    v1::RegisterResponse session;
    v1::Task task;
  };

  Client Join(const std::string& identity) {
    v1::RegisterRequest request;
    request.set_identity(identity);
    request.mutable_device()->set_num_samples(100);
    Client c;
    absl::StatusOr<v1::RegisterResponse> r =
        coordinator_->Register(testing::Provisioned(request), kT0);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) c.session = *r;
    return c;
  }

  void Poll(Client& c) {
    v1::PollTaskRequest request;
    request.set_client_id(c.session.client_id());
    request.set_session_token(c.session.session_token());
    absl::StatusOr<v1::PollTaskResponse> r = coordinator_->PollTask(request, kT0);
    ASSERT_TRUE(r.ok() && r->has_task()) << r.status();
    c.task = r->task();
  }

  absl::Status Upload(const Client& c, float value) {
    v1::UploadHeader header;
    header.set_client_id(c.session.client_id());
    header.set_session_token(c.session.session_token());
    header.set_task_id(c.task.task_id());
    header.set_round(c.task.round());
    const std::string payload = Model(value).SerializeAsString();
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    header.mutable_metrics()->set_num_examples(10);
    return coordinator_->SubmitUpdate(header, payload, kT0 + absl::Seconds(1));
  }

  MemoryStore store_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CommitTest, FedBuffAcceptsUploadsWhileASlowEvaluationRuns) {
  absl::Notification evaluating, release;
  std::atomic<bool> evaluation_done{false};
  std::atomic<int> calls{0};
  Start([&](const v1::Model&) -> absl::StatusOr<EvalMetrics> {
    // Call 0 is the initial model's, at Create (the collapse guard's reference): not slow.
    if (calls.fetch_add(1) > 0 && !evaluating.HasBeenNotified()) {
      evaluating.Notify();
      // A slow evaluation (bounded: the test releases it as soon as it has checked).
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
      evaluation_done = true;
    }
    return EvalMetrics{0.5, 1.0};
  });
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(Join(absl::StrCat("dev-", i)));
  coordinator_->Tick(kT0);
  for (Client& c : clients) Poll(c);
  ASSERT_OK(Upload(clients[0], 1));
  // The second update fills version 1's buffer: its thread evaluates and commits it.
  std::thread committer([&] { EXPECT_OK(Upload(clients[1], 1)); });
  ASSERT_TRUE(evaluating.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // While that commit runs, another client's update (a task of version 1, now counting in
  // version 2 with staleness 1) is accepted, and polls and status answer.
  EXPECT_OK(Upload(clients[2], 2));
  EXPECT_FALSE(evaluation_done.load());
  EXPECT_EQ(coordinator_->GetStatus(1).recent_rounds(0).updates_accepted(), 1);
  EXPECT_EQ(coordinator_->committed_round(), 0);  // not durable yet
  release.Notify();
  committer.join();
  EXPECT_EQ(coordinator_->committed_round(), 1);
  EXPECT_EQ(store_.commits(), 1);
  ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, store_.LoadRound(1));
  EXPECT_DOUBLE_EQ(record.test_accuracy(), 0.5);
}

// A synchronous round closed and being committed (here: a slow evaluation) is reported as
// "committing" that round, not as waiting for clients; once published, the next one runs.
TEST_F(CommitTest, StatusSaysCommittingWhileAClosedRoundIsEvaluated) {
  absl::Notification evaluating, release;
  std::atomic<int> calls{0};
  Start(
      [&](const v1::Model&) -> absl::StatusOr<EvalMetrics> {
        if (calls.fetch_add(1) > 0 && !evaluating.HasBeenNotified()) {
          evaluating.Notify();
          release.WaitForNotificationWithTimeout(absl::Seconds(30));
        }
        return EvalMetrics{0.5, 1.0};
      },
      /*fedbuff=*/false);
  std::vector<Client> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(Join(absl::StrCat("dev-", i)));
  coordinator_->Tick(kT0);
  for (Client& c : clients) Poll(c);
  EXPECT_EQ(coordinator_->GetStatus(0).state(), "running");
  ASSERT_OK(Upload(clients[0], 1));
  // The second update closes round 1: its thread evaluates and commits it.
  std::thread committer([&] { EXPECT_OK(Upload(clients[1], 1)); });
  ASSERT_TRUE(evaluating.WaitForNotificationWithTimeout(absl::Seconds(30)));
  v1::GetStatusResponse status = coordinator_->GetStatus(0);
  EXPECT_EQ(status.state(), "committing");
  EXPECT_EQ(status.current_round(), 1);
  EXPECT_EQ(status.committed_round(), 0);
  EXPECT_EQ(status.waiting_for(), "round 1 closed: evaluating, storing and publishing it");
  release.Notify();
  committer.join();
  status = coordinator_->GetStatus(0);
  EXPECT_EQ(status.state(), "running");
  EXPECT_EQ(status.current_round(), 2);
  EXPECT_EQ(status.committed_round(), 1);
  EXPECT_EQ(status.waiting_for(), "");
}

}  // namespace
}  // namespace fedsched
