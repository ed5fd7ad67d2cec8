// Damaged copies of a real RocksDB store: a torn or overwritten WAL, a
// truncated MANIFEST or an overwritten table file must never reopen as an earlier round; a
// missing, truncated or corrupt model file is refused naming the file.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "server/store/store.h"

namespace fedsched {
namespace {

namespace fs = std::filesystem;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kRounds = 4;

v1::Model MakeModel(float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(4096);
  for (int i = 0; i < 4096; ++i) t->add_data(value + i);
  return model;
}

RoundCommit MakeCommit(int64_t round) {
  RoundCommit commit;
  commit.record.set_round(round);
  commit.record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  commit.model = std::make_shared<v1::Model>(MakeModel(static_cast<float>(round)));
  v1::Receipt receipt;
  receipt.set_task_id("task-" + std::to_string(round));
  receipt.set_round(round);
  commit.receipts.push_back(receipt);
  return commit;
}

// Files of `dir` whose name ends with `suffix` (or starts with it, for "MANIFEST").
fs::path FindFile(const fs::path& dir, const std::string& part) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(part) != std::string::npos && entry.file_size() > 0) return entry.path();
  }
  return {};
}

void Truncate(const fs::path& file, double fraction) {
  fs::resize_file(file, static_cast<uintmax_t>(fs::file_size(file) * fraction));
}

void Overwrite(const fs::path& file, double at, int bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) * at));
  for (int i = 0; i < bytes; ++i) f.put(static_cast<char>(0xA5 ^ i));
}

class StoreDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("fedsched_damage_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  void TearDown() override { fs::remove_all(base_); }

  // A store with kRounds committed rounds. `crash` = copy the directory while the store is
  // open (what a SIGKILL leaves: everything in the WAL); otherwise close it cleanly (flushed
  // to table files, the WAL empty). Returns the copy's path.
  fs::path MakeStore(bool crash) {
    const fs::path live = base_ / "live";
    const fs::path copy = base_ / "copy";
    {
      absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = live.string()});
      EXPECT_TRUE(store.ok()) << store.status();
      EXPECT_TRUE((*store)->Initialize(MakeModel(0), v1::RunMeta()).ok());
      for (int r = 1; r <= kRounds; ++r) EXPECT_TRUE((*store)->CommitRound(MakeCommit(r)).ok());
      if (crash) fs::copy(live, copy, fs::copy_options::recursive);
    }
    if (!crash) fs::copy(live, copy, fs::copy_options::recursive);
    return copy;
  }

  // Reopening the damaged copy either fails naming the damage or still has every round.
  void ExpectNoSilentRollback(const fs::path& copy) {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = copy.string()});
    if (store.ok()) {
      absl::StatusOr<v1::RunMeta> meta = (*store)->LoadMeta();
      ASSERT_TRUE(meta.ok()) << meta.status();
      EXPECT_EQ(meta->committed_round(), kRounds) << "silent rollback";
      return;
    }
    EXPECT_THAT(store.status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is damaged")));
    EXPECT_THAT(store.status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("Recover by")));
  }

  fs::path base_;
};

TEST_F(StoreDamageTest, UndamagedCrashCopyResumesAtTheLastRound) {
  const fs::path copy = MakeStore(/*crash=*/true);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({.path = copy.string()}));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store->LoadMeta());
  EXPECT_EQ(meta.committed_round(), kRounds);
}

TEST_F(StoreDamageTest, WalCutInHalfIsRefused) {
  const fs::path copy = MakeStore(/*crash=*/true);
  const fs::path wal = FindFile(copy, ".log");
  ASSERT_FALSE(wal.empty());
  Truncate(wal, 0.5);
  EXPECT_FALSE(Store::Open({.path = copy.string()}).ok());
  ExpectNoSilentRollback(copy);
}

TEST_F(StoreDamageTest, WalWithOverwrittenBytesIsRefused) {
  const fs::path copy = MakeStore(/*crash=*/true);
  const fs::path wal = FindFile(copy, ".log");
  ASSERT_FALSE(wal.empty());
  Overwrite(wal, 0.4, 8);
  EXPECT_FALSE(Store::Open({.path = copy.string()}).ok());
  ExpectNoSilentRollback(copy);
}

