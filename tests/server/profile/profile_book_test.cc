#include "server/profile/profile_book.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::profile {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::Contains;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

v1::DeviceProfile Device(const std::string& model, double benchmark_ms, int64_t samples = 600,
                         double hint_kbps = 0) {
  v1::DeviceProfile d;
  d.set_device_model(model);
  d.set_compute_ms_per_sample(benchmark_ms);
  d.set_num_samples(samples);
  d.set_storage_budget_bytes(1 << 20);
  d.set_sample_bytes(1000);
  d.set_bandwidth_hint_kbps(hint_kbps);
  return d;
}

// An update that measures `ms` training ms/sample over 100 examples.
v1::UpdateMetrics Metrics(double ms, double utility = 5.0) {
  v1::UpdateMetrics m;
  m.set_num_examples(100);
  m.set_train_seconds(ms * 100 / 1000.0);
  m.set_statistical_utility(utility);
  return m;
}

std::unique_ptr<ProfileBook> MakeBook() {
  auto book = ProfileBook::Create({});
  EXPECT_TRUE(book.ok()) << book.status();
  return std::move(book).value();
}

// Room reserved for max_identities clients changes nothing a book answers, past the room too;
// a negative reservation is refused.
TEST(ProfileBookTest, ReservedRoomChangesNoAnswer) {
  ProfileBookOptions options;
  options.reserve_clients = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProfileBook> reserved, ProfileBook::Create(options));
  auto plain = MakeBook();
  for (ProfileBook* book : {reserved.get(), plain.get()}) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_OK_AND_ASSIGN(ProfileBook::Registration r,
                           book->OnRegister(absl::StrCat("dev-", i), Device("m", 10 + i), i));
      EXPECT_EQ(r.index, static_cast<ClientIndex>(i));
    }
  }
  ASSERT_EQ(reserved->size(), plain->size());
  for (ClientIndex i = 0; i < 5; ++i) {
    EXPECT_EQ(reserved->profile(i).SerializeAsString(), plain->profile(i).SerializeAsString());
  }
  options.reserve_clients = -1;
  EXPECT_THAT(ProfileBook::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reserve_clients")));
  v1::ServerConfig config;
  config.mutable_security()->set_max_identities(123);
  ASSERT_OK_AND_ASSIGN(ProfileBookOptions from, ProfileBookOptions::FromServerConfig(config));
  EXPECT_EQ(from.reserve_clients, 123);
}

TEST(ProfileBookTest, RegisterAssignsIdsAndReRegistrationKeepsProfile) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(ProfileBook::Registration a, book->OnRegister("dev-a", Device("m", 10), 0));
  ASSERT_OK_AND_ASSIGN(ProfileBook::Registration b, book->OnRegister("dev-b", Device("m", 10), 0));
  EXPECT_TRUE(a.is_new);
  EXPECT_EQ(book->profile(a.index).client_id(), "c1");
  EXPECT_EQ(book->profile(b.index).client_id(), "c2");

  // A task in flight, then a measured success, then another task in flight.
  ASSERT_OK(book->OnTaskAssigned(a.index, 1, 1.0));
  ASSERT_OK(book->OnTaskSucceeded(a.index, Metrics(20), {.completion_s = 3.0}, 4.0));
  ASSERT_OK(book->OnTaskAssigned(a.index, 2, 5.0));
  EXPECT_TRUE(book->state(a.index).busy);
  std::vector<ClientIndex> selectable;
  book->CollectSelectable(5.0, &selectable);
  EXPECT_THAT(selectable, Not(Contains(a.index)));

  // The device restarts and registers again, long after its heartbeats stopped.
  ASSERT_OK_AND_ASSIGN(ProfileBook::Registration again,
                       book->OnRegister("dev-a", Device("m", 12, 700), 100.0));
  EXPECT_FALSE(again.is_new);
  EXPECT_EQ(again.index, a.index);
  const v1::ClientProfile& p = book->profile(a.index);
  EXPECT_EQ(p.client_id(), "c1");
  EXPECT_EQ(p.successes(), 1);
  EXPECT_DOUBLE_EQ(p.compute_ms_per_sample(), 20.0);
  EXPECT_EQ(p.last_selected_round(), 2);
  EXPECT_EQ(p.device().num_samples(), 700);
  EXPECT_FALSE(book->state(a.index).busy);
  EXPECT_TRUE(book->IsOnline(a.index, 100.0));
  book->CollectSelectable(100.0, &selectable);
  EXPECT_THAT(selectable, ElementsAre(a.index));  // b has been silent for 100 s
  EXPECT_EQ(book->size(), 2);
}

