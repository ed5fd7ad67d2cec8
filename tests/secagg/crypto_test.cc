// Known-answer tests of the primitives against their standards' published vectors, and the
// properties the protocol relies on (AEAD rejects tampering and other associated data).
#include "secagg/crypto.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;

Bytes32 Hex32(absl::string_view hex) { return *FromBytes(absl::HexStringToBytes(hex), "hex"); }
std::string Hex(const Bytes32& b) { return absl::BytesToHexString(ToString(b)); }

// RFC 7748, section 6.1 (Alice and Bob).
TEST(X25519Test, Rfc7748Section6_1) {
  const Bytes32 alice = Hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const Bytes32 bob = Hex32("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  ASSERT_OK_AND_ASSIGN(X25519Key a, X25519Key::FromPrivate(alice));
  ASSERT_OK_AND_ASSIGN(X25519Key b, X25519Key::FromPrivate(bob));
  EXPECT_EQ(Hex(a.public_key()),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  EXPECT_EQ(Hex(b.public_key()),
            "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  ASSERT_OK_AND_ASSIGN(Bytes32 ab, a.Agree(b.public_key()));
  ASSERT_OK_AND_ASSIGN(Bytes32 ba, b.Agree(a.public_key()));
  EXPECT_EQ(Hex(ab), "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  EXPECT_EQ(ab, ba);
}

TEST(X25519Test, RefusesLowOrderPoint) {
  const Bytes32 alice = Hex32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  ASSERT_OK_AND_ASSIGN(X25519Key a, X25519Key::FromPrivate(alice));
  EXPECT_THAT(a.Agree(Bytes32{}),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("low-order")));
}

// RFC 5869, appendix A.1 (test case 1, SHA-256).
TEST(HkdfTest, Rfc5869TestCase1) {
  const std::string ikm(22, '\x0b');
  const std::string salt = absl::HexStringToBytes("000102030405060708090a0b0c");
  const std::string info = absl::HexStringToBytes("f0f1f2f3f4f5f6f7f8f9");
  ASSERT_OK_AND_ASSIGN(std::string okm, HkdfSha256(ikm, salt, info, 42));
  EXPECT_EQ(absl::BytesToHexString(okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

// NIST SP 800-38A, appendix F.5.5 (CTR-AES256.Encrypt): keystream XOR plaintext = ciphertext.
TEST(PrgTest, NistSp800_38aF55) {
  const Bytes32 key = Hex32("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
  const std::string iv = absl::HexStringToBytes("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  const std::string plain = absl::HexStringToBytes(
      "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
      "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
  const std::string expected =
      "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
      "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6";
  std::vector<uint8_t> stream(64);
  ASSERT_THAT(
      AesCtrKeystream(key, std::vector<uint8_t>(iv.begin(), iv.end()), absl::MakeSpan(stream)),
      IsOk());
  std::string cipher(64, '\0');
  for (int i = 0; i < 64; ++i) cipher[i] = static_cast<char>(plain[i] ^ stream[i]);
  EXPECT_EQ(absl::BytesToHexString(cipher), expected);
}

// The mask is the zero-counter keystream read as little-endian words, added or subtracted.
TEST(PrgTest, MaskIsKeystreamWords) {
  Bytes32 seed{};
  seed[0] = 7;
  std::vector<uint8_t> stream(4 * 10000);
  ASSERT_THAT(AesCtrKeystream(seed, std::vector<uint8_t>(16, 0), absl::MakeSpan(stream)), IsOk());
  std::vector<uint32_t> v(10000, 5);
  ASSERT_THAT(AddPrgMask(seed, +1, absl::MakeSpan(v)), IsOk());
  for (size_t i = 0; i < v.size(); i += 997) {
    const uint32_t word = stream[4 * i] | stream[4 * i + 1] << 8 | stream[4 * i + 2] << 16 |
                          uint32_t{stream[4 * i + 3]} << 24;
    EXPECT_EQ(v[i], word + 5u) << i;
  }
  ASSERT_THAT(AddPrgMask(seed, -1, absl::MakeSpan(v)), IsOk());
  EXPECT_EQ(v, std::vector<uint32_t>(10000, 5));
}

TEST(AesGcmTest, RoundTripAndRejections) {
  const Bytes32 key = Hex32("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  const std::vector<uint8_t> nonce(12, 3);
  ASSERT_OK_AND_ASSIGN(std::string sealed, AesGcmSeal(key, nonce, "share bytes", "aad 1"));
  EXPECT_EQ(sealed.size(), 12 + 11 + 16u);
  ASSERT_OK_AND_ASSIGN(std::string opened, AesGcmOpen(key, sealed, "aad 1"));
  EXPECT_EQ(opened, "share bytes");
  EXPECT_THAT(AesGcmOpen(key, sealed, "aad 2"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::HasSubstr("tag")));
  std::string tampered = sealed;
  tampered[14] ^= 1;
  EXPECT_THAT(AesGcmOpen(key, tampered, "aad 1"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  Bytes32 other = key;
  other[0] ^= 1;
  EXPECT_THAT(AesGcmOpen(other, sealed, "aad 1"),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::_));
  EXPECT_THAT(AesGcmOpen(key, sealed.substr(0, 20), "aad 1"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("too short")));
}

TEST(DrbgTest, DeterministicAndUniformInRange) {
  Bytes32 seed{};
  Drbg a(seed), b(seed);
  EXPECT_EQ(a.Next32(), b.Next32());
  const Bytes32 x = a.Next32();
  EXPECT_NE(x, a.Next32());
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = a.Uniform(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
}

}  // namespace
}  // namespace fedsched::secagg
