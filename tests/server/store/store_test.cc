#include "server/store/store.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::Model MakeModel(float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(2);
  t->add_data(value);
  t->add_data(value + 1);
  return model;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fedsched_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  StoreOptions Options() const { return StoreOptions{.path = dir_.string(), .keep_models = 2}; }
  std::filesystem::path dir_;
};

RoundCommit MakeCommit(int64_t round, float value) {
  RoundCommit commit;
  commit.record.set_round(round);
  commit.record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  commit.model = std::make_shared<v1::Model>(MakeModel(value));
  v1::Receipt receipt;
  receipt.set_task_id("task-" + std::to_string(round));
  receipt.set_round(round);
  commit.receipts.push_back(receipt);
  v1::ClientProfile profile;
  profile.set_client_id("c1");
  profile.set_successes(round);
  commit.profiles.push_back(profile);
  return commit;
}

TEST_F(StoreTest, FreshStoreHasNoMeta) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  EXPECT_THAT(store->LoadMeta(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
}

TEST_F(StoreTest, CommitReopenResumesAtTheRightRound) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
    ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
    ASSERT_OK(store->CommitRound(MakeCommit(1, 10)));
    ASSERT_OK(store->CommitRound(MakeCommit(2, 20)));
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store->LoadMeta());
  EXPECT_EQ(meta.committed_round(), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model model, store->LoadModel(2));
  EXPECT_FLOAT_EQ(model.tensors(0).data(0), 20);
  ASSERT_OK_AND_ASSIGN(v1::Receipt receipt, store->LoadReceipt("task-1"));
  EXPECT_EQ(receipt.round(), 1);
  ASSERT_OK_AND_ASSIGN(auto profiles, store->LoadProfiles());
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_EQ(profiles[0].successes(), 2);
  ASSERT_OK_AND_ASSIGN(auto recent, store->LoadRecentRounds(5));
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].round(), 2);
}

// Revocations (fedsched-enroll --revoke_identity): kept apart from the profiles, so deleting
// profiles (the identity TTL) leaves them; they survive a reopen; a lift says whether one was
// there.
TEST_F(StoreTest, RevocationsPersistApartFromProfiles) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
    v1::ClientProfile profile;
    profile.set_client_id("c1");
    profile.set_identity("dev-a");
    ASSERT_OK(store->PutProfile(profile));
    ASSERT_OK(store->PutRevocation({"dev-a", 1000}));
    ASSERT_OK(store->PutRevocation({"dev-b", 2000}));
    ASSERT_OK(store->PutRevocation({"dev-c", 3000}));
    EXPECT_THAT(store->PutRevocation({"", 1}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no identity")));
    const std::string expired[] = {"c1"};
    ASSERT_OK(store->DeleteProfiles(expired));
    ASSERT_OK_AND_ASSIGN(bool lifted, store->DeleteRevocation("dev-c"));
    EXPECT_TRUE(lifted);
    ASSERT_OK_AND_ASSIGN(lifted, store->DeleteRevocation("dev-c"));
    EXPECT_FALSE(lifted);
  }
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK_AND_ASSIGN(std::vector<Revocation> revoked, store->LoadRevocations());
  ASSERT_EQ(revoked.size(), 2u);
  EXPECT_EQ(revoked[0].identity, "dev-a");
  EXPECT_EQ(revoked[0].revoked_unix_ms, 1000);
  EXPECT_EQ(revoked[1].identity, "dev-b");
  EXPECT_EQ(revoked[1].revoked_unix_ms, 2000);
  EXPECT_THAT(store->LoadMeta(),
              StatusIs(absl::StatusCode::kNotFound, ::testing::_));  // still a fresh run
}

TEST_F(StoreTest, RejectsOutOfOrderCommitAndDoubleInitialize) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
  EXPECT_THAT(store->Initialize(MakeModel(0), v1::RunMeta()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already")));
  EXPECT_THAT(store->CommitRound(MakeCommit(2, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("round 2")));
  ASSERT_OK(store->CommitRound(MakeCommit(1, 1)));
  EXPECT_THAT(store->CommitRound(MakeCommit(1, 1)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("round 1")));
}

TEST_F(StoreTest, PrunesOldModelsKeepsRecords) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
  for (int r = 1; r <= 4; ++r) ASSERT_OK(store->CommitRound(MakeCommit(r, r)));
  EXPECT_THAT(store->LoadModel(1), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 1")));
  EXPECT_OK(store->LoadModel(3));
  EXPECT_OK(store->LoadModel(4));
  EXPECT_OK(store->LoadRound(1));
}

int CountModelFiles(const std::filesystem::path& store) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(store / "model_files")) {
    if (entry.path().extension() == ".model") ++n;
  }
  return n;
}