TEST(ProfileBookTest, RejectsBadRegistrations) {
  auto book = MakeBook();
  EXPECT_THAT(book->OnRegister("", Device("m", 1), 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("identity")));
  EXPECT_THAT(book->OnRegister("x", Device("m", -1), 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compute_ms_per_sample")));
  EXPECT_THAT(book->OnRegister("x", Device("m", std::nan("")), 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_EQ(book->size(), 0);
  EXPECT_THAT(book->OnHeartbeat(3, 0), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

TEST(ProfileBookTest, OnlineFollowsHeartbeatTimeout) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({.heartbeat_timeout_s = 6.0}));
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 1), 1000.0));
  EXPECT_TRUE(book->IsOnline(r.index, 1006.0));
  EXPECT_FALSE(book->IsOnline(r.index, 1006.5));
  ASSERT_OK(book->OnHeartbeat(r.index, 1005.0));
  EXPECT_TRUE(book->IsOnline(r.index, 1010.0));
  EXPECT_EQ(book->CountOnline(1010.0), 1);
  EXPECT_EQ(book->CountOnline(1012.0), 0);
  book->SampleAvailability(1012.0);  // offline: availability 1 -> 0.9
  EXPECT_DOUBLE_EQ(book->profile(r.index).availability(), 0.9);
}

// Pace steering (docs/ALGORITHMS.md "Pace steering"): a device sent away is no candidate but
// stays available, is never "unseen" before its check-in is due, and is back when it checks in.
TEST(ProfileBookTest, AwayClientsAreAvailableButNotOnline) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({.heartbeat_timeout_s = 6.0}));
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 1), 1000.0));
  ASSERT_OK_AND_ASSIGN(auto other, book->OnRegister("e", Device("m", 1), 1000.0));
  ASSERT_OK(book->SetAwayUntil(r.index, 1300.0));
  EXPECT_TRUE(book->IsAway(r.index, 1001.0));
  EXPECT_FALSE(book->IsOnline(r.index, 1001.0));
  EXPECT_TRUE(book->IsAvailable(r.index, 1001.0));
  std::vector<ClientIndex> selectable;
  book->CollectSelectable(1001.0, &selectable);
  EXPECT_THAT(selectable, ElementsAre(other.index));
  EXPECT_EQ(book->CountAway(1001.0), 1);
  EXPECT_EQ(book->CountAvailable(1001.0), 2);
  // Long after its last poll, but before its appointment: available, not unseen.
  book->SampleAvailability(1200.0);
  EXPECT_DOUBLE_EQ(book->profile(r.index).availability(), 1.0);
  EXPECT_DOUBLE_EQ(book->profile(other.index).availability(), 0.9);
  std::vector<ClientIndex> unseen;
  book->CollectUnseen(1250.0, 100.0, &unseen);
  EXPECT_THAT(unseen, ElementsAre(other.index));
  // A little late (within the heartbeat timeout) is still available; much later it left.
  EXPECT_TRUE(book->IsAvailable(r.index, 1305.0));
  EXPECT_FALSE(book->IsAvailable(r.index, 1307.0));
  EXPECT_FALSE(book->IsOnline(r.index, 1307.0));
  // Checking in again: back.
  ASSERT_OK(book->OnHeartbeat(r.index, 1310.0));
  ASSERT_OK(book->SetAwayUntil(r.index, 0));
  EXPECT_TRUE(book->IsOnline(r.index, 1310.0));
  EXPECT_EQ(book->CountAway(1310.0), 0);
  // Registering again also ends an absence; bad times are refused.
  ASSERT_OK(book->SetAwayUntil(other.index, 2000.0));
  ASSERT_OK_AND_ASSIGN(auto again, book->OnRegister("e", Device("m", 1), 1400.0));
  EXPECT_TRUE(book->IsOnline(again.index, 1400.0));
  EXPECT_THAT(book->SetAwayUntil(r.index, -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("away-until")));
  EXPECT_THAT(book->SetAwayUntil(99, 1), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

TEST(ProfileBookTest, FromServerConfigDerivesTheHeartbeatTimeout) {
  v1::ServerConfig config;
  ASSERT_OK_AND_ASSIGN(ProfileBookOptions defaults, ProfileBookOptions::FromServerConfig(config));
  EXPECT_DOUBLE_EQ(defaults.heartbeat_timeout_s, 6.0);
  config.set_heartbeat_interval_ms(500);
  config.set_missed_heartbeats(4);
  ASSERT_OK_AND_ASSIGN(ProfileBookOptions o, ProfileBookOptions::FromServerConfig(config));
  EXPECT_DOUBLE_EQ(o.heartbeat_timeout_s, 2.0);
}

TEST(ProfileBookTest, TaskSuccessUpdatesEwmas) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({.ewma_alpha = 0.5}));
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 10), 0));
  v1::UpdateMetrics m;
  m.set_num_examples(100);
  m.set_train_seconds(2.0);
  m.set_io_seconds(0.5);            // compute = 1.5 s -> 15 ms/sample
  m.set_download_bytes(1'000'000);  // 8000 kbit in 2 s
  m.set_download_seconds(2.0);
  m.set_cache_hits(30);
  m.set_cache_misses(70);
  m.set_statistical_utility(42.0);
  ASSERT_OK(book->OnTaskSucceeded(
      r.index, m, {.completion_s = 7.0, .upload_s = 1.0, .upload_bytes = 500'000}, 10.0));
  const v1::ClientProfile& p = book->profile(r.index);
  EXPECT_DOUBLE_EQ(p.compute_ms_per_sample(), 15.0);
  EXPECT_DOUBLE_EQ(p.download_kbps(), 4000.0);
  EXPECT_DOUBLE_EQ(p.upload_kbps(), 4000.0);
  EXPECT_DOUBLE_EQ(p.cache_hit_ratio(), 0.3);
  EXPECT_DOUBLE_EQ(p.statistical_utility(), 42.0);
  EXPECT_DOUBLE_EQ(p.last_duration_s(), 7.0);
  EXPECT_DOUBLE_EQ(p.last_io_s(), 0.5);
  EXPECT_EQ(p.last_samples_trained(), 100);
  EXPECT_EQ(p.successes(), 1);
  EXPECT_EQ(p.measured_tasks(), 1);
  EXPECT_DOUBLE_EQ(book->ExpectedIoSecondsPerSample(r.index), 0.005);

  // Second task: 25 ms/sample, no I/O, all hits: EWMA with alpha 0.5.
  m.set_train_seconds(2.5);
  m.set_io_seconds(0);
  m.set_cache_hits(100);
  m.set_cache_misses(0);
  m.set_download_seconds(1.0);  // 8000 kbit/s
  ASSERT_OK(book->OnTaskSucceeded(r.index, m, {.completion_s = 5.0}, 20.0));
  EXPECT_DOUBLE_EQ(p.compute_ms_per_sample(), 20.0);
  EXPECT_DOUBLE_EQ(p.download_kbps(), 6000.0);
  EXPECT_DOUBLE_EQ(p.upload_kbps(), 4000.0);  // upload unknown this time
  EXPECT_DOUBLE_EQ(p.cache_hit_ratio(), 0.65);
  EXPECT_DOUBLE_EQ(book->ExpectedComputeMs(r.index), 20.0);
}

TEST(ProfileBookTest, InvalidMetricsChangeNothing) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 10), 0));
  v1::UpdateMetrics m = Metrics(10);
  m.set_num_examples(0);
  EXPECT_THAT(book->OnTaskSucceeded(r.index, m, {.completion_s = 1}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_examples")));
  m = Metrics(10);
  m.set_train_seconds(std::nan(""));
  EXPECT_THAT(book->OnTaskSucceeded(r.index, m, {.completion_s = 1}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(book->OnTaskSucceeded(r.index, Metrics(10), {.completion_s = 0}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("completion_s")));
  EXPECT_THAT(book->OnTaskSucceeded(9, Metrics(10), {.completion_s = 1}, 1),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_EQ(book->profile(r.index).successes(), 0);
  EXPECT_EQ(book->profile(r.index).compute_ms_per_sample(), 0);
}

TEST(ProfileBookTest, FailuresAndStragglerBound) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 10), 0));
  ASSERT_OK(book->OnTaskAssigned(r.index, 1, 0));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kStraggler, 30.0, 30.0));
  EXPECT_DOUBLE_EQ(book->profile(r.index).censored_duration_s(), 30.0);
  EXPECT_DOUBLE_EQ(book->state(r.index).censored_duration_s, 30.0);
  EXPECT_FALSE(book->state(r.index).busy);
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kDropped, 5.0, 40.0));
  EXPECT_EQ(book->profile(r.index).failures(), 2);
  EXPECT_DOUBLE_EQ(book->profile(r.index).availability(), 0.9);
  ASSERT_OK(book->OnTaskSucceeded(r.index, Metrics(10), {.completion_s = 50}, 100));
  EXPECT_DOUBLE_EQ(book->profile(r.index).censored_duration_s(), 0.0);
}

