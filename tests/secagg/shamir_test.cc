// Shamir sharing over GF(2^61 - 1): any t shares rebuild the secret, fewer cannot, and a
// changed share changes the result.
#include "secagg/shamir.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

Bytes32 Secret(uint8_t salt) {
  Bytes32 s;
  for (int i = 0; i < 32; ++i) s[i] = static_cast<uint8_t>(0xff - i * salt);
  return s;
}

TEST(ShamirTest, AnyThresholdSubsetRebuilds) {
  Drbg rng(Bytes32{});
  std::mt19937 shuffle(11);
  for (int n : {2, 3, 7, 21, 101}) {
    for (int t : {2, n / 2 + 1, n}) {
      std::vector<uint64_t> xs(n);
      std::iota(xs.begin(), xs.end(), 1);
      ASSERT_OK_AND_ASSIGN(auto shares, ShamirSplit(Secret(3), t, xs, rng));
      for (int trial = 0; trial < 5; ++trial) {
        std::shuffle(shares.begin(), shares.end(), shuffle);
        ASSERT_OK_AND_ASSIGN(Bytes32 back, ShamirCombine(shares, t));
        EXPECT_EQ(back, Secret(3)) << "n=" << n << " t=" << t;
      }
    }
  }
}

TEST(ShamirTest, AllOnesAndZeroSecrets) {
  Drbg rng(Bytes32{1});
  const std::vector<uint64_t> xs = {5, 9, 1000000007};
  for (const Bytes32& secret : {Bytes32{}, [] {
                                  Bytes32 s;
                                  s.fill(0xff);
                                  return s;
                                }()}) {
    ASSERT_OK_AND_ASSIGN(auto shares, ShamirSplit(secret, 2, xs, rng));
    ASSERT_OK_AND_ASSIGN(Bytes32 back, ShamirCombine({shares[2], shares[0]}, 2));
    EXPECT_EQ(back, secret);
  }
}

TEST(ShamirTest, FewerThanThresholdFails) {
  Drbg rng(Bytes32{2});
  ASSERT_OK_AND_ASSIGN(auto shares, ShamirSplit(Secret(1), 4, {1, 2, 3, 4, 5}, rng));
  shares.resize(3);
  EXPECT_THAT(ShamirCombine(shares, 4),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("threshold 4")));
}

TEST(ShamirTest, TamperedShareChangesOrBreaksTheSecret) {
  Drbg rng(Bytes32{3});
  ASSERT_OK_AND_ASSIGN(auto shares, ShamirSplit(Secret(5), 3, {1, 2, 3}, rng));
  shares[1].values[2] = (shares[1].values[2] + 1) % kFieldPrime;
  absl::StatusOr<Bytes32> back = ShamirCombine(shares, 3);
  EXPECT_TRUE(!back.ok() || *back != Secret(5));
}

TEST(ShamirTest, BadArguments) {
  Drbg rng(Bytes32{4});
  EXPECT_THAT(ShamirSplit(Secret(1), 0, {1, 2}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threshold 0")));
  EXPECT_THAT(ShamirSplit(Secret(1), 3, {1, 2}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threshold 3")));
  EXPECT_THAT(ShamirSplit(Secret(1), 2, {1, 1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeats")));
  EXPECT_THAT(ShamirSplit(Secret(1), 2, {0, 1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside")));
  ASSERT_OK_AND_ASSIGN(auto shares, ShamirSplit(Secret(1), 2, {1, 2}, rng));
  shares[1].values.pop_back();
  EXPECT_THAT(ShamirCombine(shares, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("values")));
}

}  // namespace
}  // namespace fedsched::secagg
