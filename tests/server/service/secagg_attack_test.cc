// Secure aggregation with a malicious member, against a real CoordinatorService on 127.0.0.1
// (docs/guides/SECURE_AGGREGATION.md "A malicious member"): each member runs the protocol core's
// secagg::SecAggClient over raw SecAggStep and UploadUpdate calls, as the SDK does; the attacker
// replaces its sealed shares with random bytes, floods a share_keys message, speaks for another
// member, or signs its advertisement with a key not bound to its identity.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "secagg/client.h"
#include "secagg/signing.h"
#include "secagg/update_vector.h"
#include "server/cli/status_format.h"
#include "server/enroll_store_ops.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FromGrpc;
using ::fedsched::testing::HeartbeatRaw;
using ::fedsched::testing::PatternModel;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::SetDeadline;
using ::fedsched::testing::StatusIs;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;
using ::fedsched::testing::UploadRaw;
using ::testing::HasSubstr;

// How a member behaves in its secure-aggregation tasks.
enum class Behaviour {
  kHonest,
  kForgeShares,      // random bytes in place of every sealed share (the finding)
  kForgeSomeShares,  // random bytes in place of all but one of its sealed shares
  kFloodShares,      // a share_keys message of 200,000 shares (5 MB)
  kSpeakForOthers,   // advertises keys in the name of another member
  kSignAsAnother,    // signs its advertisement with another member's (stolen) signing key
  kForgeSigningKey,  // signs its advertisement with a key of its own making, not the bound one
};

// Member i's long-term signing key (deterministic); `forged` gives a key never registered.
secagg::SigningKey MemberKey(size_t i, bool forged = false) {
  secagg::Bytes32 seed{};
  seed[0] = static_cast<uint8_t>(i + 1);
  seed[1] = forged ? 0xff : 0;
  return *secagg::SigningKey::FromSeed(seed);
}

absl::StatusOr<v1::SecAggStepResponse> StepRaw(v1::Coordinator::Stub& stub, const Session& who,
                                               const v1::SecAggStepRequest& request) {
  v1::SecAggStepRequest sent = request;
  sent.set_client_id(who.client_id);
  sent.set_session_token(who.token);
  v1::SecAggStepResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(stub.SecAggStep(&context, sent, &response)));
  return response;
}

// Set when a test ends: members stop waiting.
std::atomic<bool> g_stop{false};

// Sends `request`, then asks again with empty requests until the answer is `want` or done.
absl::StatusOr<v1::SecAggStepResponse> Exchange(v1::Coordinator::Stub& stub, const Session& who,
                                                v1::SecAggStepRequest request,
                                                v1::SecAggStepResponse::NextCase want) {
  const absl::Time end = absl::Now() + absl::Seconds(120);
  while (absl::Now() < end && !g_stop) {
    FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggStepResponse response, StepRaw(stub, who, request));
    if (response.next_case() == want || response.has_done()) return response;
    request.clear_message();
    absl::SleepFor(absl::Milliseconds(std::clamp<int64_t>(response.retry_after_ms(), 10, 200)));
  }
  return absl::DeadlineExceededError("no answer in 120 s, or the test ended");
}

