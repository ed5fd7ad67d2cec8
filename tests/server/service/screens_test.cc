// The median norm screen cannot be starved (docs/guides/SECURITY.md "Updates"), against a real
// CoordinatorService on 127.0.0.1 through raw gRPC stubs: identities uploading zeros, or honest
// clients with near-zero updates, never make it refuse a normal update.
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FilledLike;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;
using ::fedsched::testing::UploadRaw;
using ::testing::HasSubstr;

constexpr int64_t kChunk = 4096;

// A participant of the run: its session and the value its update adds to every parameter.
struct Participant {
  std::string identity;
  float fill = 0;
  Session session = {};
  std::vector<absl::Status> verdicts = {};  // of its uploads, in order
};

class ScreensTest : public ::testing::Test {
 protected:
  // Every participant is in every round (K = min_updates = all of them).
  void Start(std::vector<Participant> participants, int64_t rounds) {
    participants_ = std::move(participants);
    const int n = static_cast<int>(participants_.size());
    v1::ServerConfig config;
    config.set_clients_per_round(n);
    config.set_min_updates(n);
    config.set_min_online_clients(n);
    config.set_num_rounds(rounds);
    config.set_round_deadline_s(10);
    config.set_heartbeat_interval_ms(1000);
    config.set_missed_heartbeats(60);
    config.mutable_selection()->set_overcommit(1.0);
    config.mutable_transport()->set_chunk_bytes(kChunk);
    TestServer::Options options;
    options.config = config;
    options.initial_model = initial_;
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(std::move(options)));
    stub_ = server_->NewStub();
    for (Participant& p : participants_) {
      ASSERT_OK_AND_ASSIGN(p.session, RegisterRaw(*stub_, p.identity));
    }
  }

  // Ticks, and has every participant upload its update (1 example) once for each new task it
  // polls, until `rounds` rounds have committed. False after the timeout.
  bool RunRounds(int64_t rounds) {
    absl::flat_hash_set<std::string> uploaded;  // task ids
    return TestServer::WaitFor(
        [&] {
          server_->Tick();
          for (Participant& p : participants_) {
            absl::StatusOr<v1::PollTaskResponse> r = PollRaw(*stub_, p.session);
            if (!r.ok() || !r->has_task() || !uploaded.insert(r->task().task_id()).second) {
              continue;
            }
            const std::string payload = FilledLike(initial_, p.fill).SerializeAsString();
            p.verdicts.push_back(
                UploadRaw(*stub_, UploadMessages(p.session, r->task(), payload, 1, kChunk)));
          }
          return server_->coordinator().committed_round() >= rounds;
        },
        absl::Seconds(90));
  }

  // Every value of the committed model `round` minus the initial one's is `expected`.
  void ExpectMovedBy(int64_t round, float expected) {
    ASSERT_OK_AND_ASSIGN(v1::Model model, server_->store().LoadModel(round));
    for (int t = 0; t < model.tensors_size(); ++t) {
      for (int i = 0; i < model.tensors(t).data_size(); ++i) {
        ASSERT_NEAR(model.tensors(t).data(i) - initial_.tensors(t).data(i), expected, 1e-5)
            << "round " << round << " tensor " << t << " value " << i;
      }
    }
  }

  const v1::Model initial_ = PatternModel({600, 10});
  std::vector<Participant> participants_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