// Failure penalty (docs/guides/SECURITY.md "Identities and admission"): 3 counted failures in a row
// start a cooldown of 60 s that doubles per further failure; a first-K straggler does not count, a
// success resets the count.
TEST(ProfileBookTest, RepeatedFailuresStartADoublingCooldown) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("d", Device("m", 10), 0));
  // A proven client (one accepted update) gets failure_cooldown_after (3) failures in a row.
  ASSERT_OK(book->OnTaskSucceeded(r.index, Metrics(10), {.completion_s = 1}, 5));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kDropped, 1, 10));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kMissedDeadline, 60, 70));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kStraggler, 5, 80));  // not counted
  EXPECT_EQ(book->profile(r.index).consecutive_failures(), 2);
  EXPECT_FALSE(book->InFailureCooldown(r.index, 80));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kDropped, 1, 100));
  EXPECT_EQ(book->profile(r.index).last_failure_unix_ms(), 100000);
  EXPECT_TRUE(book->InFailureCooldown(r.index, 159));
  EXPECT_FALSE(book->InFailureCooldown(r.index, 160));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kDropped, 1, 200));
  EXPECT_TRUE(book->InFailureCooldown(r.index, 319));  // 120 s after the 4th
  EXPECT_FALSE(book->InFailureCooldown(r.index, 320));
  ASSERT_OK(book->OnTaskSucceeded(r.index, Metrics(10), {.completion_s = 5}, 210));
  EXPECT_EQ(book->profile(r.index).consecutive_failures(), 0);
  EXPECT_FALSE(book->InFailureCooldown(r.index, 211));
  // Configured off.
  v1::ServerConfig config;
  config.mutable_security()->set_failure_cooldown_after(-1);
  ASSERT_OK_AND_ASSIGN(ProfileBookOptions off, ProfileBookOptions::FromServerConfig(config));
  EXPECT_EQ(off.failure_cooldown_after, 0);
  config.mutable_security()->set_failure_cooldown_s(-1);
  EXPECT_THAT(ProfileBookOptions::FromServerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("failure_cooldown_s")));
}

