// Ed25519 device signatures (secagg/signing.h): the RFC 8032 test vector, a round trip, and
// refusals of a changed message, another key and malformed sizes.
#include "secagg/signing.h"

#include <string>

#include "absl/strings/escaping.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::StatusIs;

Bytes32 SeedFromHex(absl::string_view hex) {
  return *FromBytes(absl::HexStringToBytes(hex), "seed");
}

// RFC 8032 section 7.1, TEST 1 (empty message).
TEST(SigningTest, MatchesRfc8032TestVector) {
  ASSERT_OK_AND_ASSIGN(SigningKey key,
                       SigningKey::FromSeed(SeedFromHex(
                           "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")));
  EXPECT_EQ(absl::BytesToHexString(key.public_key()),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  ASSERT_OK_AND_ASSIGN(std::string signature, key.Sign(""));
  EXPECT_EQ(absl::BytesToHexString(signature),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
  EXPECT_OK(VerifySignature(key.public_key(), "", signature, "the vector"));
}

TEST(SigningTest, VerifiesOnlyTheSignedMessageUnderItsKey) {
  ASSERT_OK_AND_ASSIGN(SigningKey key, SigningKey::FromSeed(Bytes32{1}));
  ASSERT_OK_AND_ASSIGN(SigningKey other, SigningKey::FromSeed(Bytes32{2}));
  ASSERT_OK_AND_ASSIGN(std::string signature, key.Sign("advertise round 7"));
  EXPECT_EQ(signature.size(), kSignatureBytes);
  EXPECT_EQ(key.public_key().size(), kSigningPublicKeyBytes);
  EXPECT_OK(VerifySignature(key.public_key(), "advertise round 7", signature, "m"));
  EXPECT_THAT(VerifySignature(key.public_key(), "advertise round 8", signature, "m"),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_THAT(VerifySignature(other.public_key(), "advertise round 7", signature, "m"),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  std::string flipped = signature;
  flipped[10] ^= 0x20;
  EXPECT_THAT(VerifySignature(key.public_key(), "advertise round 7", flipped, "m"),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  EXPECT_THAT(VerifySignature(key.public_key(), "advertise round 7", signature.substr(1), "m"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(VerifySignature("short", "advertise round 7", signature, "m"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  // The same seed is the same key: a device keeps its key across restarts by keeping the seed.
  ASSERT_OK_AND_ASSIGN(SigningKey again, SigningKey::FromSeed(Bytes32{1}));
  EXPECT_EQ(again.public_key(), key.public_key());
}

}  // namespace
}  // namespace fedsched::secagg
