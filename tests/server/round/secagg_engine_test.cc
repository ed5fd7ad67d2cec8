// The round engine with secure aggregation on (docs/guides/SECURE_AGGREGATION.md "Over the wire"):
// a round's cohort runs the protocol's steps through RoundEngine::SecAggStep and masked uploads
// through FoldUpdates; the committed model is FedAvg of the contributors within the
// quantisation bound, with dropouts at every step; below the threshold the round fails with the
// model unchanged; plain updates, replayed and foreign messages are refused.
#include <cmath>
#include <set>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "secagg/client.h"
#include "secagg/quantize.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"
#include "tests/server/round/engine_testing.h"

namespace fedsched::round {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;
using testing::RegisterDevices;

constexpr int kParams = 16;

class AllOnline : public Presence {
 public:
  bool IsReachable(ClientIndex, double) const override { return true; }
  void CollectReachable(double, std::vector<ClientIndex>* out) const override {
    out->clear();
    for (ClientIndex i = 0; i < n; ++i) out->push_back(i);
  }
  ClientIndex n = 0;
};

v1::Model Zeros() {
  v1::Model m;
  v1::Tensor* a = m.add_tensors();
  a->set_name("a");
  a->add_shape(kParams / 2);
  v1::Tensor* b = m.add_tensors();
  b->set_name("b");
  b->add_shape(kParams / 2);
  for (int i = 0; i < kParams / 2; ++i) {
    a->add_data(0.5f);
    b->add_data(-0.5f);
  }
  return m;
}

// Client i's update: small values that differ per client and coordinate.
std::vector<float> UpdateOf(int i) {
  std::vector<float> u(kParams);
  for (int j = 0; j < kParams; ++j) u[j] = 0.01f * static_cast<float>((i + 1) * (j % 5) - 3);
  return u;
}
int64_t ExamplesOf(int i) { return 4 + 2 * (i % 3); }  // 4, 6 or 8 of at most 8

// The step before which a cohort member stops answering; kForge: it answers every step but
// sends random bytes as its sealed shares (docs/guides/SECURE_AGGREGATION.md "A malicious member").
// kImpostor advertises keys signed with another member's signing key (speaking for itself with a
// key that is not bound to its identity).
enum Drop {
  kNone,
  kBeforeAdvertise,
  kBeforeShare,
  kBeforeMasked,
  kBeforeUnmask,
  kForge,
  kImpostor
};

class SecAggEngineTest : public ::testing::Test {
 protected:
  void Start(int k, double overcommit, int min_updates, bool central_dp = false, int bits = 0) {
    v1::ServerConfig raw;
    raw.set_clients_per_round(k);
    raw.set_min_updates(min_updates);
    raw.set_min_online_clients(min_updates);
    raw.set_num_rounds(3);
    raw.set_round_deadline_s(100);
    raw.set_round_closing(v1::ROUND_CLOSING_FIRST_K);
    raw.mutable_selection()->set_overcommit(overcommit);
    raw.mutable_training()->set_local_steps(2);
    raw.mutable_training()->set_batch_size(4);
    raw.mutable_aggregation()->set_clip_update_norm(10);
    raw.mutable_secure_aggregation()->set_enabled(true);
    raw.mutable_secure_aggregation()->set_bits_per_element(bits);
    if (central_dp) {
      v1::PrivacyConfig* dp = raw.mutable_privacy();
      dp->set_mode(v1::PrivacyConfig::MODE_CENTRAL);
      dp->set_noise_multiplier(1e-6);  // the sum stays readable to a test
      dp->set_clip_norm(10);
      dp->set_population_size(1000);
    }
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveRoundConfig(raw));
    EngineOptions options;
    options.config = config;
    options.model = Zeros();
    options.presence = &presence_;
    ASSERT_OK_AND_ASSIGN(engine_, RoundEngine::Create(std::move(options)));
    presence_.n = static_cast<ClientIndex>(std::ceil(k * overcommit - 1e-9));
    ASSERT_OK(RegisterDevices(*engine_, static_cast<int>(presence_.n)));
    ASSERT_OK(engine_->Publish(0, engine_->model(), nullptr));
    engine_->Advance(0);
    tasks_ = engine_->TakeNewTasks();
    ASSERT_EQ(tasks_.size(), presence_.n);
    for (const Task* t : tasks_) {
      secagg::Bytes32 entropy{};
      entropy[0] = static_cast<uint8_t>(t->secagg.index() + 1);
      // The device's key, bound to its identity as registration binds it.
      secagg::Bytes32 seed{};
      seed[0] = static_cast<uint8_t>(t->index + 1);
      ASSERT_OK_AND_ASSIGN(secagg::SigningKey key, secagg::SigningKey::FromSeed(seed));
      ASSERT_OK(engine_->mutable_book().SetSigningPublicKey(t->index, key.public_key()));
      identities_.push_back({engine_->book().profile(t->index).client_id(), key});
      ASSERT_OK_AND_ASSIGN(secagg::SecAggClient c,
                           secagg::SecAggClient::Create(t->secagg.params(), t->secagg.index(),
                                                        entropy, identities_.back()));
      clients_.push_back(std::move(c));
    }
  }

