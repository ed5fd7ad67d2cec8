// fedsched-enroll: the operator's enrolment tool (docs/OPERATIONS.md "Provisioning devices" and
// "Re-enrolling a device").
//
// Derive a device's enrolment secret from the server's enrolment key
// (security.enrolment_key_path), to install on the device as <state_dir>/credential (0600):
//   fedsched-enroll --key_file=enrolment.key --identity=device-3 [--out=STATE_DIR/credential]
//
// Re-enrol an identity: clear the credential or certificate it is bound to in a stopped
// server's store, so that its next registration binds whatever it then presents (a new
// certificate, a freshly issued credential). Its profile and history stay.
//   fedsched-enroll --store_path=STORE --reset_identity=device-3
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/private_file.h"
#include "server/cli/store_lock.h"
#include "server/service/credentials.h"
#include "server/store/store.h"

ABSL_FLAG(std::string, key_file, "", "The server's enrolment key (mode 0600).");
ABSL_FLAG(std::string, identity, "", "The device identity to enrol.");
ABSL_FLAG(std::string, out, "", "Write the secret to this file (0600) instead of stdout.");
ABSL_FLAG(std::string, store_path, "",
          "With --reset_identity: the store of the stopped server (its store_path).");
ABSL_FLAG(std::string, reset_identity, "",
          "Clears this identity's credential or certificate binding in --store_path (the "
          "server must be stopped), so that it can register again with a new one.");

namespace fedsched {
namespace {

// Clears the binding of `identity` in the store at `path`. Exit code: 0 done, 1 no such
// identity, 2 the store cannot be used (missing, in use, not private).
int ResetIdentity(const std::string& path, const std::string& identity) {
  std::error_code error;
  if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT", error)) {
    std::fprintf(stderr, "fedsched-enroll: no fedsched store (RocksDB) at %s\n", path.c_str());
    return 2;
  }
  if (absl::Status s = CheckPrivateDirectory(path); !s.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  if (absl::Status s = cli::CheckStoreNotInUse(path); !s.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  ::umask(077);  // whatever RocksDB writes stays private, as the server's own files
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = path, .keep_models = 0});
  if (!store.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n",
                 cli::ExplainStoreOpenError(path, store.status()).ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::vector<v1::ClientProfile>> profiles = (*store)->LoadProfiles();
  if (!profiles.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", profiles.status().ToString().c_str());
    return 2;
  }
  for (v1::ClientProfile& profile : *profiles) {
    if (profile.identity() != identity) continue;
    const bool was_bound = !profile.cert_fingerprint().empty();
    profile.clear_cert_fingerprint();
    if (absl::Status s = (*store)->PutProfile(profile); !s.ok()) {
      std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
      return 2;
    }
    std::printf(
        "fedsched-enroll: identity '%s' (%s) %s; its next registration binds the credential or "
        "certificate it presents. Start the server, then the device.\n",
        identity.c_str(), profile.client_id().c_str(),
        was_bound ? "is no longer bound to a credential" : "was not bound to a credential");
    return 0;
  }
  std::fprintf(stderr, "fedsched-enroll: the store at %s holds no identity '%s'\n", path.c_str(),
               identity.c_str());
  return 1;
}

int DeriveSecret(const std::string& identity) {
  absl::StatusOr<std::string> key = ReadSecretFile(absl::GetFlag(FLAGS_key_file), 16);
  if (!key.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", key.status().ToString().c_str());
    return 2;
  }
  const std::string secret = EnrolmentSecret(*key, identity) + "\n";
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(secret.c_str(), stdout);
    return 0;
  }
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size())) {
    std::fprintf(stderr, "fedsched-enroll: cannot write %s\n", out.c_str());
    return 1;
  }
  ::fchmod(fd, 0600);
  ::close(fd);
  return 0;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Prints a device's enrolment secret: fedsched-enroll --key_file=KEY --identity=ID "
      "[--out=FILE]; or re-enrols an identity in a stopped server's store: fedsched-enroll "
      "--store_path=STORE --reset_identity=ID");
  absl::ParseCommandLine(argc, argv);
  const std::string reset = absl::GetFlag(FLAGS_reset_identity);
  if (!reset.empty()) {
    if (absl::GetFlag(FLAGS_store_path).empty()) {
      std::fprintf(stderr, "fedsched-enroll: --reset_identity needs --store_path\n");
      return 2;
    }
    return fedsched::ResetIdentity(absl::GetFlag(FLAGS_store_path), reset);
  }
  const std::string identity = absl::GetFlag(FLAGS_identity);
  if (identity.empty()) {
    std::fprintf(stderr, "fedsched-enroll: --identity (or --reset_identity) is required\n");
    return 2;
  }
  return fedsched::DeriveSecret(identity);
}