// A client that never had an update accepted sits out after its first counted failure.
TEST(ProfileBookTest, UnprovenClientSitsOutAfterItsFirstFailure) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto r, book->OnRegister("new", Device("m", 10), 0));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kStraggler, 5, 10));  // not counted
  EXPECT_FALSE(book->InFailureCooldown(r.index, 11));
  ASSERT_OK(book->OnTaskFailed(r.index, TaskFailure::kMissedDeadline, 60, 70));
  EXPECT_TRUE(book->InFailureCooldown(r.index, 129));
  EXPECT_FALSE(book->InFailureCooldown(r.index, 130));
}

// Secure aggregation (docs/guides/SECURE_AGGREGATION.md "A malicious member"): an excluded member
// keeps its first reason, is written back (dirty), and its identity never expires, so that waiting
// out the TTL does not lift the exclusion.
TEST(ProfileBookTest, SecAggExclusionIsKeptAndNeverExpires) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto forger, book->OnRegister("forger", Device("m", 10), 0));
  ASSERT_OK_AND_ASSIGN(auto ghost, book->OnRegister("ghost", Device("m", 10), 0));
  std::vector<ClientIndex> dirty;
  book->TakeDirty(&dirty);
  EXPECT_FALSE(book->SecAggExcluded(forger.index));
  ASSERT_OK(book->ExcludeFromSecAgg(forger.index, "round 1: shares did not authenticate", 5));
  ASSERT_OK(book->ExcludeFromSecAgg(forger.index, "round 2: again", 6));
  EXPECT_TRUE(book->SecAggExcluded(forger.index));
  EXPECT_EQ(book->profile(forger.index).secagg_excluded(), "round 1: shares did not authenticate");
  EXPECT_EQ(book->profile(forger.index).secagg_excluded_unix_ms(), 5000);
  book->TakeDirty(&dirty);
  EXPECT_THAT(dirty, ElementsAre(forger.index));
  std::vector<ClientIndex> unseen;
  book->CollectUnseen(1000, 50, &unseen);
  EXPECT_THAT(unseen, ElementsAre(ghost.index));
  EXPECT_FALSE(book->ExcludeFromSecAgg(99, "x", 1).ok());
}