  // Member i's advertisement as an impostor makes it: its own index and client id, signed with
  // member `other`'s key.
  v1::SecAggAdvertise ImpostorAdvertisement(size_t i, size_t other) {
    secagg::MemberIdentity as{identities_[i].client_id, identities_[other].signing_key};
    absl::StatusOr<secagg::SecAggClient> c = secagg::SecAggClient::Create(
        tasks_[i]->secagg.params(), tasks_[i]->secagg.index(), secagg::Bytes32{77}, as);
    EXPECT_OK(c.status());
    return *c->Advertise();
  }

  v1::SecAggStepRequest Ask(const Task& t) {
    v1::SecAggStepRequest r;
    r.set_task_id(t.task_id);
    return r;
  }

  // Runs the round with member i of the cohort stopping as drops[i] says; steps close by their
  // deadlines when someone is silent. Returns the rounds closed by the last Advance.
  std::vector<ClosedRound> Run(const std::vector<Drop>& drops) {
    const double timeout = engine_->config().secure_aggregation().step_timeout_s();
    double now = 1;
    std::vector<v1::SecAggStepResponse> next(tasks_.size());
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (drops[i] == kBeforeAdvertise) continue;
      v1::SecAggStepRequest r = Ask(*tasks_[i]);
      if (drops[i] == kImpostor) {
        *r.mutable_advertise() = ImpostorAdvertisement(i, (i + 1) % tasks_.size());
        EXPECT_THAT(engine_->SecAggStep(tasks_[i]->index, r, now),
                    StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("bound")));
        continue;
      }
      *r.mutable_advertise() = *clients_[i].Advertise();
      EXPECT_OK(engine_->SecAggStep(tasks_[i]->index, r, now).status());
    }
    now += timeout;  // the silent member's step closes by its deadline
    engine_->Advance(now);
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (drops[i] == kBeforeAdvertise || drops[i] == kBeforeShare || drops[i] == kImpostor) {
        continue;
      }
      absl::StatusOr<v1::SecAggStepResponse> dir =
          engine_->SecAggStep(tasks_[i]->index, Ask(*tasks_[i]), now);
      EXPECT_OK(dir.status());
      EXPECT_TRUE(dir->has_key_directory());
      v1::SecAggStepRequest r = Ask(*tasks_[i]);
      *r.mutable_share_keys() = *clients_[i].ShareKeys(dir->key_directory());
      for (auto& share : *r.mutable_share_keys()->mutable_shares()) {
        if (drops[i] != kForge) continue;
        for (char& c : *share.mutable_ciphertext()) c = static_cast<char>(c ^ 0x5a);
      }
      EXPECT_OK(engine_->SecAggStep(tasks_[i]->index, r, now).status());
    }
    now += timeout;
    engine_->Advance(now);
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (drops[i] != kNone && drops[i] != kBeforeUnmask && drops[i] != kForge) continue;
      absl::StatusOr<v1::SecAggStepResponse> routed =
          engine_->SecAggStep(tasks_[i]->index, Ask(*tasks_[i]), now);
      EXPECT_OK(routed.status());
      const std::vector<float> u = UpdateOf(static_cast<int>(i));
      // FedAvg's weight n_k / example_scale, or 1 under DP (example_scale 0).
      const int64_t scale = tasks_[i]->secagg.example_scale();
      const double weight =
          scale > 0 ? static_cast<double>(ExamplesOf(static_cast<int>(i))) / scale : 1.0;
      absl::StatusOr<v1::SecAggMaskedInput> masked =
          clients_[i].MaskInput(routed->routed_shares(), u, weight);
      EXPECT_OK(masked.status());
      Update up;
      up.claim = {.index = tasks_[i]->index,
                  .task_id = tasks_[i]->task_id,
                  .round = 1,
                  .num_examples = ExamplesOf(static_cast<int>(i))};
      up.masked = &*masked;
      up.metrics.set_num_examples(up.claim.num_examples);
      up.now_s = now;
      EXPECT_OK(engine_->FoldUpdates({&up, 1})[0]);
      // Not yet counted as a success: the round has not unmasked.
      EXPECT_EQ(engine_->book().profile(tasks_[i]->index).successes(), 0);
      if (drops[i] != kForge) included_.insert(static_cast<int>(i));
    }
    now = 100;  // the round's deadline: its uploads close, the unmask step opens
    std::vector<ClosedRound> closed = engine_->Advance(now);
    if (!closed.empty()) return closed;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (drops[i] != kNone) continue;
      absl::StatusOr<v1::SecAggStepResponse> asked =
          engine_->SecAggStep(tasks_[i]->index, Ask(*tasks_[i]), now);
      EXPECT_OK(asked.status());
      EXPECT_TRUE(asked->has_unmask_request());
      v1::SecAggStepRequest r = Ask(*tasks_[i]);
      *r.mutable_unmask() = *clients_[i].Unmask(asked->unmask_request());
      EXPECT_OK(engine_->SecAggStep(tasks_[i]->index, r, now).status());
    }
    return engine_->Advance(now + timeout);
  }

  // FedAvg of the included members' updates: sum n_k u_k / sum n_k.
  std::vector<double> ExpectedMean() const {
    std::vector<double> mean(kParams, 0);
    double total = 0;
    for (int i : included_) {
      const std::vector<float> u = UpdateOf(i);
      for (int j = 0; j < kParams; ++j) mean[j] += static_cast<double>(ExamplesOf(i)) * u[j];
      total += static_cast<double>(ExamplesOf(i));
    }
    for (double& m : mean) m /= total;
    return mean;
  }

  void ExpectFedAvg(const v1::Model& model, double tolerance = 1e-5) {
    const std::vector<double> mean = ExpectedMean();
    for (int j = 0; j < kParams; ++j) {
      const float base = j < kParams / 2 ? 0.5f : -0.5f;
      const float got = model.tensors(j / (kParams / 2)).data(j % (kParams / 2));
      EXPECT_NEAR(got - base, mean[j], tolerance) << "coordinate " << j;
    }
  }

  AllOnline presence_;
  std::unique_ptr<RoundEngine> engine_;
  std::vector<const Task*> tasks_;
  std::vector<secagg::SecAggClient> clients_;
  std::vector<secagg::MemberIdentity> identities_;  // by cohort member
  std::set<int> included_;
};

