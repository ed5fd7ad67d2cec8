// The RocksDB store on a full disk (server/store/disk_space.h): a commit that cannot be written
// returns an error that names the cause, closing the store afterwards does not abort, and the
// store opens again with its committed rounds once space is freed. Uses a small tmpfs; skipped
// with a message where this process may not mount.
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/store/disk_space.h"
#include "server/store/store.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

v1::Model ModelOf(int floats, float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(floats);
  for (int i = 0; i < floats; ++i) t->add_data(value);
  return model;
}

RoundCommit CommitOf(int64_t round, int floats) {
  RoundCommit commit;
  commit.record.set_round(round);
  commit.record.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  commit.model = std::make_shared<v1::Model>(ModelOf(floats, static_cast<float>(round)));
  return commit;
}

class StoreFullDiskTest : public ::fedsched::testing::TempDirTest {
 protected:
  void TearDown() override {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    TempDirTest::TearDown();
  }
  bool Mount(const char* size) {
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, absl::StrCat("size=", size).c_str()) == 0;
    if (!mounted_) reason_ = absl::StrCat("cannot mount a tmpfs: ", std::strerror(errno));
    return mounted_;
  }
  // Writes a file until the disk refuses more.
  void Fill() {
    std::ofstream filler(Path("filler"), std::ios::binary);
    const std::string block(1 << 16, 'x');
    while (filler.write(block.data(), block.size())) {
    }
  }
  absl::StatusOr<std::unique_ptr<Store>> OpenStore() {
    return Store::Open({.path = Path("store"), .keep_models = 2});
  }
  // Runs `body` in a child process, so that an abort there fails this test instead of ending
  // the whole binary, and expects it to return 0 (it prints what went wrong otherwise).
  void ExpectInChild(const std::function<int()>& body) {
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    EXPECT_EXIT(std::exit(body()), ::testing::ExitedWithCode(0), "");
  }
  // A store at Path("store") holding a run (and `rounds` committed rounds), closed again.
  void MakeStore(int rounds) {
    ASSERT_OK_AND_ASSIGN(auto store, OpenStore());
    ASSERT_OK(store->Initialize(ModelOf(1000, 0), v1::RunMeta()));
    for (int r = 1; r <= rounds; ++r) ASSERT_OK(store->CommitRound(CommitOf(r, 1000)));
  }

  bool mounted_ = false;
  std::string reason_;
};

TEST_F(StoreFullDiskTest, FreeSpaceIsMeasuredAndNamedInTheRefusal) {
  if (!Mount("4m")) GTEST_SKIP() << reason_;
  ASSERT_OK_AND_ASSIGN(int64_t free, FreeBytes(Path("not/yet/created")));
  EXPECT_GT(free, 3 << 20);
  EXPECT_LE(free, 4 << 20);
  EXPECT_OK(CheckFreeSpace(Path("store"), 1 << 20));
  EXPECT_THAT(CheckFreeSpace(Path("store"), RequiredFreeBytes(1 << 20, 64)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(Path("store")), HasSubstr("MiB free"),
                             HasSubstr("at least 66.0 MiB are needed"))));
}

// 0 when `status` is the store's refusal for want of space naming `path`, else 3 (printed).
int RefusedForSpace(const absl::Status& status, const std::string& path) {
  if (absl::IsResourceExhausted(status) && absl::StrContains(status.message(), path) &&
      absl::StrContains(status.message(), "are needed")) {
    return 0;
  }
  std::fprintf(stderr, "unexpected status: %s\n", status.ToString().c_str());
  return 3;
}

// The finding: "No space left on device", then the process died on a RocksDB assertion. The
// commit's error must say why, and closing the store must not abort.
TEST_F(StoreFullDiskTest, ACommitOnAFullDiskFailsWithTheCauseAndTheStoreClosesCleanly) {
  if (!Mount("8m")) GTEST_SKIP() << reason_;
  MakeStore(1);
  ExpectInChild([&] {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore();
    if (!store.ok()) return 4;
    Fill();
    const int verdict = RefusedForSpace((*store)->CommitRound(CommitOf(2, 200'000)), Path("store"));
    store->reset();  // close on the full disk
    return verdict;
  });
  // Space freed: the committed round is still there and the store takes commits again.
  std::filesystem::remove(Path("filler"));
  ASSERT_OK_AND_ASSIGN(auto store, OpenStore());
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, store->LoadMeta());
  EXPECT_EQ(meta.committed_round(), 1);
  EXPECT_OK(store->CommitRound(CommitOf(2, 1000)));
}

// The finding: started again on the full disk, the server aborted within a second (RocksDB's
// open writes a MANIFEST, an OPTIONS file and a log). The open is refused with the cause.
TEST_F(StoreFullDiskTest, OpeningOnAFullDiskIsRefusedWithTheCause) {
  if (!Mount("8m")) GTEST_SKIP() << reason_;
  MakeStore(0);
  ExpectInChild([&] {
    Fill();
    return RefusedForSpace(OpenStore().status(), Path("store"));
  });
}

// A profile write on a full disk (registrations keep coming while the disk fills) is refused
// with the cause, and the store still closes without an abort.
TEST_F(StoreFullDiskTest, AProfileWriteOnAFullDiskFailsAndTheStoreClosesCleanly) {
  if (!Mount("8m")) GTEST_SKIP() << reason_;
  MakeStore(0);
  ExpectInChild([&] {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenStore();
    if (!store.ok()) return 4;
    Fill();
    v1::ClientProfile profile;
    profile.set_client_id("c-1");
    profile.set_identity(std::string(1 << 20, 'x'));
    absl::Status s;
    for (int i = 0; i < 20 && s.ok(); ++i) s = (*store)->PutProfile(profile);
    store->reset();
    return RefusedForSpace(s, Path("store"));
  });
  std::filesystem::remove(Path("filler"));
  ASSERT_OK_AND_ASSIGN(auto store, OpenStore());
  EXPECT_OK(store->LoadMeta().status());
}

}  // namespace
}  // namespace fedsched
