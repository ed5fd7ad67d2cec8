#include "server/service/identity_admission.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "server/service/credentials.h"

namespace fedsched {

std::string FirstUseBinding(std::string_view credential) {
  return absl::StrCat(profile::kFirstUseBindingPrefix, ToHex(Sha256(credential)));
}

IdentityAdmission::IdentityAdmission(const v1::ServerConfig& config, std::string enrolment_key,
                                     const std::vector<Revocation>& revocations)
    : config_(config), enrolment_key_(std::move(enrolment_key)) {
  for (const Revocation& r : revocations) revoked_[r.identity] = r.revoked_unix_ms;
}

absl::Status IdentityAdmission::CheckNotRevoked(const std::string& identity) const {
  auto it = revoked_.find(identity);
  if (it == revoked_.end()) return absl::OkStatus();
  // The same words as the SDK's test for a revocation (client/sdk/client.cc): keep both.
  return absl::PermissionDeniedError(absl::StrCat(
      "identity '", identity, "' was revoked by the operator at ",
      absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixMillis(it->second), absl::UTCTimeZone()),
      "; no credential or certificate is accepted for it. To undo: stop the server, run "
      "fedsched-enroll --store_path=STORE --reset_identity=",
      identity, " and start the server again"));
}

std::vector<std::string> IdentityAdmission::revoked_identities() const {
  std::vector<std::string> out;
  for (const auto& [identity, unused] : revoked_) out.push_back(identity);
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<Admission> IdentityAdmission::Admit(const std::string& identity,
                                                   const std::string& credential,
                                                   const std::string& cert_fingerprint) const {
  const bool has_key = !enrolment_key_.empty();
  const bool enrolled =
      has_key && ConstantTimeEquals(credential, EnrolmentSecret(enrolment_key_, identity));
  const bool first_use = config_.security().allow_trust_on_first_use();
  if (has_key && !enrolled && !first_use) {
    return absl::UnauthenticatedError(absl::StrCat(
        "identity '", identity,
        "' did not present its enrolment secret (the operator provisions it with fedsched-enroll "
        "into the device's state dir as 'credential')"));
  }
  if (!has_key && cert_fingerprint.empty() && !first_use) {
    return absl::UnauthenticatedError(absl::StrCat(
        "identity '", identity,
        "' presented neither an enrolment secret nor a client certificate, and the server "
        "admits provisioned devices only (security.allow_trust_on_first_use is off)"));
  }
  // What proves the identity: the TLS certificate, else the enrolment secret, else (first use)
  // the credential the server issued at the identity's first registration.
  Admission admission;
  admission.provisioned = enrolled || !cert_fingerprint.empty();
  if (!cert_fingerprint.empty()) {
    admission.binding = cert_fingerprint;
  } else if (enrolled) {
    admission.binding = CredentialBinding(credential);
  } else if (!credential.empty()) {
    admission.binding = FirstUseBinding(credential);
  }
  return admission;
}

absl::Status IdentityAdmission::CheckIdentityRoom(const profile::ProfileBook& book,
                                                  bool provisioned) const {
  const v1::SecurityConfig& security = config_.security();
  const int64_t max_identities = security.max_identities();
  if (max_identities > 0 && book.live_size() >= max_identities) {
    return absl::ResourceExhaustedError(absl::StrCat("the server holds ", book.live_size(),
                                                     " identities (security.max_identities)"));
  }
  if (provisioned || max_identities <= 0) return absl::OkStatus();
  // Never-proven identities keep their share, so a flood of them never locks out a device the
  // operator provisioned (docs/guides/SECURITY.md "Identities and admission").
  const int64_t unproven_room = static_cast<int64_t>(
      std::floor(security.max_unproven_identity_fraction() * static_cast<double>(max_identities)));
  const int64_t unproven = book.CountUnproven();
  if (unproven >= std::max<int64_t>(1, unproven_room)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", unproven,
        " identities admitted on first use that never had an update accepted "
        "(security.max_unproven_identity_fraction x max_identities); provisioned devices "
        "are still admitted"));
  }
  return absl::OkStatus();
}

absl::Status RegistrationRateLimit::Admit(const std::string& peer_address, absl::Time now) {
  const v1::SecurityConfig& security = config_.security();
  const int32_t global_limit = security.max_new_identities_per_minute();
  const int32_t peer_limit =
      peer_address.empty() ? 0 : security.max_new_identities_per_peer_per_minute();
  const absl::Time window_start = now - absl::Minutes(1);
  while (!all_peers_.empty() && all_peers_.front() <= window_start) {
    all_peers_.pop_front();
  }
  if (global_limit > 0 && static_cast<int64_t>(all_peers_.size()) >= global_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat(all_peers_.size(),
                     " new identities registered in the last minute from all peers "
                     "(security.max_new_identities_per_minute); retry later"));
  }
  std::deque<absl::Time>* times = nullptr;
  if (peer_limit > 0) {
    // Forget peers quiet for a minute, at most once a minute (bounded memory under churn).
    if (now - last_peer_sweep_ >= absl::Minutes(1)) {
      last_peer_sweep_ = now;
      absl::erase_if(by_peer_, [&](const auto& entry) {
        return entry.second.empty() || entry.second.back() <= window_start;
      });
    }
    times = &by_peer_[peer_address];
    while (!times->empty() && times->front() <= window_start) times->pop_front();
    if (static_cast<int64_t>(times->size()) >= peer_limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("peer ", peer_address, " registered ", times->size(),
                       " new identities in the last minute "
                       "(security.max_new_identities_per_peer_per_minute); retry later"));
    }
    times->push_back(now);
  }
  if (global_limit > 0) all_peers_.push_back(now);
  return absl::OkStatus();
}

}  // namespace fedsched
