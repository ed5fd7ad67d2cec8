// A fresh scratch directory per test, for stores and state files.
#ifndef FEDSCHED_COMMON_TESTING_TEMP_DIR_H_
#define FEDSCHED_COMMON_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace fedsched::testing {

// <system temp dir>/<prefix>_<pid>_<current test's name>, emptied and created. Unique per process
// and test, so parallel CTest runs never share one. The caller removes it (TearDown).
inline std::filesystem::path FreshTestDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(::getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_COMMON_TESTING_TEMP_DIR_H_
