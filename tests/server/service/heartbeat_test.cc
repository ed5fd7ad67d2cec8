// Heartbeats never wait for the coordinator's lock, and a finished server
// waits for every client heard from recently, not only those within the heartbeat timeout
// (docs/reports/RELIABILITY.md §4 and §8). Uses the in-memory store; a store that blocks in
// PutProfile holds the coordinator's lock for as long as the test wants (Register persists the
// profile under it).
#include <atomic>
#include <memory>
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

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);
constexpr absl::Duration kWait = absl::Seconds(60);  // generous: only bounds a failing test

v1::Model Model(float v) {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(2);
  w->add_data(v);
  w->add_data(v);
  return model;
}

// PutProfile blocks while `block` is set, until `release` (the caller holds the coordinator's
// lock all that time).
class BlockingStore : public MemoryStore {
 public:
  absl::Status PutProfile(const v1::ClientProfile& profile) override {
    if (block.load()) {
      entered.Notify();
      release.WaitForNotificationWithTimeout(kWait);
    }
    return MemoryStore::PutProfile(profile);
  }
  std::atomic<bool> block{false};
  absl::Notification entered, release;
};

class HeartbeatTest : public ::testing::Test {
 protected:
  void Start(int num_rounds, int min_online) {
    v1::ServerConfig raw;
    raw.set_store_path("unused-memory-store");
    raw.set_clients_per_round(1);
    raw.set_min_updates(1);
    raw.set_min_online_clients(min_online);
    raw.set_num_rounds(num_rounds);
    raw.set_heartbeat_interval_ms(1000);
    raw.set_missed_heartbeats(3);  // offline 3 s after the last heartbeat
    raw.mutable_selection()->set_overcommit(1.0);
    raw.mutable_training()->set_local_steps(2);
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw));
    CoordinatorOptions options;
    options.config = config;
    options.store = &store_;
    options.initial_model = Model(0);
    options.clock = [this] { return now_.load(); };
    options.evaluator = evaluator_;
    options.enrolment_key = testing::kTestEnrolmentKey;
    ASSERT_OK_AND_ASSIGN(coordinator_, Coordinator::Create(std::move(options)));
  }

  v1::RegisterResponse Register(const std::string& identity) {
    v1::RegisterRequest request;
    request.set_identity(identity);
    request.mutable_device()->set_num_samples(100);
    absl::StatusOr<v1::RegisterResponse> r =
        coordinator_->Register(testing::Provisioned(request), now_.load());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::RegisterResponse();
  }

  absl::Status Heartbeat(const v1::RegisterResponse& c, const std::string& token) {
    v1::HeartbeatRequest request;
    request.set_client_id(c.client_id());
    request.set_session_token(token);
    return coordinator_->Heartbeat(request, now_.load()).status();
  }

  absl::StatusOr<v1::PollTaskResponse> Poll(const v1::RegisterResponse& c) {
    v1::PollTaskRequest request;
    request.set_client_id(c.client_id());
    request.set_session_token(c.session_token());
    return coordinator_->PollTask(request, now_.load());
  }

  bool Online(const std::string& client_id) {
    const v1::GetStatusResponse status = coordinator_->GetStatus(0);
    for (const v1::ClientSummary& c : status.clients()) {
      if (c.client_id() == client_id) return c.online();
    }
    return false;
  }

  Evaluator evaluator_;  // optional, set before Start
  BlockingStore store_;
  std::atomic<absl::Time> now_{kT0};
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(HeartbeatTest, AnsweredWhileTheCoordinatorLockIsHeld) {
  Start(/*num_rounds=*/5, /*min_online=*/5);  // no round: only sessions and liveness
  v1::RegisterResponse a = Register("a");
  // b's registration holds the coordinator's lock inside the store until released.
  store_.block = true;
  std::thread blocked([&] { Register("b"); });
  ASSERT_TRUE(store_.entered.WaitForNotificationWithTimeout(kWait));
  now_ = kT0 + absl::Seconds(2);
  absl::Notification answered;
  absl::Status heartbeat, forged;
  std::thread caller([&] {
    heartbeat = Heartbeat(a, a.session_token());
    forged = Heartbeat(a, "s-forged");
    answered.Notify();
  });
  // With the old Heartbeat (which took the lock) this waits out kWait and fails.
  const bool in_time = answered.WaitForNotificationWithTimeout(kWait);
  store_.release.Notify();
  caller.join();
  blocked.join();
  EXPECT_TRUE(in_time) << "Heartbeat waited for the coordinator's lock";
  EXPECT_OK(heartbeat);
  EXPECT_THAT(forged, StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register again")));
  // The heartbeat at 2 s counts: at 4 s (past 3 s since registration) a is still online.
  now_ = kT0 + absl::Seconds(4);
  coordinator_->Tick(now_.load());
  EXPECT_TRUE(Online(a.client_id()));
  now_ = kT0 + absl::Seconds(6);  // 4 s after the last heartbeat
  coordinator_->Tick(now_.load());
  EXPECT_FALSE(Online(a.client_id()));
}

TEST_F(HeartbeatTest, UncontendedHeartbeatCountsAtOnce) {
  Start(/*num_rounds=*/5, /*min_online=*/5);
  v1::RegisterResponse a = Register("a");
  now_ = kT0 + absl::Seconds(2);
  ASSERT_OK(Heartbeat(a, a.session_token()));
  now_ = kT0 + absl::Seconds(4);
  EXPECT_TRUE(Online(a.client_id()));  // no Tick in between
  EXPECT_THAT(Heartbeat(a, ""),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register again")));
  v1::RegisterResponse unknown;
  unknown.set_client_id("c-nobody");
  EXPECT_THAT(Heartbeat(unknown, a.session_token()),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("register again")));
}

TEST_F(HeartbeatTest, FinishedServerWaitsForClientsHeardRecently) {
  Start(/*num_rounds=*/1, /*min_online=*/2);
  v1::RegisterResponse a = Register("a");
  v1::RegisterResponse b = Register("b");
  coordinator_->Tick(kT0);
  // One of the two got round 1's only task; it uploads and the round commits.
  absl::StatusOr<v1::PollTaskResponse> pa = Poll(a);
  absl::StatusOr<v1::PollTaskResponse> pb = Poll(b);
  ASSERT_OK(pa.status());
  ASSERT_OK(pb.status());
  const bool a_works = pa->has_task();
  const v1::RegisterResponse& worker = a_works ? a : b;
  const v1::RegisterResponse& idle = a_works ? b : a;
  const v1::Task& task = a_works ? pa->task() : pb->task();
  v1::UploadHeader header;
  header.set_client_id(worker.client_id());
  header.set_session_token(worker.session_token());
  header.set_task_id(task.task_id());
  header.set_round(task.round());
  const std::string payload = Model(1).SerializeAsString();
  header.set_total_bytes(static_cast<int64_t>(payload.size()));
  header.set_sha256(Sha256(payload));
  header.set_num_chunks(1);
  header.mutable_metrics()->set_num_examples(10);
  now_ = kT0 + absl::Seconds(1);
  ASSERT_OK(coordinator_->SubmitUpdate(header, payload, now_.load()));
  coordinator_->Tick(now_.load());
  ASSERT_TRUE(coordinator_->finished());
  // 10 s later both are past the heartbeat timeout (3 s), e.g. starved of CPU or backing off,
  // but heard from within 30 s: the server must still wait for both to hear "finished".
  now_ = kT0 + absl::Seconds(10);
  EXPECT_EQ(coordinator_->ClientsAwaitingFinish(now_.load(), absl::Seconds(30)), 2);
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse done, Poll(worker));
  EXPECT_TRUE(done.finished());
  EXPECT_EQ(coordinator_->ClientsAwaitingFinish(now_.load(), absl::Seconds(30)), 1);
  // The idle one last heard from at 0 s (its poll); after 30 s of silence it is not waited for.
  now_ = kT0 + absl::Seconds(31);
  EXPECT_EQ(coordinator_->ClientsAwaitingFinish(now_.load(), absl::Seconds(30)), 0);
  (void)idle;
}

