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
// This also lifts a revocation and a secure-aggregation exclusion of the identity.
//
// Revoke an identity (docs/OPERATIONS.md "Revoking a device"), known to the store or not: the
// stopped server's store records it, and the server then refuses its registrations whatever
// credential or certificate it presents, until --reset_identity lifts it.
//   fedsched-enroll --store_path=STORE --revoke_identity=device-3
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/private_file.h"
#include "server/cli/store_lock.h"
#include "server/service/credentials.h"
#include "server/store/store.h"

ABSL_FLAG(std::string, key_file, "", "The server's enrolment key (mode 0600).");
ABSL_FLAG(std::string, identity, "", "The device identity to enrol.");
ABSL_FLAG(std::string, out, "", "Write the secret to this file (0600) instead of stdout.");
ABSL_FLAG(std::string, store_path, "",
          "With --reset_identity or --revoke_identity: the store of the stopped server (its "
          "store_path).");
ABSL_FLAG(std::string, reset_identity, "",
          "Clears this identity's credential or certificate binding, its secure-aggregation "
          "exclusion and its revocation in --store_path (the server must be stopped), so that "
          "it can register again with a new credential or certificate.");
ABSL_FLAG(std::string, revoke_identity, "",
          "Revokes this identity in --store_path (the server must be stopped): the server "
          "refuses its registrations whatever it presents, until --reset_identity. The "
          "identity need not be known to the store yet.");

namespace fedsched {
namespace {

// Opens the store of a stopped server at `path` into `store`. Returns 0, or the exit code 2
// after printing why the store cannot be used (missing, not private, in use, unreadable).
int OpenStoppedStore(const std::string& path, std::unique_ptr<Store>* store) {
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
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open({.path = path, .keep_models = 0});
  if (!opened.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n",
                 cli::ExplainStoreOpenError(path, opened.status()).ToString().c_str());
    return 2;
  }
  *store = std::move(*opened);
  return 0;
}

// The stored profile of `identity`, or nullopt; an unreadable store is an error.
absl::StatusOr<std::optional<v1::ClientProfile>> FindProfile(const Store& store,
                                                             const std::string& identity) {
  absl::StatusOr<std::vector<v1::ClientProfile>> profiles = store.LoadProfiles();
  if (!profiles.ok()) return profiles.status();
  for (v1::ClientProfile& profile : *profiles) {
    if (profile.identity() == identity) return std::move(profile);
  }
  return std::nullopt;
}

// Re-enrols `identity` in the store at `path`: clears its credential or certificate binding and
// its secure-aggregation exclusion, and lifts its revocation. Exit code: 0 done, 1 the store
// knows no such identity, 2 the store cannot be used (missing, in use, not private).
int ResetIdentity(const std::string& path, const std::string& identity) {
  std::unique_ptr<Store> store;
  if (int code = OpenStoppedStore(path, &store); code != 0) return code;
  absl::StatusOr<std::optional<v1::ClientProfile>> profile = FindProfile(*store, identity);
  absl::StatusOr<bool> was_revoked = store->DeleteRevocation(identity);
  if (!profile.ok() || !was_revoked.ok()) {
    const absl::Status s = profile.ok() ? was_revoked.status() : profile.status();
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  if (!profile->has_value()) {
    if (!*was_revoked) {
      std::fprintf(stderr, "fedsched-enroll: the store at %s holds no identity '%s'\n",
                   path.c_str(), identity.c_str());
      return 1;
    }
    std::printf(
        "fedsched-enroll: identity '%s' (not yet seen by this server) is no longer "
        "revoked; it may register again. Start the server, then the device.\n",
        identity.c_str());
    return 0;
  }
  v1::ClientProfile& p = **profile;
  const bool was_bound = !p.cert_fingerprint().empty();
  const bool was_excluded = !p.secagg_excluded().empty();
  p.clear_cert_fingerprint();
  p.clear_secagg_excluded();
  p.clear_secagg_excluded_unix_ms();
  if (absl::Status s = store->PutProfile(p); !s.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf(
      "fedsched-enroll: identity '%s' (%s) %s%s%s; its next registration binds the credential "
      "or certificate it presents. Start the server, then the device.\n",
      identity.c_str(), p.client_id().c_str(),
      was_bound ? "is no longer bound to a credential" : "was not bound to a credential",
      *was_revoked ? ", is no longer revoked" : "",
      was_excluded ? ", may join secure-aggregation cohorts again" : "");
  return 0;
}

// Revokes `identity` in the store at `path`, known to it or not: the server refuses its
// registrations until --reset_identity. Exit code: 0 done (or already revoked), 2 the store
// cannot be used.
int RevokeIdentity(const std::string& path, const std::string& identity) {
  std::unique_ptr<Store> store;
  if (int code = OpenStoppedStore(path, &store); code != 0) return code;
  absl::StatusOr<std::vector<Revocation>> revocations = store->LoadRevocations();
  absl::StatusOr<std::optional<v1::ClientProfile>> profile = FindProfile(*store, identity);
  if (!revocations.ok() || !profile.ok()) {
    const absl::Status s = profile.ok() ? revocations.status() : profile.status();
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  const std::string known = profile->has_value() ? absl::StrCat("(", (*profile)->client_id(), ")")
                                                 : "(not yet seen by this server)";
  for (const Revocation& r : *revocations) {
    if (r.identity != identity) continue;
    std::printf("fedsched-enroll: identity '%s' %s was already revoked\n", identity.c_str(),
                known.c_str());
    return 0;
  }
  if (absl::Status s = store->PutRevocation({identity, absl::ToUnixMillis(absl::Now())}); !s.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf(
      "fedsched-enroll: identity '%s' %s is revoked: the server refuses its registrations "
      "whatever it presents. To undo: fedsched-enroll --store_path=%s --reset_identity=%s "
      "(with the server stopped).\n",
      identity.c_str(), known.c_str(), path.c_str(), identity.c_str());
  return 0;
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
      "--store_path=STORE --reset_identity=ID; or revokes one: fedsched-enroll "
      "--store_path=STORE --revoke_identity=ID");
  absl::ParseCommandLine(argc, argv);
  const std::string reset = absl::GetFlag(FLAGS_reset_identity);
  const std::string revoke = absl::GetFlag(FLAGS_revoke_identity);
  if (!reset.empty() || !revoke.empty()) {
    const char* const flag = reset.empty() ? "--revoke_identity" : "--reset_identity";
    if (!reset.empty() && !revoke.empty()) {
      std::fprintf(stderr, "fedsched-enroll: give --reset_identity or --revoke_identity\n");
      return 2;
    }
    if (absl::GetFlag(FLAGS_store_path).empty()) {
      std::fprintf(stderr, "fedsched-enroll: %s needs --store_path\n", flag);
      return 2;
    }
    return reset.empty() ? fedsched::RevokeIdentity(absl::GetFlag(FLAGS_store_path), revoke)
                         : fedsched::ResetIdentity(absl::GetFlag(FLAGS_store_path), reset);
  }
  const std::string identity = absl::GetFlag(FLAGS_identity);
  if (identity.empty()) {
    std::fprintf(stderr,
                 "fedsched-enroll: --identity (or --reset_identity, --revoke_identity) is "
                 "required\n");
    return 2;
  }
  return fedsched::DeriveSecret(identity);
}
