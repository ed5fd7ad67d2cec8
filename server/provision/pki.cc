#include "server/provision/pki.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace fedsched::provision {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free_all(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

constexpr int kMaxValidityDays = 36500;
constexpr long kClockSkewSeconds = 300;

// INTERNAL with `what` and OpenSSL's queued errors (the queue is emptied).
absl::Status OpensslError(absl::string_view what) {
  std::string detail;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(e, buffer, sizeof(buffer));
    absl::StrAppend(&detail, detail.empty() ? "" : "; ", buffer);
  }
  return absl::InternalError(
      absl::StrCat(what, " failed", detail.empty() ? "" : absl::StrCat(": ", detail)));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

absl::StatusOr<Pkey> ReadKey(absl::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM private key");
  }
  return key;
}

absl::StatusOr<Cert> ReadCert(absl::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  return cert;
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpensslError("writing the private key");
  }
  return BioText(bio.get());
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) return OpensslError("writing the certificate");
  return BioText(bio.get());
}

bool IsIpLiteral(absl::string_view name) {
  const std::string s(name);
  unsigned char buffer[16];
  return inet_pton(AF_INET, s.c_str(), buffer) == 1 || inet_pton(AF_INET6, s.c_str(), buffer) == 1;
}

absl::Status CheckCommonName(absl::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat("common name '", name, "' must have 1 to 64 ",
                                                   "characters (X.509's bound), it has ",
                                                   name.size()));
  }
  for (char c : name) {
    if (c < 32 || c > 126 || name.front() == ' ' || name.back() == ' ') {
      return absl::InvalidArgumentError(absl::StrCat(
          "common name '", name, "' must be printable ASCII, without leading or trailing spaces"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckValidity(int days) {
  if (days < 1 || days > kMaxValidityDays) {
    return absl::InvalidArgumentError(
        absl::StrCat("validity of ", days, " days is outside [1, ", kMaxValidityDays, "]"));
  }
  return absl::OkStatus();
}

// Adds the extension `nid` = `value` (OpenSSL's configuration syntax) in `ctx`.
absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpensslError(absl::StrCat("the extension ", OBJ_nid2sn(nid), " = ", value));
  }
  return absl::OkStatus();
}

// A certificate for `key` named `common_name`, valid `days`, with a random 128-bit serial; the
// issuer and extensions are the caller's.
absl::StatusOr<Cert> NewCertificate(EVP_PKEY* key, absl::string_view common_name, int days) {
  Cert cert(X509_new());
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  if (cert == nullptr || serial == nullptr || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kClockSkewSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpensslError("making the certificate");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string cn(common_name);
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return OpensslError(absl::StrCat("the subject CN=", cn));
  }
  return cert;
}

std::string SanValue(const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  for (const std::string& n : names)
    parts.push_back(absl::StrCat(IsIpLiteral(n) ? "IP:" : "DNS:", n));
  return absl::StrJoin(parts, ",");
}

const char* ExtendedUsage(Usage usage) {
  switch (usage) {
    case Usage::kServer:
      return "serverAuth";
    case Usage::kClient:
      return "clientAuth";
    case Usage::kServerClient:
      return "serverAuth,clientAuth";
  }
  return "clientAuth";
}

// OpenSSL's verification error for `cert` against `ca` for `purpose`, or OK.
absl::Status VerifyFor(X509* ca, X509* cert, int purpose, absl::string_view what) {
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (store == nullptr || ctx == nullptr || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1 ||
      X509_STORE_CTX_set_purpose(ctx.get(), purpose) != 1) {
    return OpensslError("setting up the verification");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::FailedPreconditionError(
        absl::StrCat("the certificate does not verify against the CA as a ", what, ": ",
                     X509_verify_cert_error_string(error)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAltName(absl::string_view name) {
  if (IsIpLiteral(name)) return absl::OkStatus();
  absl::string_view rest = name;
  if (absl::StartsWith(rest, "*.")) rest.remove_prefix(2);
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is neither an IP address nor a DNS name: ", why));
  };
  if (rest.empty() || name.size() > 253) return bad("empty, or longer than 253 characters");
  for (absl::string_view label : absl::StrSplit(rest, '.')) {
    if (label.empty() || label.size() > 63) return bad("a label is empty or over 63 characters");
    if (label.front() == '-' || label.back() == '-') return bad("a label starts or ends with '-'");
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-') {
        return bad("only letters, digits, '-' and '.' are allowed");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NewPrivateKey() {
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpensslError("generating a P-256 key");
  return KeyPem(key.get());
}

absl::StatusOr<KeyAndCertificate> MakeCa(absl::string_view common_name, int validity_days) {
  FEDSCHED_RETURN_IF_ERROR(CheckCommonName(common_name));
  FEDSCHED_RETURN_IF_ERROR(CheckValidity(validity_days));
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpensslError("generating the CA's P-256 key");
  FEDSCHED_ASSIGN_OR_RETURN(Cert cert, NewCertificate(key.get(), common_name, validity_days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return OpensslError("setting the CA's issuer");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"));
  FEDSCHED_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return OpensslError("signing the CA");
  KeyAndCertificate out;
  FEDSCHED_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key.get()));
  FEDSCHED_ASSIGN_OR_RETURN(out.certificate_pem, CertPem(cert.get()));
  return out;
}

absl::StatusOr<KeyAndCertificate> IssueCertificate(const KeyAndCertificate& ca,
                                                   const LeafOptions& options) {
  FEDSCHED_RETURN_IF_ERROR(CheckCommonName(options.common_name));
  FEDSCHED_RETURN_IF_ERROR(CheckValidity(options.validity_days));
  for (const std::string& name : options.alt_names) FEDSCHED_RETURN_IF_ERROR(CheckAltName(name));
  absl::StatusOr<Pkey> ca_key = ReadKey(ca.key_pem);
  absl::StatusOr<Cert> ca_cert = ReadCert(ca.certificate_pem);
  if (!ca_key.ok() || !ca_cert.ok() || X509_check_private_key(ca_cert->get(), ca_key->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the CA's key and certificate cannot be read or do not belong together");
  }
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpensslError("generating a P-256 key");
  FEDSCHED_ASSIGN_OR_RETURN(Cert cert,
                            NewCertificate(key.get(), options.common_name, options.validity_days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert->get())) != 1) {
    return OpensslError("setting the issuer");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert->get(), cert.get(), nullptr, nullptr, 0);
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature"));
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_ext_key_usage, ExtendedUsage(options.usage)));
  FEDSCHED_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  FEDSCHED_RETURN_IF_ERROR(
      AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  if (!options.alt_names.empty()) {
    FEDSCHED_RETURN_IF_ERROR(
        AddExtension(cert.get(), &ctx, NID_subject_alt_name, SanValue(options.alt_names)));
  }
  if (X509_sign(cert.get(), ca_key->get(), EVP_sha256()) <= 0) {
    return OpensslError("signing the certificate");
  }
  KeyAndCertificate out;
  FEDSCHED_ASSIGN_OR_RETURN(out.key_pem, KeyPem(key.get()));
  FEDSCHED_ASSIGN_OR_RETURN(out.certificate_pem, CertPem(cert.get()));
  return out;
}

absl::Status VerifyCertificate(absl::string_view ca_certificate_pem,
                               absl::string_view certificate_pem, Usage usage) {
  FEDSCHED_ASSIGN_OR_RETURN(Cert ca, ReadCert(ca_certificate_pem));
  FEDSCHED_ASSIGN_OR_RETURN(Cert cert, ReadCert(certificate_pem));
  if (usage != Usage::kClient) {
    FEDSCHED_RETURN_IF_ERROR(
        VerifyFor(ca.get(), cert.get(), X509_PURPOSE_SSL_SERVER, "TLS server"));
  }
  if (usage != Usage::kServer) {
    FEDSCHED_RETURN_IF_ERROR(
        VerifyFor(ca.get(), cert.get(), X509_PURPOSE_SSL_CLIENT, "TLS client"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CertificateMatchesName(absl::string_view certificate_pem,
                                            absl::string_view name) {
  FEDSCHED_ASSIGN_OR_RETURN(Cert cert, ReadCert(certificate_pem));
  const std::string s(name);
  const int match = IsIpLiteral(name)
                        ? X509_check_ip_asc(cert.get(), s.c_str(), 0)
                        : X509_check_host(cert.get(), s.data(), s.size(),
                                          X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr);
  ERR_clear_error();
  return match == 1;
}

absl::StatusOr<std::string> CertificateCommonName(absl::string_view certificate_pem) {
  FEDSCHED_ASSIGN_OR_RETURN(Cert cert, ReadCert(certificate_pem));
  char buffer[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buffer,
                                          sizeof(buffer));
  if (n < 0) return absl::InvalidArgumentError("the certificate's subject has no CN");
  return std::string(buffer, n);
}

absl::StatusOr<std::string> RandomHex(int bytes) {
  std::string raw(static_cast<size_t>(bytes), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes) != 1) {
    return OpensslError("drawing random bytes");
  }
  return ToHex(raw);
}

}  // namespace fedsched::provision
