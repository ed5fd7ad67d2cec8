// Files the server trusts (common/private_file.h): secrets and the store must be this uid's,
// closed to group and others, and never reached through a symbolic link. The tests run as root
// in CI; another local user is simulated by chown to uid 65534 (nobody).
#include "common/private_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uid_t kOtherUid = 65534;

class PrivateFileTest : public ::fedsched::testing::TempDirTest {
 protected:
  // Skips the test when this process cannot give a file away (not root).
  bool CanChown() const { return ::geteuid() == 0; }
};

TEST_F(PrivateFileTest, ReadsAPrivateFileOfThisUid) {
  const std::string path = Write("token", "secret\n", 0600);
  ASSERT_OK_AND_ASSIGN(std::string text, ReadPrivateFile(path));
  EXPECT_EQ(text, "secret\n");
  EXPECT_THAT(ReadPrivateFile(Path("absent")), StatusIs(absl::StatusCode::kNotFound, ::testing::_));
}

TEST_F(PrivateFileTest, RefusesAFileOwnedByAnotherUid) {
  if (!CanChown()) GTEST_SKIP() << "needs root to chown a file to uid " << kOtherUid;
  const std::string path = Write("token", "chosen-by-someone-else\n", 0600);
  ASSERT_EQ(::chown(path.c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_THAT(ReadPrivateFile(path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(path), HasSubstr("owned by uid 65534"),
                             HasSubstr("mode 0600"), HasSubstr("Remove it"))));
}

TEST_F(PrivateFileTest, RefusesAFileOpenToGroupOrOthers) {
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    const std::string path = Write("token", "secret\n", mode);
    EXPECT_THAT(ReadPrivateFile(path),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr(path), HasSubstr("open to group or others"),
                               HasSubstr("chmod 600"))))
        << std::oct << mode;
  }
}

TEST_F(PrivateFileTest, NeverFollowsASymbolicLinkEvenToAPrivateFile) {
  const std::string target = Write("real", "secret\n", 0600);
  std::filesystem::create_symlink(target, Path("link"));
  EXPECT_THAT(ReadPrivateFile(Path("link")),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(Path("link")), HasSubstr("symbolic link"))));
}

TEST_F(PrivateFileTest, DirectoryChecks) {
  // Absent: fine (the server creates it 0700).
  EXPECT_OK(CheckPrivateDirectory(Path("new")));
  ASSERT_OK(EnsurePrivateDirectory(Path("new")));
  struct stat st;
  ASSERT_EQ(::stat(Path("new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_OK(CheckPrivateDirectory(Path("new")));

  ASSERT_EQ(::mkdir(Path("open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(Path("open").c_str(), 0755), 0);
  EXPECT_THAT(
      CheckPrivateDirectory(Path("open")),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr(Path("open")), HasSubstr("mode 0755"), HasSubstr("chmod 700"))));

  std::filesystem::create_directory_symlink(Path("new"), Path("link"));
  EXPECT_THAT(CheckPrivateDirectory(Path("link")),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(Path("link")), HasSubstr("symbolic link"))));
  EXPECT_THAT(EnsurePrivateDirectory(Path("link")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  // "link/" and "link/." name the link's target for lstat: the check looks at the link itself.
  for (const char* tail : {"/", "/.", "//", "/./"}) {
    EXPECT_THAT(CheckPrivateDirectory(Path("link") + tail),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("symbolic link")))
        << tail;
  }
  EXPECT_EQ(WithoutTrailingSeparators("/"), "/");
  EXPECT_EQ(WithoutTrailingSeparators("a/b/./"), "a/b");

  Write("file", "x", 0600);
  EXPECT_THAT(CheckPrivateDirectory(Path("file")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not a directory")));
}

TEST_F(PrivateFileTest, RefusesADirectoryOwnedByAnotherUid) {
  if (!CanChown()) GTEST_SKIP() << "needs root to chown a directory to uid " << kOtherUid;
  ASSERT_EQ(::mkdir(Path("theirs").c_str(), 0700), 0);
  ASSERT_EQ(::chown(Path("theirs").c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_THAT(EnsurePrivateDirectory(Path("theirs")),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(Path("theirs")), HasSubstr("owned by uid 65534"))));
}

}  // namespace
}  // namespace fedsched
