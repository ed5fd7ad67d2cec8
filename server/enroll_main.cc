// fedsched-enroll: provisions what a device or an aggregator needs to be admitted
// (docs/SECURITY.md "Identities and admission" and "Relays").
//
// A device: its enrolment secret, derived from the server's enrolment key
// (security.enrolment_key_path, default <store_path>/enrolment_key). With --state_dir it writes
// the device's state dir as the SDK reads it: `credential` and, when --identity is not given,
// the install's `identity` (kept if the state dir has one, else random; printed on stdout).
//
//   fedsched-enroll --key_file=STORE/enrolment_key --identity=device-3 [--out=FILE]
//   fedsched-enroll --key_file=STORE/enrolment_key --state_dir=DIR [--identity=ID]
//
// --create_key makes the key file first when it is missing, and its missing folders (0700): a
// script provisioning devices before the server's first start.
//
// An aggregator: its own token, kept by the root as <aggregator_token_dir>/<id> (created 0600
// with a random token when missing, the folder and its missing parents 0700, so before the
// root's first start too) and copied to --out for the aggregator's
// hierarchy.upstream_token_path.
//
//   fedsched-enroll --aggregator_token_dir=STORE/aggregator_tokens --aggregator_id=agg-1
//       --out=agg-1.token      (one command line)
//
// Re-enrol an identity: clear the credential or certificate it is bound to in a stopped
// server's store, so that its next registration binds whatever it then presents (a new
// certificate, a credential issued at first use). Its profile and history stay.
//   fedsched-enroll --store_path=STORE --reset_identity=device-3
// This also clears the identity's signing key, and lifts a revocation and a secure-aggregation
// exclusion of the identity.
//
// Revoke an identity (docs/OPERATIONS.md "Revoking a device"), known to the store or not: the
// stopped server's store records it, and the server then refuses its registrations whatever
// credential or certificate it presents, until --reset_identity lifts it.
//   fedsched-enroll --store_path=STORE --revoke_identity=device-3

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/state_dir.h"
#include "common/flags_usage.h"
#include "server/enroll_store_ops.h"
#include "server/service/credentials.h"

ABSL_FLAG(std::string, key_file, "", "The server's enrolment key (mode 0600).");
ABSL_FLAG(bool, create_key, false,
          "Create --key_file (0600, random) when missing, e.g. <store_path>/enrolment_key "
          "before the server's first start.");
ABSL_FLAG(std::string, identity, "",
          "The device identity to enrol. With --state_dir and no --identity: STATE_DIR/identity, "
          "made at random when missing.");
ABSL_FLAG(std::string, state_dir, "",
          "Write the device's STATE_DIR/credential (and identity) there (created 0700).");
ABSL_FLAG(std::string, out, "", "Write the secret to this file (0600) instead of stdout.");
ABSL_FLAG(std::string, aggregator_token_dir, "",
          "The root's hierarchy.aggregator_token_dir: provision an aggregator instead.");
ABSL_FLAG(std::string, aggregator_id, "", "The aggregator to provision (its aggregator_id).");
ABSL_FLAG(std::string, store_path, "",
          "With --reset_identity or --revoke_identity: the store of the stopped server (its "
          "store_path).");
ABSL_FLAG(std::string, reset_identity, "",
          "Clears this identity's credential or certificate binding, its signing key, its "
          "secure-aggregation exclusion and its revocation in --store_path (the server must be "
          "stopped), so that it can register again with a new credential, certificate or "
          "signing key.");
ABSL_FLAG(std::string, revoke_identity, "",
          "Revokes this identity in --store_path (the server must be stopped): the server "
          "refuses its registrations whatever it presents, until --reset_identity. The "
          "identity need not be known to the store yet.");