TEST_F(SecAggEngineTest, CommitsFedAvgOfTheMaskedInputs) {
  Start(/*k=*/6, /*overcommit=*/1.0, /*min_updates=*/3);
  EXPECT_EQ(tasks_[0]->secagg.params().cohort_size(), 6u);
  EXPECT_EQ(tasks_[0]->secagg.example_scale(), 8);
  std::vector<ClosedRound> closed = Run(std::vector<Drop>(6, kNone));
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_EQ(closed[0].record.updates_accepted(), 6);
  ExpectFedAvg(*closed[0].commit.model);
}

// A member forging its shares: the others report it, the round commits FedAvg of the others, the
// forger's task fails and it is excluded from later cohorts; the others count as successful.
TEST_F(SecAggEngineTest, ForgedSharesLeaveTheirSenderOutAndChargeIt) {
  Start(/*k=*/5, /*overcommit=*/1.0, /*min_updates=*/3);  // complete graph, t = 3
  std::vector<Drop> drops(5, kNone);
  drops[2] = kForge;
  // The engine forgets a closed round's tasks: keep what is checked after it.
  const std::string forger_task = tasks_[2]->task_id;
  std::vector<ClientIndex> members;
  for (const Task* t : tasks_) members.push_back(t->index);
  std::vector<ClosedRound> closed = Run(drops);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_EQ(closed[0].record.updates_accepted(), 4);
  EXPECT_THAT(closed[0].record.accepted_task_ids(),
              ::testing::Not(::testing::Contains(forger_task)));
  ExpectFedAvg(*closed[0].commit.model);
  for (size_t i = 0; i < members.size(); ++i) {
    const v1::ClientProfile& p = engine_->book().profile(members[i]);
    SCOPED_TRACE(i);
    EXPECT_EQ(p.successes(), i == 2 ? 0 : 1);
    EXPECT_EQ(p.consecutive_failures(), i == 2 ? 1 : 0);
    if (i == 2) {
      EXPECT_THAT(p.secagg_excluded(),
                  HasSubstr("key shares to 4 neighbour(s) did not authenticate"));
    } else {
      EXPECT_EQ(p.secagg_excluded(), "");
    }
  }
}

