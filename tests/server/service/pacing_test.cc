// Pace steering in the coordinator (docs/ALGORITHMS.md "Pace steering"): idle
// devices of a large population are sent away with spread-out check-in times, are no candidates
// while away but stay available, and are back when they poll; a small population is not paced.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/service/coordinator.h"
#include "server/service/server_config.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1800000000);

v1::Model SmallModel() {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(3);
  for (float x : {0.5f, -1.0f, 2.0f}) w->add_data(x);
  return model;
}

class PacingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::fedsched::testing::FreshTestDir("fedsched_pacing");
    raw_.set_store_path(dir_.string());
    raw_.set_clients_per_round(2);
    raw_.set_min_updates(1);
    raw_.set_min_online_clients(1);  // 1 + 3 sqrt(1) = 4
    raw_.set_round_deadline_s(60);
    raw_.mutable_selection()->set_overcommit(1.0);  // pool = ceil(2 x 2 x 1.0) = 4
    raw_.mutable_security()->set_max_new_identities_per_peer_per_minute(-1);
  }
  void TearDown() override {
    coordinator_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start() {
    ASSERT_OK_AND_ASSIGN(v1::ServerConfig config, ResolveServerConfig(raw_));
    ASSERT_OK_AND_ASSIGN(store_, Store::Open({.path = dir_.string()}));
    CoordinatorOptions options;
    options.config = config;
    options.store = store_.get();
    options.initial_model = SmallModel();
    options.clock = [] { return kStart; };
    options.enrolment_key = testing::kTestEnrolmentKey;
    ASSERT_OK_AND_ASSIGN(coordinator_, Coordinator::Create(std::move(options)));
  }
  // Registers n devices at kStart and lets the coordinator count them (its pacer recounts the
  // population at most once a second).
  void RegisterFleet(int n) {
    for (int i = 0; i < n; ++i) {
      v1::RegisterRequest request;
      request.set_identity(absl::StrCat("dev-", i));
      request.mutable_device()->set_num_samples(50);
      ASSERT_OK_AND_ASSIGN(v1::RegisterResponse r,
                           coordinator_->Register(testing::Provisioned(request), kStart));
      fleet_.push_back(r);
    }
    coordinator_->Tick(kStart + absl::Milliseconds(10));
  }
  // Polls as a long poll ending now without a task would be answered: PollTask, then the pacer.
  // Returns retry_after_ms, or -1 when the device got a task.
  int64_t IdlePoll(const v1::RegisterResponse& who, absl::Time now) {
    v1::PollTaskRequest request;
    request.set_client_id(who.client_id());
    request.set_session_token(who.session_token());
    absl::StatusOr<v1::PollTaskResponse> r = coordinator_->PollTask(request, now);
    EXPECT_OK(r.status());
    if (!r.ok() || r->has_task()) return -1;
    return coordinator_->PaceIdleRetryMs(who.client_id(), now, /*unpaced_ms=*/0);
  }

  std::filesystem::path dir_;
  v1::ServerConfig raw_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<v1::RegisterResponse> fleet_;
};

TEST_F(PacingTest, SmallPopulationIsNotPaced) {
  Start();
  RegisterFleet(4);  // no larger than the pool of 4
  for (const v1::RegisterResponse& who : fleet_) {
    const int64_t retry = IdlePoll(who, kStart + absl::Seconds(1));
    EXPECT_TRUE(retry == 0 || retry == -1) << retry;
  }
  const v1::GetStatusResponse status = coordinator_->GetStatus(1, /*include_clients=*/false);
  EXPECT_EQ(status.paced_clients(), 0);
  EXPECT_EQ(status.checkin_cycle_ms(), 0);
  EXPECT_EQ(status.clients_size(), 0);
  EXPECT_EQ(coordinator_->CheckInHoldLimit(), INT64_MAX);  // hold every poll, as before
}