// One task of a secure-aggregation round: advertise, share keys, upload the masked input (an
// update of 0.01 everywhere), answer the unmask request.
// `key` is the key the member signs with (its own, unless it attacks with another).
absl::Status RunTask(v1::Coordinator::Stub& stub, const Session& who, const v1::Task& task,
                     Behaviour behaviour, uint32_t seed, const secagg::SigningKey& key) {
  const v1::SecAggTask& info = task.secagg();
  secagg::Bytes32 entropy{};
  entropy[0] = static_cast<uint8_t>(seed);
  entropy[1] = static_cast<uint8_t>(task.round());
  FEDSCHED_ASSIGN_OR_RETURN(
      secagg::SecAggClient client,
      secagg::SecAggClient::Create(info.params(), info.index(), entropy,
                                   secagg::MemberIdentity{who.client_id, key}));
  v1::SecAggStepRequest request;
  request.set_task_id(task.task_id());
  FEDSCHED_ASSIGN_OR_RETURN(*request.mutable_advertise(), client.Advertise());
  if (behaviour == Behaviour::kSpeakForOthers) {
    request.mutable_advertise()->set_sender((info.index() + 1) % info.params().cohort_size());
  }
  FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggStepResponse directory,
                            Exchange(stub, who, request, v1::SecAggStepResponse::kKeyDirectory));
  if (directory.has_done()) return absl::AbortedError("round closed");
  request.clear_advertise();
  FEDSCHED_ASSIGN_OR_RETURN(*request.mutable_share_keys(),
                            client.ShareKeys(directory.key_directory()));
  std::mt19937 rng(seed);
  if (behaviour == Behaviour::kForgeShares || behaviour == Behaviour::kForgeSomeShares) {
    const int keep = behaviour == Behaviour::kForgeSomeShares ? 1 : 0;
    for (int k = keep; k < request.share_keys().shares_size(); ++k) {
      auto* share = request.mutable_share_keys()->mutable_shares(k);
      for (char& c : *share->mutable_ciphertext()) c = static_cast<char>(rng());
    }
  } else if (behaviour == Behaviour::kFloodShares) {
    v1::SecAggShareKeys& keys = *request.mutable_share_keys();
    v1::SecAggEncryptedShare small = keys.shares(0);
    small.set_ciphertext(std::string(16, 'x'));  // about 25 bytes a share: 5 MB in all
    while (keys.shares_size() < 200000) *keys.add_shares() = small;
  }
  FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggStepResponse routed,
                            Exchange(stub, who, request, v1::SecAggStepResponse::kRoutedShares));
  if (routed.has_done()) return absl::AbortedError("round closed");
  const std::vector<float> update(info.params().vector_length(), 0.01f);
  FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggMaskedInput masked,
                            client.MaskInput(routed.routed_shares(), update,
                                             secagg::MaskWeight(10, info.example_scale())));
  FEDSCHED_RETURN_IF_ERROR(
      UploadRaw(stub, UploadMessages(who, task, masked.SerializeAsString(), 10, 1 << 16)));
  v1::SecAggStepRequest ask;
  ask.set_task_id(task.task_id());
  FEDSCHED_ASSIGN_OR_RETURN(v1::SecAggStepResponse asked,
                            Exchange(stub, who, ask, v1::SecAggStepResponse::kUnmaskRequest));
  if (asked.has_done()) return absl::OkStatus();
  FEDSCHED_ASSIGN_OR_RETURN(*ask.mutable_unmask(), client.Unmask(asked.unmask_request()));
  return Exchange(stub, who, ask, v1::SecAggStepResponse::kDone).status();
}

class SecAggAttackTest : public ::testing::Test {
 protected:
  SecAggAttackTest() {
    raw_.set_clients_per_round(4);
    raw_.set_min_updates(3);
    raw_.set_min_online_clients(3);
    raw_.set_num_rounds(3);
    raw_.set_round_deadline_s(60);
    raw_.set_heartbeat_interval_ms(1000);
    raw_.set_missed_heartbeats(60);
    raw_.mutable_selection()->set_overcommit(1.0);
    raw_.mutable_training()->set_local_steps(1);
    raw_.mutable_training()->set_batch_size(10);
    raw_.mutable_secure_aggregation()->set_enabled(true);
    raw_.mutable_secure_aggregation()->set_step_timeout_s(60);
  }

  ~SecAggAttackTest() override {
    stop_ = true;
    g_stop = true;
    for (std::thread& t : members_) t.join();
    stop_ticker_ = true;
    if (ticker_.joinable()) ticker_.join();
    g_stop = false;
  }

