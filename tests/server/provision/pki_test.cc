// The CA and the certificates it issues (server/provision/pki.h): they verify against the CA for
// their TLS purpose only, carry the names clients dial, and are refused from another CA.
#include "server/provision/pki.h"

#include "common/testing/status_matchers.h"
#include "common/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::provision {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

// A StatusOr that is OK and holds `expected`.
MATCHER_P(HoldsValue, expected, "is OK and holds " + ::testing::PrintToString(expected)) {
  if (!arg.ok()) *result_listener << "status: " << arg.status();
  return arg.ok() && *arg == expected;
}

TEST(PkiTest, ServerCertificateVerifiesForItsNamesAndPurposeOnly) {
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate ca, MakeCa("test CA", 30));
  LeafOptions leaf{"fl.example.com", {"fl.example.com", "10.0.0.5", "::1"}, Usage::kServer, 7};
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate server, IssueCertificate(ca, leaf));
  EXPECT_OK(VerifyCertificate(ca.certificate_pem, server.certificate_pem, Usage::kServer));
  EXPECT_THAT(VerifyCertificate(ca.certificate_pem, server.certificate_pem, Usage::kClient),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("TLS client")));
  for (const char* name : {"fl.example.com", "10.0.0.5", "::1"}) {
    EXPECT_THAT(CertificateMatchesName(server.certificate_pem, name), HoldsValue(true)) << name;
  }
  for (const char* name : {"other.example.com", "10.0.0.6", "127.0.0.1"}) {
    EXPECT_THAT(CertificateMatchesName(server.certificate_pem, name), HoldsValue(false)) << name;
  }
  EXPECT_THAT(CertificateCommonName(server.certificate_pem),
              HoldsValue(std::string("fl.example.com")));
  // The CA is itself a valid root, and the key is the fingerprinted certificate's.
  EXPECT_OK(CertificateFingerprint(server.certificate_pem).status());
  EXPECT_THAT(server.key_pem, HasSubstr("BEGIN PRIVATE KEY"));
}

TEST(PkiTest, ClientAndAggregatorCertificatesHaveTheirUsages) {
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate ca, MakeCa("test CA", 30));
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate device,
                       IssueCertificate(ca, LeafOptions{"device-001", {}, Usage::kClient, 7}));
  EXPECT_OK(VerifyCertificate(ca.certificate_pem, device.certificate_pem, Usage::kClient));
  EXPECT_FALSE(VerifyCertificate(ca.certificate_pem, device.certificate_pem, Usage::kServer).ok());
  EXPECT_THAT(CertificateCommonName(device.certificate_pem), HoldsValue(std::string("device-001")));
  ASSERT_OK_AND_ASSIGN(
      KeyAndCertificate agg,
      IssueCertificate(ca, LeafOptions{"agg-1", {"agg-1.example.com"}, Usage::kServerClient, 7}));
  EXPECT_OK(VerifyCertificate(ca.certificate_pem, agg.certificate_pem, Usage::kServerClient));
}

TEST(PkiTest, AnotherCasCertificateDoesNotVerify) {
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate ca, MakeCa("test CA", 30));
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate rogue_ca, MakeCa("test CA", 30));
  ASSERT_OK_AND_ASSIGN(
      KeyAndCertificate rogue,
      IssueCertificate(rogue_ca, LeafOptions{"device-001", {}, Usage::kClient, 7}));
  EXPECT_THAT(VerifyCertificate(ca.certificate_pem, rogue.certificate_pem, Usage::kClient),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("does not verify")));
}

TEST(PkiTest, BadNamesValidityAndCaAreRefusedNamingThem) {
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate ca, MakeCa("test CA", 30));
  EXPECT_THAT(IssueCertificate(ca, LeafOptions{"x", {"bad_name.example"}, Usage::kServer, 7}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad_name.example")));
  EXPECT_THAT(IssueCertificate(ca, LeafOptions{std::string(65, 'a'), {}, Usage::kClient, 7}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 64")));
  EXPECT_THAT(IssueCertificate(ca, LeafOptions{"x", {}, Usage::kClient, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("validity")));
  ASSERT_OK_AND_ASSIGN(KeyAndCertificate other, MakeCa("other", 30));
  KeyAndCertificate mismatched{other.key_pem, ca.certificate_pem};
  EXPECT_THAT(IssueCertificate(mismatched, LeafOptions{"x", {}, Usage::kClient, 7}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not belong together")));
  EXPECT_OK(CheckAltName("*.fl.example.com"));
  EXPECT_OK(CheckAltName("fe80::1"));
  EXPECT_FALSE(CheckAltName("-bad.example").ok());
  EXPECT_FALSE(CheckAltName("").ok());
}

TEST(PkiTest, RandomHexHasTheRequestedLengthAndDiffers) {
  ASSERT_OK_AND_ASSIGN(std::string a, RandomHex(32));
  ASSERT_OK_AND_ASSIGN(std::string b, RandomHex(32));
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace fedsched::provision