// A member advertising keys signed with another device's key is refused (UNAUTHENTICATED,
// counted as a "signature" refusal in the round record), its task fails, and the round commits
// FedAvg of the others.
TEST_F(SecAggEngineTest, AdvertisementSignedWithAnotherKeyIsRefusedAndCounted) {
  Start(/*k=*/5, /*overcommit=*/1.0, /*min_updates=*/3);
  std::vector<Drop> drops(5, kNone);
  drops[3] = kImpostor;
  const std::string impostor_task = tasks_[3]->task_id;
  const ClientIndex impostor = tasks_[3]->index;
  std::vector<ClosedRound> closed = Run(drops);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_EQ(closed[0].record.updates_accepted(), 4);
  EXPECT_THAT(closed[0].record.accepted_task_ids(),
              ::testing::Not(::testing::Contains(impostor_task)));
  ASSERT_EQ(closed[0].record.rejected_by_reason_size(), 1);
  EXPECT_EQ(closed[0].record.rejected_by_reason(0).reason(), "signature");
  EXPECT_EQ(closed[0].record.rejected_by_reason(0).count(), 1);
  ExpectFedAvg(*closed[0].commit.model);
  EXPECT_EQ(engine_->book().profile(impostor).consecutive_failures(), 1);
  std::vector<RefusalNote> notes = engine_->TakeRefusals();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].reason, RejectReason::kSignature);
  EXPECT_EQ(notes[0].task_id, impostor_task);
}

TEST_F(SecAggEngineTest, SurvivesDropoutsAtEveryStep) {
  // n = 12: the complete graph, t = 7; 1 + 1 + 2 + 1 drop, 7 answer the unmask request.
  Start(/*k=*/12, /*overcommit=*/1.0, /*min_updates=*/3);
  EXPECT_EQ(tasks_[0]->secagg.params().threshold(), 7u);
  std::vector<Drop> drops(12, kNone);
  drops[0] = kBeforeAdvertise;
  drops[3] = kBeforeShare;
  drops[5] = drops[6] = kBeforeMasked;
  drops[9] = kBeforeUnmask;
  std::vector<ClosedRound> closed = Run(drops);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_EQ(closed[0].record.updates_accepted(), 8);  // member 9's input counts: it was unmasked
  ExpectFedAvg(*closed[0].commit.model);
}

// Sixteen bits per element (docs/guides/SECURE_AGGREGATION.md "Bits per element"): the cohort's
// params carry b = 16, the masked inputs travel packed at 2 bytes an element, and the round
// commits FedAvg of the contributors within the 16-bit bound with dropouts after sharing keys and
// before unmasking.
TEST_F(SecAggEngineTest, SixteenBitsCommitFedAvgWithDropouts) {
  Start(/*k=*/8, /*overcommit=*/1.0, /*min_updates=*/3, /*central_dp=*/false, /*bits=*/16);
  EXPECT_EQ(tasks_[0]->secagg.params().bits_per_element(), 16u);
  std::vector<Drop> drops(8, kNone);
  drops[2] = kBeforeMasked;
  drops[5] = kBeforeUnmask;
  std::vector<ClosedRound> closed = Run(drops);
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_EQ(closed[0].record.updates_accepted(), 7);
  // The bound on the weighted sum, divided by the contributors' total weight (n_k / 8).
  double total_weight = 0;
  for (int i : included_) total_weight += static_cast<double>(ExamplesOf(i)) / 8;
  ExpectFedAvg(*closed[0].commit.model, secagg::ErrorBound(8, 10, 16) / total_weight);
}