TEST_F(StoreDamageTest, TruncatedManifestIsRefused) {
  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "crash copy" : "clean copy");
    const fs::path copy = MakeStore(crash);
    const fs::path manifest = FindFile(copy, "MANIFEST-");
    ASSERT_FALSE(manifest.empty());
    Truncate(manifest, 0.5);
    ExpectNoSilentRollback(copy);
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
}

TEST_F(StoreDamageTest, OverwrittenTableFileIsRefused) {
  const fs::path copy = MakeStore(/*crash=*/false);
  for (const auto& entry : fs::directory_iterator(copy)) {
    if (entry.path().extension() == ".sst") Overwrite(entry.path(), 0.3, 8);
  }
  ExpectNoSilentRollback(copy);
}

TEST_F(StoreDamageTest, DeletingTheMarkerAcceptsTheSurvivingStateDeliberately) {
  const fs::path copy = MakeStore(/*crash=*/true);
  Truncate(FindFile(copy, ".log"), 0.5);
  absl::Status refused = Store::Open({.path = copy.string()}).status();
  ASSERT_THAT(refused, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("COMMITTED_ROUND")));
  fs::remove(copy / "COMMITTED_ROUND");
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({.path = copy.string()}));
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store->LoadMeta());
  EXPECT_LT(meta.committed_round(), kRounds);
}

// The model file of the last committed round (server/store/model_files.h): the one holding
// round kRounds' bytes.
fs::path ModelFileOfLastRound(const fs::path& store) {
  const std::string wanted = MakeModel(static_cast<float>(kRounds)).SerializeAsString();
  for (const auto& entry : fs::directory_iterator(store / "model_files")) {
    if (entry.file_size() != wanted.size()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes == wanted) return entry.path();
  }
  return {};
}

TEST_F(StoreDamageTest, ModelsLiveInFilesNotInTheWal) {
  const fs::path copy = MakeStore(/*crash=*/true);
  const fs::path wal = FindFile(copy, ".log");
  ASSERT_FALSE(wal.empty());
  // kRounds + 1 models of 16 KiB each; the WAL holds only references and records.
  EXPECT_LT(fs::file_size(wal), 16384u);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(copy / "model_files")) {
    EXPECT_EQ(entry.path().extension(), ".model") << entry.path();
    ++files;
  }
  EXPECT_EQ(files, kRounds + 1);
  EXPECT_FALSE(ModelFileOfLastRound(copy).empty());
}

TEST_F(StoreDamageTest, MissingModelFileIsRefused) {
  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "crash copy" : "clean copy");
    const fs::path copy = MakeStore(crash);
    const fs::path file = ModelFileOfLastRound(copy);
    ASSERT_FALSE(file.empty());
    fs::remove(file);
    absl::Status s = Store::Open({.path = copy.string()}).status();
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is damaged")));
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("round 4")));
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is missing")));
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr(file.filename().string())));
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
}

TEST_F(StoreDamageTest, CorruptModelFileIsRefused) {
  const fs::path copy = MakeStore(/*crash=*/false);
  const fs::path file = ModelFileOfLastRound(copy);
  ASSERT_FALSE(file.empty());
  Overwrite(file, 0.5, 8);
  absl::Status s = Store::Open({.path = copy.string()}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is damaged")));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is corrupt: its SHA-256 is")));
}

TEST_F(StoreDamageTest, TruncatedModelFileIsRefused) {
  const fs::path copy = MakeStore(/*crash=*/false);
  const fs::path file = ModelFileOfLastRound(copy);
  ASSERT_FALSE(file.empty());
  Truncate(file, 0.5);
  absl::Status s = Store::Open({.path = copy.string()}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("is damaged")));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("its reference says")));
}

TEST_F(StoreDamageTest, ModelFileOfACrashedCommitIsRemovedAtOpen) {
  const fs::path copy = MakeStore(/*crash=*/false);
  // What a crash between the model file's fsync and the batch leaves: a file nobody references.
  const fs::path orphan = copy / "model_files" / (std::string(64, 'a') + ".model");
  std::ofstream(orphan) << "orphan";
  const fs::path temp = copy / "model_files" / (std::string(64, 'b') + ".model.tmp");
  std::ofstream(temp) << "torn";
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open({.path = copy.string()}));
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_FALSE(fs::exists(temp));
  ASSERT_OK_AND_ASSIGN(v1::Model model, store->LoadModel(kRounds));
  EXPECT_EQ(model.SerializeAsString(), MakeModel(static_cast<float>(kRounds)).SerializeAsString());
}

}  // namespace
}  // namespace fedsched
