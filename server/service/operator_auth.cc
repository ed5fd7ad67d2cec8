#include "server/service/operator_auth.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/transport.h"
#include "grpc/grpc_security_constants.h"
#include "server/service/credentials.h"

namespace fedsched {

absl::StatusOr<std::string> PeerCertificateFingerprint(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::string();
  std::vector<grpc::string_ref> pems = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pems.empty()) return std::string();
  absl::StatusOr<std::string> fingerprint =
      CertificateFingerprint(absl::string_view(pems.front().data(), pems.front().size()));
  if (!fingerprint.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("cannot read the client certificate: ", fingerprint.status().message()));
  }
  return fingerprint;
}

absl::StatusOr<std::string> CanonicalCertFingerprint(absl::string_view listed) {
  std::string hex = absl::AsciiStrToLower(absl::StrReplaceAll(listed, {{":", ""}}));
  const bool is_hex = std::all_of(hex.begin(), hex.end(), [](char c) {
    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
  });
  if (hex.size() != 64 || !is_hex) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", listed, "' is not a SHA-256 fingerprint (64 hex digits, ':' allowed)"));
  }
  return hex;
}

absl::Status CheckOperatorToken(const grpc::ServerContextBase& context,
                                std::string_view operator_token, absl::string_view what) {
  if (operator_token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kOperatorTokenHeader);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        what,
        " needs the operator token (metadata fedsched-operator-token; fedsched-status or "
        "fedsched-ctl --token_file)"));
  }
  if (!ConstantTimeEquals(std::string_view(it->second.data(), it->second.size()), operator_token)) {
    return absl::UnauthenticatedError(absl::StrCat(
        what,
        ": the operator token presented is not this server's (security.operator_token_path, "
        "by default <store_path>/operator_token)"));
  }
  return absl::OkStatus();
}

absl::Status CheckOperator(const grpc::ServerContextBase& context, std::string_view operator_token,
                           const std::vector<std::string>& operator_cert_sha256,
                           absl::string_view what) {
  // A token presented decides alone: a wrong one is refused even from an operator's certificate,
  // so that a misconfigured script is told rather than silently let through.
  if (context.client_metadata().count(kOperatorTokenHeader) > 0 || operator_cert_sha256.empty()) {
    return CheckOperatorToken(context, operator_token, what);
  }
  absl::StatusOr<std::string> fingerprint = PeerCertificateFingerprint(context);
  if (!fingerprint.ok()) return fingerprint.status();
  if (!fingerprint->empty()) {
    const std::string hex = absl::BytesToHexString(*fingerprint);
    for (const std::string& listed : operator_cert_sha256) {
      absl::StatusOr<std::string> canonical = CanonicalCertFingerprint(listed);
      if (canonical.ok() && ConstantTimeEquals(hex, *canonical)) return absl::OkStatus();
    }
  }
  if (operator_token.empty()) return absl::OkStatus();
  return absl::UnauthenticatedError(absl::StrCat(
      what,
      " needs the operator token (metadata fedsched-operator-token; fedsched-ctl --token_file) "
      "or a client certificate listed in jobs.operator_cert_sha256"));
}

}  // namespace fedsched