TEST_F(SecAggEngineTest, FewerThanThresholdFailsTheRoundWithTheModelUnchanged) {
  Start(/*k=*/6, /*overcommit=*/1.0, /*min_updates=*/1);  // t = 4 of 6
  std::vector<Drop> drops(6, kNone);
  drops[1] = drops[2] = drops[4] = kBeforeMasked;
  std::vector<ClosedRound> closed = Run(drops);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FALSE(closed[0].committed);
  EXPECT_THAT(closed[0].failure_reason, HasSubstr("secure aggregation"));
  EXPECT_EQ(engine_->version(), 0);
  EXPECT_FLOAT_EQ(engine_->model()->tensors(0).data(0), 0.5f);
}

TEST_F(SecAggEngineTest, CentralPrivacyNoisesTheUnmaskedSumAndAccountsTheRound) {
  // Central DP over a secure sum: every update weighs 1, the server adds its noise to the
  // unmasked sum and divides by K (the fixed denominator), and the round is accounted.
  Start(/*k=*/6, /*overcommit=*/1.0, /*min_updates=*/3, /*central_dp=*/true);
  EXPECT_EQ(tasks_[0]->secagg.example_scale(), 0);
  EXPECT_DOUBLE_EQ(tasks_[0]->secagg.params().clip_norm(), 10);
  std::vector<ClosedRound> closed = Run(std::vector<Drop>(6, kNone));
  ASSERT_EQ(closed.size(), 1u);
  ASSERT_TRUE(closed[0].committed) << closed[0].failure_reason;
  EXPECT_GT(closed[0].record.dp_epsilon(), 0);
  // Uniform weights: the plain mean of the six updates (noise of std 1e-5 / 6 is negligible).
  for (int j = 0; j < kParams; ++j) {
    double mean = 0;
    for (int i = 0; i < 6; ++i) mean += UpdateOf(i)[j] / 6.0;
    const float base = j < kParams / 2 ? 0.5f : -0.5f;
    EXPECT_NEAR(closed[0].commit.model->tensors(j / (kParams / 2)).data(j % (kParams / 2)) - base,
                mean, 1e-4)
        << j;
  }
}

TEST_F(SecAggEngineTest, RefusesPlainUpdatesReplaysAndForeignMessages) {
  Start(/*k=*/4, /*overcommit=*/1.0, /*min_updates=*/3);
  const Task& t0 = *tasks_[0];
  v1::SecAggStepRequest r = Ask(t0);
  *r.mutable_advertise() = *clients_[0].Advertise();
  ASSERT_OK(engine_->SecAggStep(t0.index, r, 1).status());
  // The same advertisement again (a replay): refused, the first one stands.
  EXPECT_THAT(engine_->SecAggStep(t0.index, r, 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already sent")));
  // Another client's task: refused.
  EXPECT_THAT(engine_->SecAggStep(tasks_[1]->index, r, 1),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("another client")));
  // A message of another round: refused by the protocol, and the member is out.
  v1::SecAggStepRequest stale = Ask(*tasks_[1]);
  *stale.mutable_advertise() = *clients_[1].Advertise();
  stale.mutable_advertise()->set_round_id(99);
  EXPECT_FALSE(engine_->SecAggStep(tasks_[1]->index, stale, 1).ok());
  EXPECT_TRUE(engine_->FindTask(tasks_[1]->task_id)->failed);
  // A plain update: refused before the key steps close, and it never reaches the aggregator.
  v1::Model delta = Zeros();
  Update up;
  up.claim = {.index = t0.index, .task_id = t0.task_id, .round = 1, .num_examples = 4};
  up.delta = &delta;
  up.metrics.set_num_examples(4);
  EXPECT_THAT(engine_->FoldUpdates({&up, 1})[0],
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("key steps")));
  EXPECT_EQ(engine_->aggregator().num_updates(), 0);
}

}  // namespace
}  // namespace fedsched::round
