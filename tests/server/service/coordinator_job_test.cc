// The coordinator as one job of a job host (docs/guides/JOBS.md): admitted registrations, the
// planning gate's hooks, GetStatusOf's job routing and the shared system profile.
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "server/round/planning_gate.h"
#include "server/service/coordinator.h"
#include "tests/server/service/coordinator_fixture.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

using ::fedsched::coordinator_testing::CoordinatorTest;
using ::fedsched::coordinator_testing::kT0;
using ::fedsched::coordinator_testing::TwoTensorModel;
using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The coordinator as one job of a job host: admitted registrations, the planning gate's hooks,
// GetStatusOf's job routing and the shared system profile (docs/guides/JOBS.md).

// A gate that refuses the devices in `refused` and records what it is told.
class RecordingGate : public round::PlanningGate {
 public:
  struct Settled {
    std::vector<std::string> in_flight;  // sorted
    int64_t demand = 0;
  };
  bool MayPlan(std::string_view client_id, double now_s) override {
    asked.insert(std::string(client_id));
    return !refused.contains(std::string(client_id));
  }
  void Settle(absl::Span<const std::string> in_flight, int64_t demand, double now_s) override {
    Settled s{std::vector<std::string>(in_flight.begin(), in_flight.end()), demand};
    std::sort(s.in_flight.begin(), s.in_flight.end());
    settled.push_back(std::move(s));
  }
  void Describe(round::JobFacts facts, double now_s) override {
    described.push_back(std::move(facts));
  }
  std::string OfferReason(std::string_view client_id) const override {
    return "offered to kbd: " + std::string(client_id);
  }
  std::set<std::string> refused;
  std::set<std::string> asked;
  std::vector<Settled> settled;
  std::vector<round::JobFacts> described;
};

// The coordinator as one job of a job host (docs/guides/JOBS.md), with the enrolment key (so that
// Register demands a secret) and devices another coordinator admitted.
class CoordinatorAsJobTest : public CoordinatorTest {
 protected:
  void StartJob(round::PlanningGate* gate = nullptr) {
    job_name_ = "kbd";
    planning_gate_ = gate;
    Start();
  }

  static v1::RegisterRequest Request(const std::string& identity) {
    v1::RegisterRequest request;  // no credential: the admitting coordinator checked it
    request.set_identity(identity);
    request.mutable_device()->set_num_samples(100);
    return request;
  }

  // `identity` admitted elsewhere as client "id-<identity>" with token "tok-<identity>".
  v1::RegisterResponse Admit(const std::string& identity) {
    absl::StatusOr<v1::RegisterResponse> r =
        coordinator_->RegisterAdmitted(Request(identity), "id-" + identity, "tok-" + identity, kT0);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::RegisterResponse();
  }

  // The profile of `client_id` in `status` (which must outlive the pointer), or null.
  static const v1::ClientProfile* ProfileOf(const v1::GetStatusResponse& status,
                                            const std::string& client_id) {
    for (const v1::ClientSummary& c : status.clients()) {
      if (c.client_id() == client_id) return &c.profile();
    }
    return nullptr;
  }
};