// Identity expiry (docs/guides/SECURITY.md "Identities and admission"): never proven, idle and not
// heard from within the TTL -> retired; the slot goes to the next new identity with a new client
// id.
TEST(ProfileBookTest, UnseenClientsAreRetiredAndTheirSlotsReused) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto proven, book->OnRegister("proven", Device("m", 10), 0));
  ASSERT_OK_AND_ASSIGN(auto heard, book->OnRegister("heard", Device("m", 10), 0));
  ASSERT_OK_AND_ASSIGN(auto busy, book->OnRegister("busy", Device("m", 10), 0));
  ASSERT_OK_AND_ASSIGN(auto ghost, book->OnRegister("ghost", Device("m", 10), 0));
  ASSERT_OK(book->OnTaskSucceeded(proven.index, Metrics(10), {.completion_s = 1}, 10));
  ASSERT_OK(book->OnHeartbeat(heard.index, 90));
  ASSERT_OK(book->OnTaskAssigned(busy.index, 1, 1));
  std::vector<ClientIndex> unseen;
  book->CollectUnseen(100, 50, &unseen);
  EXPECT_THAT(unseen, ElementsAre(ghost.index));
  const std::string ghost_id = book->profile(ghost.index).client_id();
  std::vector<ClientIndex> dirty;
  ASSERT_OK(book->Retire(ghost.index));
  EXPECT_EQ(book->live_size(), 3);
  EXPECT_EQ(book->size(), 4);
  EXPECT_FALSE(book->FindByIdentity("ghost").has_value());
  EXPECT_FALSE(book->FindByClientId(ghost_id).has_value());
  EXPECT_FALSE(book->IsOnline(ghost.index, 100));
  EXPECT_THAT(book->Retire(ghost.index), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
  EXPECT_THAT(book->Retire(busy.index),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("task in flight")));
  book->TakeDirty(&dirty);
  EXPECT_THAT(dirty, ::testing::Not(::testing::Contains(ghost.index)));
  ASSERT_OK_AND_ASSIGN(auto next, book->OnRegister("ghost", Device("m", 10), 100));
  EXPECT_TRUE(next.is_new);
  EXPECT_EQ(next.index, ghost.index);
  EXPECT_NE(book->profile(next.index).client_id(), ghost_id);
  EXPECT_EQ(book->live_size(), 4);
  EXPECT_TRUE(book->IsOnline(next.index, 100));
}