TEST_F(PacingTest, LargePopulationIsSentAwayWithSpreadCheckIns) {
  Start();
  RegisterFleet(40);  // cycle = 40 x 5 s / 4 = 50 s: away 45 s on average
  const absl::Time now = kStart + absl::Seconds(1);
  std::vector<int64_t> delays;
  for (const v1::RegisterResponse& who : fleet_) {
    const int64_t retry = IdlePoll(who, now);
    if (retry >= 0) delays.push_back(retry);
  }
  // Pacing was on at the Tick (40 > 4), and nobody had checked in yet: no round was planned,
  // so every device was sent away.
  ASSERT_EQ(delays.size(), 40u);
  for (int64_t d : delays) {
    EXPECT_GE(d, 22500);  // 0.5 x 45 s
    EXPECT_LT(d, 67500);  // 1.5 x 45 s
  }
  const double mean = std::accumulate(delays.begin(), delays.end(), 0.0) / delays.size();
  EXPECT_GT(mean, 35000);
  EXPECT_LT(mean, 55000);
  EXPECT_GT(std::set<int64_t>(delays.begin(), delays.end()).size(), 30u) << "not spread";
  const v1::GetStatusResponse status = coordinator_->GetStatus(1, false);
  EXPECT_EQ(status.paced_clients(), 40);
  EXPECT_EQ(status.checkin_cycle_ms(), 50000);
  // Away devices are not online (no candidates).
  EXPECT_EQ(coordinator_->CountClients(now).online, 0);
  // The service holds no more polls than the pool; a check-in beyond it is sent away at once.
  EXPECT_EQ(coordinator_->CheckInHoldLimit(), 4);
}

TEST_F(PacingTest, OnlyCheckedInDevicesArePlannedAndAnAwayDeviceIsBackWhenItPolls) {
  raw_.set_num_rounds(5);
  Start();
  RegisterFleet(40);  // pacing on: registered, but nobody has polled yet
  absl::Time now = kStart + absl::Seconds(1);
  EXPECT_FALSE(coordinator_->GetStatus(1, false).state() == "running");
  // Three devices check in (their polls are held: no pacing answer yet); 36 are sent away.
  std::set<std::string> present;
  for (size_t i = 0; i < fleet_.size(); ++i) {
    if (i < 3) {
      v1::PollTaskRequest request;
      request.set_client_id(fleet_[i].client_id());
      request.set_session_token(fleet_[i].session_token());
      ASSERT_OK(coordinator_->PollTask(request, now).status());
      present.insert(fleet_[i].client_id());
    } else if (i + 1 < fleet_.size()) {
      ASSERT_GT(IdlePoll(fleet_[i], now), 0);
    }
  }
  // The round's 2 tasks go to checked-in devices only (not to the last one, registered and
  // online but never checked in, nor to the away ones).
  coordinator_->Tick(now);
  const v1::GetStatusResponse status = coordinator_->GetStatus(1, true);
  EXPECT_EQ(status.state(), "running");
  int tasked = 0;
  for (const v1::RegisterResponse& who : fleet_) {
    v1::PollTaskRequest request;
    request.set_client_id(who.client_id());
    request.set_session_token(who.session_token());
    if (!present.contains(who.client_id())) continue;
    ASSERT_OK_AND_ASSIGN(v1::PollTaskResponse r, coordinator_->PollTask(request, now));
    tasked += r.has_task() ? 1 : 0;
  }
  EXPECT_EQ(tasked, 2);
  // An away device that polls again is back at once, even before its check-in time.
  const v1::RegisterResponse& returning = fleet_[10];
  const int64_t online_before = coordinator_->CountClients(now).online;
  now += absl::Seconds(2);
  v1::PollTaskRequest request;
  request.set_client_id(returning.client_id());
  request.set_session_token(returning.session_token());
  ASSERT_OK(coordinator_->PollTask(request, now).status());
  EXPECT_EQ(coordinator_->CountClients(now).online, online_before + 1);
}

TEST_F(PacingTest, DisabledPacingAnswersAsBefore) {
  raw_.mutable_pacing()->set_disable(true);
  Start();
  RegisterFleet(40);
  for (const v1::RegisterResponse& who : fleet_) {
    const int64_t retry = IdlePoll(who, kStart + absl::Seconds(1));
    EXPECT_TRUE(retry == 0 || retry == -1) << retry;
  }
  EXPECT_EQ(coordinator_->GetStatus(1, false).paced_clients(), 0);
}

TEST_F(PacingTest, ImpossibleSettingsAreRefusedAtStart) {
  raw_.mutable_pacing()->set_pool_factor(0.25);
  EXPECT_THAT(ResolveServerConfig(raw_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pacing.pool_factor")));
}

}  // namespace
}  // namespace fedsched