TEST_F(CoordinatorAsJobTest, RegisterAdmittedKeepsTheAdmittingIdsAndSkipsAdmission) {
  StartJob();
  // Register itself refuses the unprovisioned device...
  EXPECT_THAT(coordinator_->Register(Request("a"), kT0),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  // ...which another coordinator admitted: its client id and token hold here.
  v1::RegisterResponse a = Admit("a");
  EXPECT_EQ(a.client_id(), "id-a");
  EXPECT_EQ(a.session_token(), "tok-a");
  EXPECT_TRUE(a.credential().empty());
  EXPECT_GT(a.heartbeat_interval_ms(), 0);
  EXPECT_TRUE(a.has_transport());
  v1::HeartbeatRequest beat;
  beat.set_client_id("id-a");
  beat.set_session_token("tok-a");
  EXPECT_OK(coordinator_->Heartbeat(beat, kT0).status());
  EXPECT_OK(Poll(a, kT0).status());

  // Re-registration: the same client and profile, a new session.
  ASSERT_OK_AND_ASSIGN(v1::RegisterResponse again,
                       coordinator_->RegisterAdmitted(Request("a"), "id-a", "tok-a2", kT0));
  EXPECT_EQ(again.client_id(), "id-a");
  EXPECT_THAT(Poll(a, kT0).status(), StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_OK(Poll(again, kT0).status());
  EXPECT_EQ(coordinator_->GetStatus(1).registered_clients(), 1);

  // The identity under a newer client id (the admitting coordinator forgot it): one client.
  ASSERT_OK_AND_ASSIGN(v1::RegisterResponse renamed,
                       coordinator_->RegisterAdmitted(Request("a"), "id-a-new", "tok-a3", kT0));
  EXPECT_EQ(renamed.client_id(), "id-a-new");
  EXPECT_THAT(Poll(again, kT0).status(),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_OK(Poll(renamed, kT0).status());
  v1::GetStatusResponse status = coordinator_->GetStatus(1);
  ASSERT_EQ(status.clients_size(), 1);
  EXPECT_EQ(status.clients(0).client_id(), "id-a-new");
}

TEST_F(CoordinatorAsJobTest, RegisterAdmittedRefusesBadFiguresAndEmptyIds) {
  raw_.mutable_security()->set_max_num_samples(1000);
  StartJob();
  v1::RegisterRequest negative = Request("a");
  negative.mutable_device()->set_compute_ms_per_sample(-1);
  EXPECT_THAT(coordinator_->RegisterAdmitted(negative, "id-a", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative")));
  v1::RegisterRequest many = Request("a");
  many.mutable_device()->set_num_samples(5000);
  EXPECT_THAT(coordinator_->RegisterAdmitted(many, "id-a", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_num_samples")));
  EXPECT_THAT(coordinator_->RegisterAdmitted(Request("a"), "", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(coordinator_->RegisterAdmitted(Request("a"), "id-a", "", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(coordinator_->RegisterAdmitted(Request(""), "id-a", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  v1::RegisterRequest short_key = Request("a");
  short_key.set_signing_public_key("short");
  EXPECT_THAT(coordinator_->RegisterAdmitted(short_key, "id-a", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  Admit("a");
  // One client id is one identity.
  EXPECT_THAT(coordinator_->RegisterAdmitted(Request("b"), "id-a", "tok", kT0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another identity")));
  EXPECT_EQ(coordinator_->GetStatus(1).registered_clients(), 1);
}

TEST_F(CoordinatorAsJobTest, RegisterAdmittedBindsTheRequestsSigningKey) {
  StartJob();
  v1::RegisterRequest first = Request("a");
  first.set_signing_public_key(std::string(32, 'x'));
  ASSERT_OK(coordinator_->RegisterAdmitted(first, "id-a", "tok", kT0).status());
  v1::GetStatusResponse status = coordinator_->GetStatus(1);
  const v1::ClientProfile* profile = ProfileOf(status, "id-a");
  ASSERT_NE(profile, nullptr);
  EXPECT_EQ(profile->signing_public_key(), std::string(32, 'x'));
  // Another key replaces it (Register would refuse it: the admitting coordinator decided).
  v1::RegisterRequest second = Request("a");
  second.set_signing_public_key(std::string(32, 'y'));
  ASSERT_OK(coordinator_->RegisterAdmitted(second, "id-a", "tok2", kT0).status());
  status = coordinator_->GetStatus(1);
  profile = ProfileOf(status, "id-a");
  ASSERT_NE(profile, nullptr);
  EXPECT_EQ(profile->signing_public_key(), std::string(32, 'y'));
}

TEST_F(CoordinatorAsJobTest, AGateThatRefusesADeviceKeepsItOutOfEveryRound) {
  raw_.set_clients_per_round(1);
  raw_.set_min_online_clients(1);
  RecordingGate gate;
  gate.refused.insert("id-b");
  StartJob(&gate);
  v1::RegisterResponse a = Admit("a");
  v1::RegisterResponse b = Admit("b");
  absl::Time now = kT0;
  for (int round = 1; round <= 3; ++round) {
    coordinator_->Tick(now);
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse pb, Poll(b, now));
    EXPECT_FALSE(pb.has_task()) << "round " << round;
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse pa, Poll(a, now));
    ASSERT_TRUE(pa.has_task()) << "round " << round;
    now += absl::Seconds(1);
    ASSERT_OK(Upload(a, pa.task(), TwoTensorModel(1, 1), 10, now));
    coordinator_->Tick(now);
    ASSERT_EQ(coordinator_->committed_round(), round);
  }
  EXPECT_TRUE(coordinator_->finished());
  EXPECT_TRUE(gate.asked.contains("id-b"));
  EXPECT_TRUE(gate.asked.contains("id-a"));
}

TEST_F(CoordinatorAsJobTest, SettleIsToldTheClientsInFlightAndTheDemand) {
  RecordingGate gate;
  StartJob(&gate);
  coordinator_->Tick(kT0);  // nobody yet: waits to plan K = 2 (min_online_clients 2)
  ASSERT_FALSE(gate.settled.empty());
  EXPECT_TRUE(gate.settled.back().in_flight.empty());
  EXPECT_EQ(gate.settled.back().demand, 2);
  v1::RegisterResponse a = Admit("a");
  v1::RegisterResponse b = Admit("b");
  coordinator_->Tick(kT0);  // planned: both in flight, nothing more asked for
  EXPECT_THAT(gate.settled.back().in_flight, ElementsAre("id-a", "id-b"));
  EXPECT_EQ(gate.settled.back().demand, 0);
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse pa, Poll(a, kT0));
  ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse pb, Poll(b, kT0));
  ASSERT_OK(Upload(a, pa.task(), TwoTensorModel(1, 1), 10, kT0 + absl::Seconds(1)));
  EXPECT_THAT(gate.settled.back().in_flight, ElementsAre("id-b"));
  ASSERT_OK(Upload(b, pb.task(), TwoTensorModel(1, 1), 10, kT0 + absl::Seconds(1)));
  coordinator_->Tick(kT0 + absl::Seconds(1));
  ASSERT_EQ(coordinator_->committed_round(), 1);
  // Round 2 is planned at once (both still reachable): in flight again.
  EXPECT_THAT(gate.settled.back().in_flight, ElementsAre("id-a", "id-b"));
}

// The job's facts reach its gate when it first reports and at most every 5 s while it asks for
// devices, and the gate's reason reaches the cohort the status shows.
TEST_F(CoordinatorAsJobTest, DescribesItselfToItsGateAndRecordsTheMatchReason) {
  RecordingGate gate;
  StartJob(&gate);
  coordinator_->Tick(kT0);
  ASSERT_EQ(gate.described.size(), 1u);
  EXPECT_EQ(gate.described[0].clients_per_round, 2);
  EXPECT_EQ(gate.described[0].deadline_s, 30);
  EXPECT_EQ(gate.described[0].rounds_remaining, 3);
  EXPECT_TRUE(gate.described[0].devices.empty());
  Admit("b");
  coordinator_->Tick(kT0 + absl::Seconds(1));  // one device of the two it needs: still asks
  EXPECT_EQ(gate.described.size(), 1u);
  coordinator_->Tick(kT0 + absl::Seconds(5));
  ASSERT_EQ(gate.described.size(), 2u);
  ASSERT_EQ(gate.described[1].devices.size(), 1u);
  EXPECT_EQ(gate.described[1].devices[0].client_id, "id-b");
  EXPECT_GT(gate.described[1].devices[0].predicted_round_s, 0);
  Admit("a");  // at kT0, behind the last description: may describe again
  const size_t described = gate.described.size();
  coordinator_->Tick(kT0 + absl::Seconds(6));  // plans round 1: asks for nothing more
  EXPECT_EQ(gate.described.size(), described);
  const v1::GetStatusResponse status = coordinator_->GetStatus(1);
  ASSERT_EQ(status.recent_rounds_size(), 1);
  ASSERT_EQ(status.recent_rounds(0).cohort_size(), 2);
  for (const v1::SelectionReason& r : status.recent_rounds(0).cohort()) {
    EXPECT_EQ(r.match_reason(), "offered to kbd: " + r.client_id());
  }
}

TEST_F(CoordinatorAsJobTest, GetStatusOfAnswersItsOwnJobOnly) {
  StartJob();
  Admit("a");
  v1::GetStatusRequest request;
  ASSERT_OK_AND_ASSIGN(v1::GetStatusResponse mine, coordinator_->GetStatusOf(request));
  EXPECT_EQ(mine.registered_clients(), 1);
  EXPECT_EQ(mine.clients_size(), 1);
  request.set_job("kbd");
  request.set_omit_clients(true);
  ASSERT_OK_AND_ASSIGN(mine, coordinator_->GetStatusOf(request));
  EXPECT_EQ(mine.registered_clients(), 1);
  EXPECT_EQ(mine.clients_size(), 0);
  request.set_job("ranker");
  EXPECT_THAT(coordinator_->GetStatusOf(request),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no job named ranker")));
  EXPECT_FALSE(coordinator_->privacy_budget_exhausted());
}

TEST_F(CoordinatorAsJobTest, AdoptedSystemProfilesReplaceTheSystemFieldsOnly) {
  StartJob();
  Admit("a");
  Admit("b");
  v1::ClientProfile system;
  system.set_client_id("id-a");
  system.set_compute_ms_per_sample(12.5);
  system.set_upload_kbps(800);
  system.set_download_kbps(9000);
  system.set_availability(0.25);
  system.set_measured_tasks(4);
  system.set_statistical_utility(99);  // per job: not adopted
  v1::ClientProfile unknown;
  unknown.set_client_id("nobody");
  unknown.set_compute_ms_per_sample(1);
  coordinator_->AdoptSystemProfiles({system, unknown});

  const std::vector<v1::ClientProfile> shared =
      coordinator_->SystemProfiles({"id-a", "nobody", "id-b"});
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(shared[0].client_id(), "id-a");
  EXPECT_EQ(shared[0].compute_ms_per_sample(), 12.5);
  EXPECT_EQ(shared[0].upload_kbps(), 800);
  EXPECT_EQ(shared[0].download_kbps(), 9000);
  EXPECT_EQ(shared[0].availability(), 0.25);
  EXPECT_EQ(shared[0].measured_tasks(), 4);
  EXPECT_EQ(shared[0].statistical_utility(), 0);
  EXPECT_EQ(shared[1].client_id(), "id-b");
  EXPECT_EQ(shared[1].compute_ms_per_sample(), 0);
  v1::GetStatusResponse status = coordinator_->GetStatus(1);
  const v1::ClientProfile* a = ProfileOf(status, "id-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->compute_ms_per_sample(), 12.5);
  EXPECT_EQ(a->statistical_utility(), 0);
  EXPECT_EQ(a->identity(), "a");
}

}  // namespace
}  // namespace fedsched
