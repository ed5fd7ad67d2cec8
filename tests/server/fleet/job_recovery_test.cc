// kill -9 of a server running two jobs (docs/guides/JOBS.md "Lifecycle"): a host destroyed without
// a checkpoint and reopened over the same RocksDB store resumes each job at its last committed
// round, in its own namespace, and each job's rounds stay committed exactly once.
#include <filesystem>
#include <set>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/fleet/job_host.h"
#include "tests/server/fleet/fleet_harness.h"

namespace fedsched::fleet {
namespace {

using ::fedsched::fleet::testing::FleetHarness;
using ::fedsched::fleet::testing::MlpSpec;

// Every round 1..last of `store` committed once: a record per round, a receipt per accepted
// task, and no task accepted in two rounds. Returns the mismatches.
int AuditMismatches(const Store& store, int64_t last) {
  int mismatches = 0;
  std::set<std::string> seen;
  for (int64_t round = 1; round <= last; ++round) {
    absl::StatusOr<v1::RoundRecord> record = store.LoadRound(round);
    if (!record.ok() || record->round() != round) {
      ++mismatches;
      continue;
    }
    for (const std::string& task : record->accepted_task_ids()) {
      if (!store.LoadReceipt(task).ok() || !seen.insert(task).second) ++mismatches;
    }
  }
  return mismatches;
}

TEST(JobRecoveryTest, AKilledHostResumesEveryJobAtItsLastCommittedRound) {
  const std::filesystem::path dir = ::fedsched::testing::FreshTestDir("fedsched_fleet_kill");
  int64_t main_before = 0;
  int64_t mlp_before = 0;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = dir.string()}));
    FleetHarness fleet(store.get(), testing::ServerConfigFor(6));
    fleet.Open();
    for (int i = 0; i < 4; ++i) fleet.AddDevice(absl::StrCat("d", i), {"main", "mlp"});
    ASSERT_OK(fleet.host().Submit(MlpSpec("mlp", 6)).status());
    ASSERT_TRUE(fleet.StepUntil(
        [&] { return fleet.CommittedRoundOf("main") >= 2 && fleet.CommittedRoundOf("mlp") >= 2; }));
    main_before = fleet.CommittedRoundOf("main");
    mlp_before = fleet.CommittedRoundOf("mlp");
    ASSERT_LT(main_before, 6);
    ASSERT_LT(mlp_before, 6);
    fleet.Kill();  // no WriteCheckpoint, no clean shutdown
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = dir.string()}));
  FleetHarness fleet(store.get(), testing::ServerConfigFor(6));
  fleet.Open();
  EXPECT_EQ(fleet.StateOf("main"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(fleet.StateOf("mlp"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(fleet.CommittedRoundOf("main"), main_before);
  EXPECT_EQ(fleet.CommittedRoundOf("mlp"), mlp_before);
  ASSERT_NE(fleet.host().coordinator("mlp"), nullptr);
  EXPECT_EQ(fleet.host().coordinator("mlp")->committed_round(), mlp_before);
  // The devices come back (they re-register after a restart) and both jobs run to their ends.
  for (int i = 0; i < 4; ++i) fleet.AddDevice(absl::StrCat("d", i), {"main", "mlp"});
  ASSERT_TRUE(fleet.StepUntil([&] { return fleet.host().finished(); }, 600));
  EXPECT_EQ(fleet.StateOf("main"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(fleet.StateOf("mlp"), v1::JOB_STATE_FINISHED);
  EXPECT_EQ(AuditMismatches(*store, 6), 0);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> mlp, store->OpenNamespace("mlp"));
  EXPECT_EQ(AuditMismatches(*mlp, 6), 0);
  EXPECT_EQ(fleet.observed().double_booked, 0);
  fleet.Kill();
  mlp.reset();
  store.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fedsched::fleet