// Median-screen poisoning: 3 identities uploading all-zero deltas beside 2 honest clients (L2
// norm 0.0625 x sqrt(610) = 1.54) used to drive the median of recent accepted norms to 0, after
// which every honest update was refused. The zeros no longer count: every honest update is
// accepted over several rounds, and the model moves by the FedAvg of every accepted update.
TEST_F(ScreensTest, ZeroDeltaIdentitiesDoNotStarveHonestUpdates) {
  constexpr int64_t kRounds = 4;
  Start({{"honest-0", 0.0625f},
         {"honest-1", 0.0625f},
         {"zeros-0", 0.0f},
         {"zeros-1", 0.0f},
         {"zeros-2", 0.0f}},
        kRounds);
  ASSERT_TRUE(RunRounds(kRounds));
  for (const Participant& p : participants_) {
    ASSERT_EQ(p.verdicts.size(), static_cast<size_t>(kRounds)) << p.identity;
    for (const absl::Status& verdict : p.verdicts) EXPECT_OK(verdict) << p.identity;
  }
  for (int64_t round = 1; round <= kRounds; ++round) {
    ASSERT_OK_AND_ASSIGN(v1::RoundRecord record, server_->store().LoadRound(round));
    EXPECT_EQ(record.updates_accepted(), 5);
    EXPECT_EQ(record.updates_rejected(), 0);
    // FedAvg with equal weights: 2 x 0.0625 / 5 per round.
    ExpectMovedBy(round, 0.025f * static_cast<float>(round));
  }
}

// An honest run that used to hang: clients with tiny updates (examples/embed_sdk) beside one
// training for real (examples/c_client) made the median tiny, and the normal client was refused
// from round 3 on, for ever. The tiny norms do not move the reference, and the floor
// (aggregation.clip_update_norm) keeps any update within the clip bound from being refused.
TEST_F(ScreensTest, NearZeroClientsBesideANormalOneNeverGetItRefused) {
  constexpr int64_t kRounds = 5;
  Start({{"normal", 0.0625f},  // L2 1.54
         {"tiny-0", 1e-4f},    // L2 0.0025
         {"tiny-1", 1e-4f},
         {"tiny-2", 1e-4f},
         {"tiny-3", 1e-4f}},
        kRounds);
  ASSERT_TRUE(RunRounds(kRounds));
  ASSERT_EQ(participants_[0].verdicts.size(), static_cast<size_t>(kRounds));
  for (const absl::Status& verdict : participants_[0].verdicts) EXPECT_OK(verdict);
  ExpectMovedBy(kRounds, kRounds * (0.0625f + 4 * 1e-4f) / 5);
}

// A refused update fails its task at once: the sender's second upload for it is refused as a
// failed task, its poll offers no task in that round, and both refusals are counted by reason
// in the open round's record.
TEST_F(ScreensTest, RefusedUpdateFailsItsTask) {
  Start({{"honest", 0.0625f}, {"loud", 1e30f}}, 1);
  std::vector<v1::Task> tasks;
  for (Participant& p : participants_) {
    absl::StatusOr<v1::PollTaskResponse> r;
    ASSERT_TRUE(TestServer::WaitFor([&] {
      server_->Tick();
      r = PollRaw(*stub_, p.session);
      return r.ok() && r->has_task();
    }));
    tasks.push_back(r->task());
  }
  const Participant& loud = participants_[1];
  const std::string huge = FilledLike(initial_, loud.fill).SerializeAsString();
  EXPECT_THAT(UploadRaw(*stub_, UploadMessages(loud.session, tasks[1], huge, 1, kChunk)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_update_norm")));
  const std::string zeros = FilledLike(initial_, 0).SerializeAsString();
  EXPECT_THAT(UploadRaw(*stub_, UploadMessages(loud.session, tasks[1], zeros, 1, kChunk)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("marked failed: update refused (norm_bound)")));
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse again, PollRaw(*stub_, loud.session));
  EXPECT_FALSE(again.has_task());
  const v1::GetStatusResponse status = server_->coordinator().GetStatus(1);
  ASSERT_GE(status.recent_rounds_size(), 1);
  const v1::RoundRecord& open = status.recent_rounds(0);
  EXPECT_EQ(open.updates_rejected(), 2);
  ASSERT_EQ(open.rejected_by_reason_size(), 2);  // sorted by reason
  EXPECT_EQ(open.rejected_by_reason(0).reason(), "norm_bound");
  EXPECT_EQ(open.rejected_by_reason(0).count(), 1);
  EXPECT_EQ(open.rejected_by_reason(1).reason(), "task");  // for a failed task
  EXPECT_EQ(open.rejected_by_reason(1).count(), 1);
}

}  // namespace
}  // namespace fedsched