TEST(ProfileBookTest, PriorsByDeviceModelThenGlobal) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({.default_compute_ms_per_sample = 7.0,
                                                       .default_kbps = 1234.0}));
  ASSERT_OK_AND_ASSIGN(auto x1, book->OnRegister("x1", Device("X", 10.0), 0));
  ASSERT_OK_AND_ASSIGN(auto nothing, book->OnRegister("n", Device("Z", 0.0), 0));
  // Nobody measured yet: own benchmark, else the default.
  EXPECT_DOUBLE_EQ(book->ExpectedComputeMs(x1.index), 10.0);
  EXPECT_DOUBLE_EQ(book->ExpectedComputeMs(nothing.index), 7.0);
  EXPECT_DOUBLE_EQ(book->ExpectedDownloadKbps(nothing.index), 1234.0);

  // x1 measures 20 ms/sample: twice its benchmark.
  ASSERT_OK(book->OnTaskSucceeded(x1.index, Metrics(20), {.completion_s = 1}, 1));
  ASSERT_OK_AND_ASSIGN(auto x2, book->OnRegister("x2", Device("X", 5.0), 1));
  ASSERT_OK_AND_ASSIGN(auto x3, book->OnRegister("x3", Device("X", 0.0), 1));
  ASSERT_OK_AND_ASSIGN(auto y1, book->OnRegister("y1", Device("Y", 0.0), 1));
  ASSERT_OK_AND_ASSIGN(auto y2, book->OnRegister("y2", Device("Y", 3.0), 1));
  EXPECT_NEAR(book->ExpectedComputeMs(x2.index), 10.0, 1e-6);  // 5 x model ratio 2
  EXPECT_NEAR(book->ExpectedComputeMs(x3.index), 20.0, 1e-6);  // model geometric mean
  EXPECT_NEAR(book->ExpectedComputeMs(y1.index), 20.0, 1e-6);  // global geometric mean
  EXPECT_NEAR(book->ExpectedComputeMs(y2.index), 6.0, 1e-6);   // 3 x global ratio 2

  // A Y device measures 80 ms/sample (ratio 80/3): Y now has its own figures.
  ASSERT_OK(book->OnTaskSucceeded(y2.index, Metrics(80), {.completion_s = 1}, 2));
  EXPECT_NEAR(book->ExpectedComputeMs(y1.index), 80.0, 1e-6);
  EXPECT_NEAR(book->ExpectedComputeMs(nothing.index), 40.0, 1e-6);  // sqrt(20 x 80)
  EXPECT_NEAR(book->ExpectedComputeMs(x3.index), 20.0, 1e-6);
}