TEST_F(HeartbeatTest, FinishedIsSaidOnlyOnceTheLastRoundIsDurable) {
  absl::Notification evaluating, release;
  std::atomic<int> calls{0};
  evaluator_ = [&](const v1::Model&) -> absl::StatusOr<EvalMetrics> {
    // Call 0 is the initial model's, at Create (the collapse guard's reference): not slow.
    if (calls.fetch_add(1) == 0) return EvalMetrics{0.5, 1.0};
    evaluating.Notify();
    release.WaitForNotificationWithTimeout(kWait);  // a slow commit of the last round
    return EvalMetrics{0.5, 1.0};
  };
  Start(/*num_rounds=*/1, /*min_online=*/1);
  v1::RegisterResponse a = Register("a");
  coordinator_->Tick(kT0);
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse task, Poll(a));
  ASSERT_TRUE(task.has_task());
  v1::UploadHeader header;
  header.set_client_id(a.client_id());
  header.set_session_token(a.session_token());
  header.set_task_id(task.task().task_id());
  header.set_round(task.task().round());
  const std::string payload = Model(1).SerializeAsString();
  header.set_total_bytes(static_cast<int64_t>(payload.size()));
  header.set_sha256(Sha256(payload));
  header.set_num_chunks(1);
  header.mutable_metrics()->set_num_examples(10);
  // The update closes the last round; its commit (evaluation) runs on this thread.
  std::thread committer([&] { EXPECT_OK(coordinator_->SubmitUpdate(header, payload, kT0)); });
  ASSERT_TRUE(evaluating.WaitForNotificationWithTimeout(kWait));
  // Closed but not durable: a poll is told to retry, not "finished" (a crash now would
  // restart the run without the clients that had left).
  absl::StatusOr<v1::PollTaskResponse> early = Poll(a);
  release.Notify();
  committer.join();
  ASSERT_OK(early.status());
  EXPECT_FALSE(early->finished());
  EXPECT_GT(early->retry_after_ms(), 0);
  coordinator_->Tick(kT0);
  ASSERT_TRUE(coordinator_->finished());
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse done, Poll(a));
  EXPECT_TRUE(done.finished());
}

}  // namespace
}  // namespace fedsched
