#include "server/cli/store_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::cli {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/store_lock_XXXXXX";
  return ::mkdtemp(pattern.data());
}

TEST(StoreLockTest, FreeStoreIsNotInUse) {
  const std::string dir = TempDir();
  EXPECT_TRUE(CheckStoreNotInUse(dir).ok());  // no LOCK file
  const int fd = ::open((dir + "/LOCK").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(CheckStoreNotInUse(dir).ok());  // LOCK file nobody holds
  std::filesystem::remove_all(dir);
}

// Another process takes the write lock on LOCK the way RocksDB does (fcntl F_SETLK).
TEST(StoreLockTest, StoreLockedByAnotherProcessIsInUse) {
  const std::string dir = TempDir();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open((dir + "/LOCK").c_str(), O_RDWR | O_CREAT, 0600);
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    const char ok = (fd >= 0 && ::fcntl(fd, F_SETLK, &lock) == 0) ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    ::pause();  // hold the lock until killed
    std::_Exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  const absl::Status s = CheckStoreNotInUse(dir);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("in use by a running server"));
  EXPECT_THAT(s.message(), HasSubstr("pid " + std::to_string(child)));
  EXPECT_TRUE(CheckStoreNotInUse(dir).ok());  // released when the holder died
  std::filesystem::remove_all(dir);
}

TEST(StoreLockTest, RocksDbLockErrorIsExplained) {
  const absl::Status raw = absl::InternalError(
      "open store at /tmp/s: IO error: While lock file: /tmp/s/LOCK: Resource temporarily "
      "unavailable");
  const absl::Status s = ExplainStoreOpenError("/tmp/s", raw);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("the store at /tmp/s is in use by a running server"));
  const absl::Status other = absl::DataLossError("damaged");
  EXPECT_EQ(ExplainStoreOpenError("/tmp/s", other), other);
}

}  // namespace
}  // namespace fedsched::cli