namespace {

// Writes `text` + "\n" to `path`, mode 0600, never through a symlink. Returns false on failure.
bool WritePrivate(const std::string& path, const std::string& text) {
  const std::string line = text + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                  ::fchmod(fd, 0600) == 0;
  ::close(fd);
  return ok;
}

// Creates every missing directory of `dir`, its parents included, with mode 0700 (as the server
// makes its store), so that a token or key can be provisioned before the server's first start.
// Directories that exist are left as they are. Errors: INTERNAL naming the directory.
absl::Status MakeMissingDirs(const std::string& dir) {
  std::filesystem::path prefix;
  for (const std::filesystem::path& part : std::filesystem::path(dir)) {
    prefix /= part;
    if (part.empty() || part == "/" || part == "." || part == "..") continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create ", prefix.string(), ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// The device's identity file holds `identity`: written (0600) when missing; false when it names
// another identity or cannot be written.
bool WriteIdentityOnce(const std::string& path, const std::string& identity) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT && WritePrivate(path, identity);
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  ::close(fd);
  return n >= 0 && absl::StripAsciiWhitespace(absl::string_view(buffer, n)) == identity;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "fedsched-enroll: %s\n", message.c_str());
  return 2;
}

int ProvisionAggregator(const std::string& dir, const std::string& id, const std::string& out) {
  if (id.empty() || id[0] == '.' || id.find('/') != std::string::npos) {
    return Fail("--aggregator_id must be a plain file name (no '/', not starting with '.')");
  }
  if (absl::Status s = MakeMissingDirs(dir); !s.ok()) return Fail(s.ToString());
  absl::StatusOr<std::string> token = fedsched::ReadOrCreateToken(dir + "/" + id);
  if (!token.ok()) return Fail(token.status().ToString());
  if (out.empty()) {
    std::printf("%s\n", token->c_str());
    return 0;
  }
  return WritePrivate(out, *token) ? 0 : Fail(absl::StrCat("cannot write ", out));
}

int ProvisionDevice(std::string identity, const std::string& state_dir, const std::string& out) {
  if (identity.empty() && state_dir.empty()) return Fail("--identity or --state_dir is required");
  if (!identity.empty()) {
    if (absl::Status s = fedsched::CheckIdentity(identity); !s.ok()) {
      return Fail(absl::StrCat("--identity: ", s.message()));
    }
  }
  const std::string key_file = absl::GetFlag(FLAGS_key_file);
  const std::string key_dir = std::filesystem::path(key_file).parent_path().string();
  if (absl::GetFlag(FLAGS_create_key) && !key_dir.empty()) {
    if (absl::Status s = MakeMissingDirs(key_dir); !s.ok()) return Fail(s.ToString());
  }
  absl::StatusOr<std::string> key = absl::GetFlag(FLAGS_create_key)
                                        ? fedsched::ReadOrCreateToken(key_file)
                                        : fedsched::ReadSecretFile(key_file, 16);
  if (!key.ok()) return Fail(key.status().ToString());
  if (!state_dir.empty()) {
    // The state dir as the SDK keeps it: private, and the install's identity read from it or
    // made up at random there (so re-provisioning a device keeps its identity).
    if (absl::Status s = fedsched::MakePrivateDir(state_dir); !s.ok()) return Fail(s.ToString());
    if (identity.empty()) {
      absl::StatusOr<std::string> kept = fedsched::ReadOrCreateIdentity(state_dir);
      if (!kept.ok()) return Fail(kept.status().ToString());
      identity = *std::move(kept);
      std::printf("%s\n", identity.c_str());
    } else if (!WriteIdentityOnce(state_dir + "/identity", identity)) {
      return Fail(absl::StrCat(state_dir,
                               "/identity names another identity (or cannot be "
                               "written): the device would register as that one"));
    }
  }
  const std::string secret = fedsched::EnrolmentSecret(*key, identity);
  const std::string path = !out.empty() ? out : state_dir.empty() ? "" : state_dir + "/credential";
  if (path.empty()) {
    std::printf("%s\n", secret.c_str());
    return 0;
  }
  return WritePrivate(path, secret) ? 0 : Fail(absl::StrCat("cannot write ", path));
}

}  // namespace

int main(int argc, char** argv) {
  fedsched::SetUsage(
      "Provisions a device: fedsched-enroll --key_file=KEY (--identity=ID | --state_dir=DIR) "
      "[--out=FILE]; or an aggregator: fedsched-enroll --aggregator_token_dir=DIR "
      "--aggregator_id=ID [--out=FILE]; or re-enrols an identity in a stopped server's store: "
      "fedsched-enroll --store_path=STORE --reset_identity=ID; or revokes one: fedsched-enroll "
      "--store_path=STORE --revoke_identity=ID");
  absl::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string reset = absl::GetFlag(FLAGS_reset_identity);
  const std::string revoke = absl::GetFlag(FLAGS_revoke_identity);
  if (!reset.empty() || !revoke.empty()) {
    if (!reset.empty() && !revoke.empty())
      return Fail("give --reset_identity or --revoke_identity");
    if (absl::GetFlag(FLAGS_store_path).empty()) {
      return Fail(absl::StrCat(reset.empty() ? "--revoke_identity" : "--reset_identity",
                               " needs --store_path"));
    }
    return reset.empty() ? fedsched::RevokeIdentity(absl::GetFlag(FLAGS_store_path), revoke)
                         : fedsched::ResetIdentity(absl::GetFlag(FLAGS_store_path), reset);
  }
  if (!absl::GetFlag(FLAGS_aggregator_token_dir).empty() ||
      !absl::GetFlag(FLAGS_aggregator_id).empty()) {
    if (absl::GetFlag(FLAGS_aggregator_token_dir).empty()) {
      return Fail("--aggregator_id needs --aggregator_token_dir");
    }
    return ProvisionAggregator(absl::GetFlag(FLAGS_aggregator_token_dir),
                               absl::GetFlag(FLAGS_aggregator_id), out);
  }
  return ProvisionDevice(absl::GetFlag(FLAGS_identity), absl::GetFlag(FLAGS_state_dir), out);
}
