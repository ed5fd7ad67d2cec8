// A small certificate authority for provisioning a fedsched deployment
// (docs/guides/PROVISIONING.md): ECDSA P-256 keys, a self-signed CA, and the certificates it issues
// to the server, aggregators, devices and the operator, made with OpenSSL's libcrypto. Everything
// is PEM text; writing files is the caller's job. Functions are thread-compatible (no shared
// state).
#ifndef FEDSCHED_SERVER_PROVISION_PKI_H_
#define FEDSCHED_SERVER_PROVISION_PKI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedsched::provision {

// A private key and its certificate, both PEM (the key unencrypted PKCS#8).
struct KeyAndCertificate {
  std::string key_pem;
  std::string certificate_pem;
};

// What a certificate is for; sets its extended key usage.
enum class Usage {
  kServer,        // serverAuth: a coordinator that devices and tools dial.
  kClient,        // clientAuth: a device or the operator presenting itself under mutual TLS.
  kServerClient,  // both: an aggregator, which serves devices and dials the root with one cert.
};

// A certificate the CA issues.
struct LeafOptions {
  // Subject common name. 1 to 64 characters (X.509's upper bound). Under mutual TLS a device's
  // identity must be its certificate's CN or a SAN (docs/guides/SECURITY.md "Identities and
  // admission").
  std::string common_name;
  // Subject alternative names: each an IPv4 / IPv6 literal (an IP SAN) or a DNS name (a DNS SAN;
  // a leading "*." wildcard is allowed). The names clients dial must be here. Default: none.
  std::vector<std::string> alt_names;
  Usage usage = Usage::kClient;
  // Validity from now (less 5 minutes for clock skew), days. Must be in [1, 36500].
  int validity_days = 365;
};

// Makes a fresh ECDSA P-256 key pair, PEM (unencrypted PKCS#8). Errors: INTERNAL when OpenSSL
// fails (its error text included).
[[nodiscard]] absl::StatusOr<std::string> NewPrivateKey();

// Makes a self-signed CA: CN `common_name`, basicConstraints CA:TRUE with pathlen 0, keyUsage
// keyCertSign and cRLSign, valid `validity_days` (1 to 36500) from now.
// Errors: INVALID_ARGUMENT for a bad name or validity; INTERNAL when OpenSSL fails.
[[nodiscard]] absl::StatusOr<KeyAndCertificate> MakeCa(absl::string_view common_name,
                                                       int validity_days);

// Issues a certificate signed by `ca` for a fresh key: CA:FALSE, keyUsage digitalSignature, the
// extended key usage of `options.usage`, the SANs of `options.alt_names`, a random 128-bit serial,
// the CA's subject as issuer and its key id as authority key id.
// Errors: INVALID_ARGUMENT naming a bad common name, SAN or validity, or a `ca` whose key or
// certificate cannot be read or do not match; INTERNAL when OpenSSL fails.
[[nodiscard]] absl::StatusOr<KeyAndCertificate> IssueCertificate(const KeyAndCertificate& ca,
                                                                 const LeafOptions& options);

// Checks that `certificate_pem` chains to `ca_certificate_pem` and is valid now, for the TLS
// purpose of `usage` (serverAuth, clientAuth, or both). Errors: INVALID_ARGUMENT when a PEM cannot
// be read; FAILED_PRECONDITION with OpenSSL's verification error otherwise.
[[nodiscard]] absl::Status VerifyCertificate(absl::string_view ca_certificate_pem,
                                             absl::string_view certificate_pem, Usage usage);

// True when `name` (a DNS name or an IP literal) matches a SAN of the certificate, the way a TLS
// client checks the name it dialled. Errors: INVALID_ARGUMENT when the PEM cannot be read.
[[nodiscard]] absl::StatusOr<bool> CertificateMatchesName(absl::string_view certificate_pem,
                                                          absl::string_view name);

// The subject common name of a certificate. Errors: INVALID_ARGUMENT when the PEM cannot be read
// or the subject has no CN.
[[nodiscard]] absl::StatusOr<std::string> CertificateCommonName(absl::string_view certificate_pem);

// INVALID_ARGUMENT naming `name` when it is neither an IP literal nor a DNS name (labels of
// letters, digits and '-', 1 to 63 characters, not starting or ending with '-'; an optional
// leading "*."; at most 253 characters).
[[nodiscard]] absl::Status CheckAltName(absl::string_view name);

// `bytes` random bytes from OpenSSL's CSPRNG, as lowercase hex (2 x bytes characters): the form
// of fedsched's tokens and keys. Errors: INTERNAL when the generator fails.
[[nodiscard]] absl::StatusOr<std::string> RandomHex(int bytes);

}  // namespace fedsched::provision

#endif  // FEDSCHED_SERVER_PROVISION_PKI_H_
