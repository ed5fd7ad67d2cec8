// fedsched-enroll's operations on a stopped server's store: re-enrolment and revocation of an
// identity (docs/guides/SECURITY.md "Operator procedures", docs/guides/OPERATIONS.md "Re-enrolling
// a device" and "Revoking a device").
#include "server/enroll_store_ops.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/private_file.h"
#include "server/cli/store_lock.h"
#include "server/store/store.h"

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

// Clears what binds a device to what it presented: its credential or certificate, its signing
// key and its secure-aggregation exclusion.
void ClearBinding(v1::ClientProfile& profile) {
  profile.clear_cert_fingerprint();
  profile.clear_signing_public_key();
  profile.clear_secagg_excluded();
  profile.clear_secagg_excluded_unix_ms();
}

// Clears the binding of `identity` in every job namespace's copy of its profile too (each job
// keeps its own profiles, docs/guides/JOBS.md), so that no job holds it to the old key.
absl::Status ResetInJobNamespaces(Store& store, const std::string& identity) {
  absl::StatusOr<std::vector<std::string>> namespaces = store.ListNamespaces();
  if (!namespaces.ok()) return namespaces.status();
  for (const std::string& ns : *namespaces) {
    absl::StatusOr<std::unique_ptr<Store>> view = store.OpenNamespace(ns);
    if (!view.ok()) return view.status();
    absl::StatusOr<std::optional<v1::ClientProfile>> profile = FindProfile(**view, identity);
    if (!profile.ok()) return profile.status();
    if (!profile->has_value()) continue;
    ClearBinding(**profile);
    if (absl::Status s = (*view)->PutProfile(**profile); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

// Re-enrols `identity` in the store at `path`: clears its credential or certificate binding, its
// signing key and its secure-aggregation exclusion, and lifts its revocation. Exit code: 0 done, 1
// the store knows no such identity, 2 the store cannot be used (missing, in use, not private).
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
  const bool had_key = !p.signing_public_key().empty();
  ClearBinding(p);
  absl::Status s = store->PutProfile(p);
  if (s.ok()) s = ResetInJobNamespaces(*store, identity);
  if (!s.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", s.ToString().c_str());
    return 2;
  }
  std::printf(
      "fedsched-enroll: identity '%s' (%s) %s%s%s%s; its next registration binds the "
      "credential or certificate and the signing key it presents. Start the server, then the "
      "device.\n",
      identity.c_str(), p.client_id().c_str(),
      was_bound ? "is no longer bound to a credential" : "was not bound to a credential",
      had_key ? ", is no longer bound to a signing key" : "",
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

}  // namespace fedsched
