// Operator authentication of the server's admin RPCs (Coordinator.GetStatus, JobService): the
// operator token as call metadata, or under mutual TLS an operator's client certificate
// (docs/guides/SECURITY.md, docs/guides/JOBS.md).
#ifndef FEDSCHED_SERVER_SERVICE_OPERATOR_AUTH_H_
#define FEDSCHED_SERVER_SERVICE_OPERATOR_AUTH_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace fedsched {

// The gRPC metadata key that carries the operator token (fedsched-status and fedsched-ctl
// --token_file).
inline constexpr char kOperatorTokenHeader[] = "fedsched-operator-token";

// The SHA-256 fingerprint (raw 32 bytes, CertificateFingerprint in common/transport.h) of the
// client certificate of an authenticated TLS peer; "" when the peer presented none. Errors:
// UNAUTHENTICATED when a presented certificate cannot be read.
[[nodiscard]] absl::StatusOr<std::string> PeerCertificateFingerprint(
    const grpc::ServerContextBase& context);

// OK when the call carries kOperatorTokenHeader equal to `operator_token` (compared in constant
// time), or when `operator_token` is empty (no check: tests only). Errors: UNAUTHENTICATED naming
// `what` when the token is missing or another one.
[[nodiscard]] absl::Status CheckOperatorToken(const grpc::ServerContextBase& context,
                                              std::string_view operator_token,
                                              absl::string_view what);

// A certificate's SHA-256 fingerprint as listed in jobs.operator_cert_sha256 (hex, upper or lower
// case, ':' separators allowed, as `openssl x509 -noout -fingerprint -sha256` prints it after
// its '=') in canonical form: 64 lowercase hex digits. Errors: INVALID_ARGUMENT when it is not 32
// bytes of hex.
[[nodiscard]] absl::StatusOr<std::string> CanonicalCertFingerprint(absl::string_view listed);

// OK when the call carries the operator token (CheckOperatorToken), or when the TLS peer's client
// certificate has a SHA-256 fingerprint listed in `operator_cert_sha256` (hex, upper or lower
// case, ':' separators allowed, as `openssl x509 -fingerprint -sha256` prints it). Errors:
// UNAUTHENTICATED naming `what` when neither holds.
[[nodiscard]] absl::Status CheckOperator(const grpc::ServerContextBase& context,
                                         std::string_view operator_token,
                                         const std::vector<std::string>& operator_cert_sha256,
                                         absl::string_view what);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_OPERATOR_AUTH_H_
