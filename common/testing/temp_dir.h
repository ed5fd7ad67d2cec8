// A fresh directory per test, and files written with an exact mode, for tests that work with
// real files (stores, secrets, traces).
#ifndef FEDSCHED_COMMON_TESTING_TEMP_DIR_H_
#define FEDSCHED_COMMON_TESTING_TEMP_DIR_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace fedsched::testing {

// <temp dir>/<prefix>_<pid>_<test name>, emptied and created (mode from the umask). The caller
// removes it when done.
inline std::filesystem::path FreshTestDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(::getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `text` to `path` with exactly `mode`, whatever the umask; returns `path`.
inline std::string WriteWithMode(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0) << path;
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size())) << path;
  ::close(fd);
  EXPECT_EQ(::chmod(path.c_str(), mode), 0) << path;
  return path;
}

// A fixture with a fresh directory per test (FreshTestDir), removed after a passing test (kept
// after a failure, for its logs).
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = FreshTestDir("fedsched_test"); }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    return WriteWithMode(Path(name), text, mode);
  }

  std::filesystem::path dir_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_COMMON_TESTING_TEMP_DIR_H_