  // Starts the server, registers the members (the attacker among them) before the first tick,
  // so that the first round's cohort is all of them, then ticks and runs each member.
  void Start(const std::vector<Behaviour>& behaviours) {
    TestServer::Options options;
    options.config = raw_;
    options.initial_model = PatternModel({8, 4});
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(std::move(options)));
    stub_ = server_->NewStub();
    for (size_t i = 0; i < behaviours.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(Session who, RegisterRaw(*stub_, absl::StrCat("secagg-member-", i), 10,
                                                    nullptr, MemberKey(i).public_key()));
      sessions_.push_back(who);
    }
    for (size_t i = 0; i < behaviours.size(); ++i) {
      members_.emplace_back([this, i, b = behaviours[i]] { RunMember(i, b); });
    }
    ticker_ = std::thread([this] {
      while (!stop_ticker_) {
        server_->Tick();
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }

  void RunMember(size_t i, Behaviour behaviour) {
    auto stub = server_->NewStub();
    const Session& who = sessions_[i];
    const secagg::SigningKey key = behaviour == Behaviour::kSignAsAnother
                                       ? MemberKey((i + 1) % sessions_.size())
                                       : MemberKey(i, behaviour == Behaviour::kForgeSigningKey);
    while (!stop_) {
      (void)HeartbeatRaw(*stub, who);
      absl::StatusOr<v1::PollTaskResponse> polled = PollRaw(*stub, who);
      if (polled.ok() && polled->has_task()) {
        const absl::Status s =
            RunTask(*stub, who, polled->task(), behaviour, static_cast<uint32_t>(i + 1), key);
        absl::MutexLock lock(&mu_);
        results_[i].push_back(s);
      } else {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
  }

  int64_t Committed() { return server_->coordinator().GetStatus(0).committed_round(); }

  std::vector<absl::Status> ResultsOf(size_t i) {
    absl::MutexLock lock(&mu_);
    return results_[i];
  }

  v1::ServerConfig raw_;
  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::vector<Session> sessions_;
  std::vector<std::thread> members_;
  std::thread ticker_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stop_ticker_{false};
  absl::Mutex mu_;
  std::map<size_t, std::vector<absl::Status>> results_ ABSL_GUARDED_BY(mu_);
};

// The finding: a member sending random bytes as its sealed shares made every honest neighbour
// abort, the round fail and be re-planned with it: 0 rounds in 120 s. Now the neighbours report
// it, the round commits without it, it is charged (and the honest are not), later cohorts leave
// it out, and GetStatus / fedsched-status name it.
TEST_F(SecAggAttackTest, ForgedSharesCostNoRoundAndTheSenderIsExcludedAndNamed) {
  Start({Behaviour::kHonest, Behaviour::kHonest, Behaviour::kHonest, Behaviour::kForgeShares});
  ASSERT_TRUE(TestServer::WaitFor([&] { return Committed() >= 3; }, absl::Seconds(240)))
      << "committed " << Committed()
      << "; last plan: " << server_->coordinator().GetStatus(0).waiting_for();
  v1::GetStatusRequest request;
  request.set_recent_rounds(10);
  v1::GetStatusResponse status;
  grpc::ClientContext context;
  SetDeadline(&context);
  ASSERT_TRUE(stub_->GetStatus(&context, request, &status).ok());
  const std::string attacker = sessions_[3].client_id;
  int failed_rounds = 0;
  bool attacker_tasked = false;
  for (const v1::RoundRecord& r : status.recent_rounds()) {
    if (r.outcome() == v1::ROUND_OUTCOME_FAILED) ++failed_rounds;
    if (r.outcome() != v1::ROUND_OUTCOME_COMMITTED) continue;
    EXPECT_EQ(r.updates_accepted(), 3) << "round " << r.round();
    for (const v1::SelectionReason& c : r.cohort()) {
      if (c.client_id() != attacker) continue;
      EXPECT_FALSE(attacker_tasked) << "tasked again in round " << r.round();
      attacker_tasked = true;
    }
  }
  EXPECT_TRUE(attacker_tasked);  // in the first round, whose cohort was every member
  EXPECT_EQ(failed_rounds, 0);
  for (const v1::ClientSummary& c : status.clients()) {
    SCOPED_TRACE(c.client_id());
    if (c.client_id() == attacker) {
      EXPECT_THAT(c.profile().secagg_excluded(), HasSubstr("did not authenticate"));
      EXPECT_EQ(c.profile().successes(), 0);
      EXPECT_GE(c.profile().consecutive_failures(), 1);
    } else {
      EXPECT_EQ(c.profile().secagg_excluded(), "");
      EXPECT_EQ(c.profile().consecutive_failures(), 0);
      EXPECT_GE(c.profile().successes(), 3);
    }
  }
  EXPECT_THAT(cli::FormatStatus(status, {}),
              HasSubstr(absl::StrCat("secure aggregation excludes ", attacker)));
  // Without the client list (fedsched-status without --clients) the excluded member still comes.
  const v1::GetStatusResponse brief =
      server_->coordinator().GetStatus(0, /*include_clients=*/false);
  ASSERT_EQ(brief.clients_size(), 1);
  EXPECT_EQ(brief.clients(0).client_id(), attacker);
  EXPECT_THAT(cli::FormatStatus(brief, {}),
              HasSubstr(absl::StrCat("secure aggregation excludes ", attacker)));
  // The exclusion is persisted with the profile (a restarted server keeps it).
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ClientProfile> stored, server_->store().LoadProfiles());
  bool stored_excluded = false;
  for (const v1::ClientProfile& p : stored) {
    if (p.client_id() == attacker) stored_excluded = !p.secagg_excluded().empty();
  }
  EXPECT_TRUE(stored_excluded);
  for (size_t i = 0; i < 3; ++i) {
    for (const absl::Status& s : ResultsOf(i)) EXPECT_THAT(s, ::fedsched::testing::IsOk()) << i;
  }
}

// The worst case: forged shares to two of its three neighbours. The third opened its share and
// masked with it, and one holder cannot rebuild its mask key (t = 3): that round fails. It costs
// that round only: the forger is charged and excluded, and the round, planned again without it,
// commits.
TEST_F(SecAggAttackTest, ForgingToSomeNeighboursCostsAtMostOneRound) {
  Start({Behaviour::kHonest, Behaviour::kHonest, Behaviour::kHonest, Behaviour::kForgeSomeShares});
  ASSERT_TRUE(TestServer::WaitFor([&] { return Committed() >= 2; }, absl::Seconds(240)));
  const v1::GetStatusResponse status = server_->coordinator().GetStatus(10);
  int failed = 0;
  for (const v1::RoundRecord& r : status.recent_rounds()) {
    failed += r.outcome() == v1::ROUND_OUTCOME_FAILED ? 1 : 0;
    if (r.outcome() != v1::ROUND_OUTCOME_COMMITTED) continue;
    for (const v1::SelectionReason& c : r.cohort()) {
      EXPECT_NE(c.client_id(), sessions_[3].client_id) << "round " << r.round();
    }
  }
  EXPECT_LE(failed, 1);
  for (const v1::ClientSummary& c : status.clients()) {
    if (c.client_id() == sessions_[3].client_id) {
      EXPECT_THAT(c.profile().secagg_excluded(), HasSubstr("to 2 neighbour(s)"));
    }
  }
}

// A share_keys message of 200,000 shares (5 MB; one of 4.7 MB was accepted) is refused, naming
// the bound; the rounds go on without its sender.
TEST_F(SecAggAttackTest, OversizedShareKeysIsRefused) {
  Start({Behaviour::kHonest, Behaviour::kHonest, Behaviour::kHonest, Behaviour::kFloodShares});
  ASSERT_TRUE(TestServer::WaitFor([&] { return !ResultsOf(3).empty(); }, absl::Seconds(120)));
  EXPECT_THAT(ResultsOf(3)[0],
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sent 200000 shares; it has 3 advertised neighbours")));
  ASSERT_TRUE(TestServer::WaitFor([&] { return Committed() >= 1; }, absl::Seconds(120)));
}

// An advertisement in the name of another member is refused: the server binds each step message
// to the member of the authenticated session's task.
TEST_F(SecAggAttackTest, AMemberCannotSpeakForAnother) {
  Start({Behaviour::kHonest, Behaviour::kHonest, Behaviour::kHonest, Behaviour::kSpeakForOthers});
  ASSERT_TRUE(TestServer::WaitFor([&] { return !ResultsOf(3).empty(); }, absl::Seconds(120)));
  EXPECT_THAT(ResultsOf(3)[0],
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("not the task's")));
}

// Key advertisements are signed with the device's enrolment-bound key (Bonawitz et al., CCS 2017,
// section 6): one member signing with another device's stolen key and one signing with a key of
// its own making are refused (UNAUTHENTICATED, counted as "signature" refusals), are charged a
// failed task, and the honest members' rounds commit.
TEST_F(SecAggAttackTest, AdvertisementsNotSignedWithTheBoundKeyAreRefused) {
  raw_.set_clients_per_round(5);
  Start({Behaviour::kHonest, Behaviour::kHonest, Behaviour::kHonest, Behaviour::kSignAsAnother,
         Behaviour::kForgeSigningKey});
  ASSERT_TRUE(TestServer::WaitFor([&] { return Committed() >= 2; }, absl::Seconds(240)))
      << "committed " << Committed();
  for (size_t attacker : {3u, 4u}) {
    ASSERT_FALSE(ResultsOf(attacker).empty());
    EXPECT_THAT(ResultsOf(attacker)[0],
                StatusIs(absl::StatusCode::kUnauthenticated,
                         HasSubstr("other than the one bound to its identity")));
  }
  const v1::GetStatusResponse status = server_->coordinator().GetStatus(10);
  int signature_refusals = 0;
  for (const v1::RoundRecord& r : status.recent_rounds()) {
    for (const v1::RejectionCount& c : r.rejected_by_reason()) {
      if (c.reason() == "signature") signature_refusals += c.count();
    }
    if (r.outcome() == v1::ROUND_OUTCOME_COMMITTED) {
      EXPECT_GE(r.updates_accepted(), 3) << "round " << r.round();
    }
  }
  EXPECT_GE(signature_refusals, 2);
  for (const v1::ClientSummary& c : status.clients()) {
    SCOPED_TRACE(c.client_id());
    const bool attacker =
        c.client_id() == sessions_[3].client_id || c.client_id() == sessions_[4].client_id;
    EXPECT_EQ(c.profile().successes() == 0, attacker);
  }
  for (size_t i = 0; i < 3; ++i) {
    for (const absl::Status& s : ResultsOf(i)) EXPECT_THAT(s, ::fedsched::testing::IsOk()) << i;
  }
}

// The first proven registration binds the device's signing key in its persisted profile: another
// key for the enrolled identity is refused (before and after a restart) naming the recovery, and
// fedsched-enroll --reset_identity on the stopped store lets the next registration bind a new
// key.
TEST(SecAggSigningKeyTest, AKeyChangeIsRefusedUntilTheIdentityIsReset) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat("fedsched_signing_key_", ::getpid()))
          .string();
  std::filesystem::remove_all(dir);
  // A private store folder, as the server's operator keeps it (fedsched-enroll checks).
  std::filesystem::create_directory(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  const std::string old_key = MemberKey(0).public_key();
  const std::string new_key = MemberKey(0, /*forged=*/true).public_key();
  TestServer::Options options;
  options.config.set_clients_per_round(2);
  options.initial_model = PatternModel({4});
  options.store_dir = dir;
  {
    ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(options));
    auto stub = server->NewStub();
    ASSERT_OK(RegisterRaw(*stub, "dev-k", 10, nullptr, old_key).status());
    EXPECT_THAT(RegisterRaw(*stub, "dev-k", 10, nullptr, new_key),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         ::testing::AllOf(HasSubstr("bound to another signing key"),
                                          HasSubstr("--reset_identity=dev-k"))));
    ASSERT_OK(RegisterRaw(*stub, "dev-k", 10, nullptr, old_key).status());
    ASSERT_OK_AND_ASSIGN(std::vector<v1::ClientProfile> stored, server->store().LoadProfiles());
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0].signing_public_key(), old_key);
  }
  {
    ASSERT_OK_AND_ASSIGN(auto restarted, TestServer::Start(options));
    auto stub = restarted->NewStub();
    EXPECT_THAT(
        RegisterRaw(*stub, "dev-k", 10, nullptr, new_key),
        StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("bound to another signing key")));
  }
  ASSERT_EQ(ResetIdentity(dir, "dev-k"), 0);
  {
    ASSERT_OK_AND_ASSIGN(auto reset, TestServer::Start(options));
    auto stub = reset->NewStub();
    ASSERT_OK(RegisterRaw(*stub, "dev-k", 10, nullptr, new_key).status());
    EXPECT_THAT(
        RegisterRaw(*stub, "dev-k", 10, nullptr, old_key),
        StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("bound to another signing key")));
  }
  std::filesystem::remove_all(dir);
}

// Under trust on first use the first registrant binds its key on first use only: when the
// device's enrolment secret takes the name back, the device's own key replaces it, and the
// first registrant's key is refused from then on.
TEST(SecAggSigningKeyTest, AnEnrolmentSecretTakingANameBackRebindsTheKey) {
  TestServer::Options options;
  options.config.set_clients_per_round(2);
  options.config.mutable_security()->set_allow_trust_on_first_use(true);
  options.initial_model = PatternModel({4});
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(options));
  auto stub = server->NewStub();
  const std::string squatter_key = MemberKey(7, /*forged=*/true).public_key();
  const std::string device_key = MemberKey(7).public_key();
  const std::string none;
  ASSERT_OK(RegisterRaw(*stub, "dev-t", 10, &none, squatter_key).status());
  const std::string secret = ::fedsched::testing::TestCredential("dev-t");
  ASSERT_OK(RegisterRaw(*stub, "dev-t", 10, &secret, device_key).status());
  EXPECT_THAT(RegisterRaw(*stub, "dev-t", 10, &secret, squatter_key),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("bound to another signing key")));
}

}  // namespace
}  // namespace fedsched
