// The server's secrets on disk (server/service/credentials.h, common/transport.h): the operator
// token, the enrolment key and the TLS key are read only when this uid's, closed to group and
// others, and not through a symbolic link. Another local user is simulated by chown to 65534.
#include "server/service/credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "common/transport.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using SecretFilesTest = ::fedsched::testing::TempDirTest;

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
