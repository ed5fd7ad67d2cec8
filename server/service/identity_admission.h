// Admission of device identities at registration (docs/guides/SECURITY.md "Identities and
// admission"): the proof an identity presents (enrolment secret, client certificate, or a
// credential issued on first use), the operator's revocations, the room for new identities
// (security .max_identities and the never-proven share of it), and the rate of new identities per
// peer and overall. Owned by the Coordinator, which binds the proof to the identity's profile.
#ifndef FEDSCHED_SERVER_SERVICE_IDENTITY_ADMISSION_H_
#define FEDSCHED_SERVER_SERVICE_IDENTITY_ADMISSION_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fedsched/v1/config.pb.h"
#include "server/profile/profile_book.h"
#include "server/store/store.h"

namespace fedsched {

// What a profile stores for a credential issued on first use (never the credential itself).
std::string FirstUseBinding(std::string_view credential);

// How a registration proves its identity.
struct Admission {
  // What the profile is bound to (ClientProfile.cert_fingerprint); empty for a first-use
  // registration without a credential (one is issued).
  std::string binding;
  // An enrolment secret or a certificate vouches for the identity.
  bool provisioned = false;
};

// The checks that need no state beyond the config, the enrolment key and the revocations.
// Immutable after construction: every method may be called concurrently.
class IdentityAdmission {
 public:
  // `config` is not owned and must outlive this; `enrolment_key` is
  // security.enrolment_key_path's contents ("" = none); `revocations` as Store::LoadRevocations.
  IdentityAdmission(const v1::ServerConfig& config, std::string enrolment_key,
                    const std::vector<Revocation>& revocations);

  // PERMISSION_DENIED, naming the identity and how the operator lifts it, if `identity` was
  // revoked (docs/guides/OPERATIONS.md "Revoking a device"); OK otherwise.
  [[nodiscard]] absl::Status CheckNotRevoked(const std::string& identity) const;
  // The revoked identities, sorted.
  std::vector<std::string> revoked_identities() const;
  int64_t revoked_count() const { return static_cast<int64_t>(revoked_.size()); }
  // Checks the proof of a registration: `credential` as presented, `cert_fingerprint` the
  // SHA-256 of its TLS client certificate ("" without mutual TLS). Errors: UNAUTHENTICATED
  // without an enrolment secret (with a key) or without any proof (no key, no certificate),
  // unless security.allow_trust_on_first_use.
  [[nodiscard]] absl::StatusOr<Admission> Admit(const std::string& identity,
                                                const std::string& credential,
                                                const std::string& cert_fingerprint) const;
  // Room in `book` for a new identity: RESOURCE_EXHAUSTED at security.max_identities live
  // identities or, for an unprovisioned one, at max_unproven_identity_fraction x max_identities
  // never-proven ones (ProfileBook::CountUnproven).
  [[nodiscard]] absl::Status CheckIdentityRoom(const profile::ProfileBook& book,
                                               bool provisioned) const;

 private:
  const v1::ServerConfig& config_;
  const std::string enrolment_key_;
  // Revoked identity -> unix ms of its revocation.
  absl::flat_hash_map<std::string, int64_t> revoked_;
};

// Registration rate limits (security.max_new_identities_per_minute over all peers,
// max_new_identities_per_peer_per_minute per peer address, both in a sliding minute). Memory is
// bounded: peers quiet for a minute are forgotten. Not thread-safe (the coordinator calls it
// under its lock).
class RegistrationRateLimit {
 public:
  // `config` is not owned and must outlive this.
  explicit RegistrationRateLimit(const v1::ServerConfig& config) : config_(config) {}
  // Records a new identity from `peer_address` ("" = unknown: only the global limit applies) at
  // `now`. Errors: RESOURCE_EXHAUSTED at either limit (nothing recorded then).
  [[nodiscard]] absl::Status Admit(const std::string& peer_address, absl::Time now);

 private:
  const v1::ServerConfig& config_;
  // Times of the new identities registered from each peer address in the last minute.
  absl::flat_hash_map<std::string, std::deque<absl::Time>> by_peer_;
  absl::Time last_peer_sweep_ = absl::InfinitePast();
  // Times of the new identities registered from all peers in the last minute.
  std::deque<absl::Time> all_peers_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_IDENTITY_ADMISSION_H_