TEST_F(StoreTest, PrunedModelsFilesAreDeletedSharedOnesKept) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
  for (int r = 1; r <= 4; ++r) ASSERT_OK(store->CommitRound(MakeCommit(r, r)));
  EXPECT_EQ(CountModelFiles(dir_), 2);  // keep_models = 2
  // Rounds 5 and 6 repeat the models of rounds 3 and 4 (same digests, same files): pruning
  // rounds 3 and 4 must not delete the files rounds 5 and 6 still name.
  ASSERT_OK(store->CommitRound(MakeCommit(5, 3)));
  ASSERT_OK(store->CommitRound(MakeCommit(6, 4)));
  EXPECT_EQ(CountModelFiles(dir_), 2);
  ASSERT_OK_AND_ASSIGN(v1::Model five, store->LoadModel(5));
  EXPECT_FLOAT_EQ(five.tensors(0).data(0), 3);
  EXPECT_THAT(store->LoadModel(4), StatusIs(absl::StatusCode::kNotFound, HasSubstr("round 4")));
}

TEST_F(StoreTest, CommitWritesTheCallersSerializedModel) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
  RoundCommit commit = MakeCommit(1, 7);
  commit.model_bytes = std::make_shared<const std::string>(commit.model->SerializeAsString());
  commit.model_sha256 = Sha256(*commit.model_bytes);
  ASSERT_OK(store->CommitRound(commit));
  EXPECT_TRUE(
      std::filesystem::exists(dir_ / "model_files" / (ToHex(commit.model_sha256) + ".model")));
  ASSERT_OK_AND_ASSIGN(v1::Model model, store->LoadModel(1));
  EXPECT_EQ(model.SerializeAsString(), *commit.model_bytes);
}

TEST_F(StoreTest, SecondOpenOfSameDirectoryFailsClearly) {
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(Options()));
  EXPECT_THAT(Store::Open(Options()), StatusIs(absl::StatusCode::kInternal, HasSubstr("lock")));
}

// With audit_updates every accepted update goes through RocksDB's log; the log must stay near
// StoreOptions::max_wal_bytes (a restart replays it), not grow with the run.
TEST(StoreWalTest, WriteAheadLogStaysBounded) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fedsched_store_wal_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  constexpr int64_t kBound = int64_t{4} << 20;
  constexpr int kUpdateBytes = 1 << 20;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                         Store::Open({.path = dir.string(), .max_wal_bytes = kBound}));
    ASSERT_OK(store->Initialize(MakeModel(0), v1::RunMeta()));
    for (int r = 1; r <= 60; ++r) {
      RoundCommit commit = MakeCommit(r, static_cast<float>(r));
      v1::AuditedUpdate update;
      update.set_task_id("task-" + std::to_string(r));
      update.set_round(r);
      update.set_num_examples(1);
      update.set_payload(std::string(kUpdateBytes, static_cast<char>('a' + r % 26)));
      commit.audited_updates.push_back(update);
      ASSERT_OK(store->CommitRound(std::move(commit)));
    }
    auto log_bytes = [&dir]() {
      int64_t bytes = 0;
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() == ".log") bytes += entry.file_size();
      }
      return bytes;
    };
    // 60 MiB went through the log. Unbounded, all of it stays (RocksDB's own bound is GBs);
    // bounded, what remains is a small multiple of the bound: RocksDB flushes in the
    // background and deletes a log once every family has left it, about 2.5 x the bound on a
    // quiet machine. On a loaded one the flushes the writes started lag behind them (5.5 x
    // seen at the last commit), so the size is read again while they finish: a wait for work
    // already scheduled, up to 30 s, not a timing assertion.
    int64_t bytes = log_bytes();
    for (int i = 0; i < 300 && bytes > 5 * kBound; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      bytes = log_bytes();
    }
    EXPECT_LE(bytes, 5 * kBound);
  }
  EXPECT_THAT(Store::Open({.path = dir.string(), .max_wal_bytes = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_wal_bytes")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fedsched
