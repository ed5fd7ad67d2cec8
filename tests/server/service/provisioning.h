// Provisioned test devices (docs/guides/SECURITY.md "Identities and admission"): the coordinator
// admits only devices that present an enrolment secret (or a certificate), so in-process tests give
// their coordinator kTestEnrolmentKey and their devices the secrets derived from it, as
// fedsched-enroll would provision them.
#ifndef FEDSCHED_TESTS_SERVER_SERVICE_PROVISIONING_H_
#define FEDSCHED_TESTS_SERVER_SERVICE_PROVISIONING_H_

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fedsched/v1/coordinator.pb.h"
#include "server/service/credentials.h"

namespace fedsched::testing {

// The enrolment key of in-process test servers (TestServer's default).
inline constexpr char kTestEnrolmentKey[] = "fedsched-test-enrolment-key";

// The enrolment secret of `identity` under kTestEnrolmentKey.
inline std::string TestCredential(const std::string& identity) {
  return EnrolmentSecret(kTestEnrolmentKey, identity);
}

// Writes <state_dir>/credential (0600, the folder made 0700 first) holding `identity`'s secret
// under kTestEnrolmentKey, as `fedsched-enroll --state_dir` does, for an SDK client that reads
// its credential from its state dir.
inline absl::Status ProvisionStateDir(const std::string& state_dir, const std::string& identity) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  std::filesystem::permissions(state_dir, std::filesystem::perms::owner_all, ec);
  const std::string path = state_dir + "/credential";
  std::ofstream(path, std::ios::trunc) << TestCredential(identity) << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot provision ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// `request` with the enrolment secret of its identity under kTestEnrolmentKey.
inline v1::RegisterRequest Provisioned(v1::RegisterRequest request) {
  request.set_credential(TestCredential(request.identity()));
  return request;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_SERVICE_PROVISIONING_H_