TEST(ProfileBookTest, AdoptedSystemFieldsAreWhatThePlannerSeesAndFeedThePriors) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({.default_compute_ms_per_sample = 7.0}));
  ASSERT_OK_AND_ASSIGN(auto x1, book->OnRegister("x1", Device("X", 10.0), 0));
  ASSERT_OK_AND_ASSIGN(auto x2, book->OnRegister("x2", Device("X", 5.0), 0));
  ASSERT_OK(book->OnTaskSucceeded(x1.index, Metrics(30, /*utility=*/4), {.completion_s = 1}, 1));
  std::vector<ClientIndex> dirty;
  book->TakeDirty(&dirty);

  // Another job measured x1 at 20 ms/sample (twice its benchmark) and its bandwidths.
  v1::ClientProfile system;
  system.set_compute_ms_per_sample(20);
  system.set_upload_kbps(800);
  system.set_download_kbps(9000);
  system.set_availability(0.5);
  system.set_measured_tasks(3);
  system.set_statistical_utility(77);  // per job: stays
  ASSERT_OK(book->AdoptSystemFields(x1.index, system));
  EXPECT_DOUBLE_EQ(book->ExpectedComputeMs(x1.index), 20.0);
  EXPECT_DOUBLE_EQ(book->ExpectedUploadKbps(x1.index), 800.0);
  EXPECT_DOUBLE_EQ(book->ExpectedDownloadKbps(x1.index), 9000.0);
  EXPECT_EQ(book->profile(x1.index).availability(), 0.5);
  EXPECT_EQ(book->profile(x1.index).measured_tasks(), 3);
  EXPECT_EQ(book->profile(x1.index).statistical_utility(), 4);
  EXPECT_EQ(book->profile(x1.index).successes(), 1);
  EXPECT_TRUE(book->state(x1.index).measured);
  // The device model's prior follows, as after a measurement: x2 = 5 x ratio 2.
  EXPECT_NEAR(book->ExpectedComputeMs(x2.index), 10.0, 1e-6);
  book->TakeDirty(&dirty);
  EXPECT_THAT(dirty, ElementsAre(x1.index));

  system.set_upload_kbps(-1);
  EXPECT_THAT(book->AdoptSystemFields(x1.index, system),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  system.set_upload_kbps(1);
  system.set_availability(1.5);
  EXPECT_THAT(book->AdoptSystemFields(x1.index, system),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_DOUBLE_EQ(book->ExpectedUploadKbps(x1.index), 800.0);
  EXPECT_THAT(book->AdoptSystemFields(99, system),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

TEST(ProfileBookTest, RegistrationUnderAGivenClientId) {
  std::unique_ptr<ProfileBook> book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto a, book->OnRegister("a", Device("X", 10.0), 0, "c7"));
  EXPECT_TRUE(a.is_new);
  EXPECT_EQ(book->profile(a.index).client_id(), "c7");
  ASSERT_OK_AND_ASSIGN(auto again, book->OnRegister("a", Device("X", 10.0), 1, "c7"));
  EXPECT_FALSE(again.is_new);
  EXPECT_EQ(again.index, a.index);
  EXPECT_THAT(book->OnRegister("b", Device("X", 10.0), 1, "c7"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another identity")));
  // A known identity under a newer client id keeps its profile under that id.
  ASSERT_OK_AND_ASSIGN(auto renamed, book->OnRegister("a", Device("X", 10.0), 2, "c9"));
  EXPECT_EQ(renamed.index, a.index);
  EXPECT_EQ(book->FindByClientId("c9"), a.index);
  EXPECT_FALSE(book->FindByClientId("c7").has_value());
  // Ids the book makes itself never take one given.
  ASSERT_OK_AND_ASSIGN(auto b, book->OnRegister("b", Device("X", 10.0), 2));
  EXPECT_NE(book->profile(b.index).client_id(), "c9");
}

TEST(ProfileBookTest, DirtyTracking) {
  auto book = MakeBook();
  ASSERT_OK_AND_ASSIGN(auto a, book->OnRegister("a", Device("m", 1), 0));
  ASSERT_OK_AND_ASSIGN(auto b, book->OnRegister("b", Device("m", 1), 0));
  std::vector<ClientIndex> dirty;
  book->TakeDirty(&dirty);
  EXPECT_THAT(dirty, ElementsAre(a.index, b.index));
  ASSERT_OK(book->OnHeartbeat(a.index, 1));
  book->TakeDirty(&dirty);
  EXPECT_TRUE(dirty.empty());
  ASSERT_OK(book->OnTaskAssigned(b.index, 1, 1));
  ASSERT_OK(book->OnTaskSucceeded(b.index, Metrics(3), {.completion_s = 1}, 2));
  book->TakeDirty(&dirty);
  EXPECT_THAT(dirty, ElementsAre(b.index));
}

TEST(ProfileBookTest, ExportImportRoundTrip) {
  auto a = MakeBook();
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(auto r, a->OnRegister(absl::StrCat("dev", i),
                                               Device(i % 2 ? "X" : "Y", 5.0 + i, 600, 900), 0));
    if (i < 4) {
      v1::UpdateMetrics m = Metrics(10.0 + 7 * i);
      m.set_download_bytes(100'000);
      m.set_download_seconds(0.3 + 0.1 * i);
      ASSERT_OK(a->OnTaskSucceeded(r.index, m, {.completion_s = 2.0 + i}, 1));
    }
  }
  std::vector<v1::ClientProfile> saved;
  for (ClientIndex i = 0; i < a->size(); ++i) saved.push_back(a->profile(i));
  // Import in a different order: priors must come out bit-identical.
  std::reverse(saved.begin(), saved.end());
  auto b = MakeBook();
  ASSERT_OK(b->Import(saved));
  ASSERT_EQ(b->size(), a->size());
  for (ClientIndex i = 0; i < a->size(); ++i) {
    const std::string& id = a->profile(i).client_id();
    const std::optional<ClientIndex> found = b->FindByClientId(id);
    ASSERT_TRUE(found.has_value()) << id;
    const ClientIndex j = *found;
    EXPECT_EQ(b->profile(j).identity(), a->profile(i).identity());
    EXPECT_EQ(b->ExpectedComputeMs(j), a->ExpectedComputeMs(i));
    EXPECT_EQ(b->ExpectedDownloadKbps(j), a->ExpectedDownloadKbps(i));
    EXPECT_EQ(b->ExpectedUploadKbps(j), a->ExpectedUploadKbps(i));
  }
  // New ids continue after the imported ones; known identities keep theirs.
  ASSERT_OK_AND_ASSIGN(auto fresh, b->OnRegister("new", Device("X", 1), 2));
  EXPECT_EQ(b->profile(fresh.index).client_id(), "c7");
  ASSERT_OK_AND_ASSIGN(auto old, b->OnRegister("dev0", Device("Y", 5), 2));
  EXPECT_FALSE(old.is_new);
  EXPECT_EQ(b->profile(old.index).client_id(), "c1");

  EXPECT_THAT(b->Import(saved), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  auto c = MakeBook();
  saved.push_back(saved.front());
  EXPECT_THAT(c->Import(saved), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat")));
  EXPECT_EQ(c->size(), 0);
}

// The book's incremental watch lists (failing(): a counted failure since the last success;
// CountUnproven()) equal a scan of every client after a seeded run of churn: tasks assigned,
// succeeded, dropped, straggling or missing their deadline, identities bound on first use or
// by certificate, clients retired and their slots reused.
TEST(ProfileBookTest, WatchListsEqualAFullScanUnderChurn) {
  ASSERT_OK_AND_ASSIGN(auto book, ProfileBook::Create({}));
  std::mt19937_64 rng(47);
  int registered = 0;
  for (; registered < 30; ++registered) {
    ASSERT_OK(book->OnRegister(absl::StrCat("w", registered), Device("m", 10), 0).status());
  }
  size_t most_failing = 0;
  int64_t most_unproven = 0;
  auto check = [&](int step) {
    absl::flat_hash_set<ClientIndex> failing;
    int64_t unproven = 0;
    for (ClientIndex i = 0; i < static_cast<ClientIndex>(book->size()); ++i) {
      const ClientState& s = book->state(i);
      if (!s.retired && s.consecutive_failures > 0) failing.insert(i);
      if (!s.retired && book->IsUnproven(i)) ++unproven;
    }
    ASSERT_EQ(book->failing(), failing) << "step " << step;
    ASSERT_EQ(book->CountUnproven(), unproven) << "step " << step;
    most_failing = std::max(most_failing, failing.size());
    most_unproven = std::max(most_unproven, unproven);
  };
  for (int step = 0; step < 600; ++step) {
    const auto i = static_cast<ClientIndex>(rng() % book->size());
    const double now = step;
    const bool live = !book->state(i).retired;
    switch (rng() % 7) {
      case 0:
        if (live && !book->state(i).busy) {
          ASSERT_OK(book->OnTaskAssigned(i, step + 1, now));
        }
        break;
      case 1:
        if (live) {
          ASSERT_OK(book->OnTaskSucceeded(i, Metrics(10), {.completion_s = 1}, now));
        }
        break;
      case 2:
      case 3: {
        const TaskFailure f[] = {TaskFailure::kDropped, TaskFailure::kStraggler,
                                 TaskFailure::kMissedDeadline};
        if (live) {
          ASSERT_OK(book->OnTaskFailed(i, f[rng() % 3], 2.0, now));
        }
        break;
      }
      case 4:
        if (live) {
          ASSERT_OK(book->SetCertFingerprint(
              i, rng() % 2 ? absl::StrCat(kFirstUseBindingPrefix, "ab") : "cd"));
        }
        break;
      case 5:
        if (live && !book->state(i).busy) {
          ASSERT_OK(book->Retire(i));
        }
        break;
      case 6:
        ASSERT_OK(book->OnRegister(absl::StrCat("w", registered++), Device("m", 10), now).status());
        break;
    }
    check(step);
  }
  EXPECT_GT(most_failing, 3u);  // the churn did fill the lists
  EXPECT_GT(most_unproven, 3);
  // Restored from its profiles, a book watches the same clients.
  std::vector<v1::ClientProfile> live;
  for (ClientIndex i = 0; i < static_cast<ClientIndex>(book->size()); ++i) {
    if (!book->state(i).retired) live.push_back(book->profile(i));
  }
  ASSERT_OK_AND_ASSIGN(auto restored, ProfileBook::Create({}));
  ASSERT_OK(restored->Import(live));
  int64_t failing = 0;
  for (ClientIndex i = 0; i < static_cast<ClientIndex>(restored->size()); ++i) {
    failing += restored->state(i).consecutive_failures > 0 ? 1 : 0;
  }
  EXPECT_EQ(static_cast<int64_t>(restored->failing().size()), failing);
  EXPECT_EQ(restored->CountUnproven(), book->CountUnproven());
}

}  // namespace
}  // namespace fedsched::profile
