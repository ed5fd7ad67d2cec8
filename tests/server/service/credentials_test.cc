// The server's secrets on disk (server/service/credentials.h, common/transport.h): the operator
// token, the enrolment key and the TLS key are read only when this uid's, closed to group and
// others, and not through a symbolic link. Another local user is simulated by chown to 65534.
#include "server/service/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/transport.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class SecretFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("secrets_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = Path(name);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(SecretFilesTest, OperatorTokenIsCreatedPrivateAndReadBack) {
  ASSERT_OK_AND_ASSIGN(std::string created, ReadOrCreateToken(Path("operator_token")));
  EXPECT_EQ(created.size(), 64u);
  ASSERT_OK_AND_ASSIGN(std::string again, ReadOrCreateToken(Path("operator_token")));
  EXPECT_EQ(again, created);
}

// The finding: a token another local user planted (in a store they pre-created) opened GetStatus.
TEST_F(SecretFilesTest, AnOperatorTokenOfAnotherUidIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the token to uid 65534";
  const std::string path = Write("operator_token", "0123456789abcdef0123456789abcdef\n", 0600);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  EXPECT_THAT(ReadOrCreateToken(path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(path), HasSubstr("owned by uid 65534"))));
  EXPECT_THAT(ReadSecretFile(path, 16),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
}

TEST_F(SecretFilesTest, ASymlinkedOperatorTokenOrEnrolmentKeyIsNotFollowed) {
  const std::string real = Write("real_token", "0123456789abcdef0123456789abcdef\n", 0600);
  std::filesystem::create_symlink(real, Path("operator_token"));
  EXPECT_THAT(ReadOrCreateToken(Path("operator_token")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
  EXPECT_THAT(ReadSecretFile(Path("operator_token"), 16),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
}

TEST_F(SecretFilesTest, TheServersTlsKeyMustBePrivate) {
  v1::TransportConfig transport;
  transport.set_tls_cert_path(Write("server.pem", "not read: the key is refused first", 0644));
  transport.set_tls_key_path(Write("server.key", "-----BEGIN PRIVATE KEY-----\n", 0644));
  EXPECT_THAT(MakeServerCredentials(transport),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(Path("server.key")), HasSubstr("mode 0644"))));
  std::filesystem::remove(Path("server.key"));
  std::filesystem::create_symlink(Write("elsewhere.key", "k", 0600), Path("server.key"));
  EXPECT_THAT(MakeServerCredentials(transport),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("symbolic link")));
}

}  // namespace
}  // namespace fedsched
