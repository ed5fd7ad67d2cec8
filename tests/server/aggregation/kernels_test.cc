// The AVX2 build of the fold, server-step and sum-of-squares loops (kernels_avx2.cc, chosen at run
// time) must give the same bits as the baseline build, so that a server's results do not depend on
// its CPU.
#include "server/aggregation/kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace fedsched::aggregation_internal {
namespace {

// 1003 values (not a multiple of any vector width) with plenty of rounding, plus a few edge
// values.
std::vector<float> Values(uint32_t seed, float scale) {
  std::vector<float> v(1003);
  uint32_t state = seed * 2654435761u + 7u;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * scale;
  }
  v[5] = 0.0f;
  v[6] = -0.0f;
  v[7] = std::numeric_limits<float>::denorm_min();
  return v;
}

struct Result {
  bool ok;
  std::vector<float> out;
  bool operator==(const Result& o) const {
    return ok == o.ok && std::memcmp(out.data(), o.out.data(), out.size() * sizeof(float)) == 0;
  }
};

// Runs `f` once with the portable loops and once with the run-time choice; both must agree.
template <typename F>
void ExpectSameBitsBothWays(F f) {
  ForcePortableKernelsForTesting(true);
  const Result portable = f();
  ForcePortableKernelsForTesting(false);
  const Result chosen = f();
  EXPECT_TRUE(portable == chosen);
}

class KernelIsaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ForcePortableKernelsForTesting(false);
    if (!Avx2KernelsInUse()) GTEST_SKIP() << "no AVX2 build or no AVX2 on this CPU";
  }
  void TearDown() override { ForcePortableKernelsForTesting(false); }
};

TEST_F(KernelIsaTest, FoldAndBatchedFold) {
  std::vector<std::vector<float>> u;
  for (uint32_t j = 0; j < 8; ++j) u.push_back(Values(j + 1, 0.37f));
  const std::vector<float> in = Values(99, 3.0f);
  const float w[8] = {1.0f, 3.0f, 0.1f, 7.5f, 1e-3f, 2.0f, 11.0f, 0.3f};
  const int64_t n = static_cast<int64_t>(in.size());
  for (int b = 1; b <= kMaxFoldBatch; ++b) {
    for (bool from_zero : {false, true}) {
      SCOPED_TRACE(testing::Message() << "b=" << b << " from_zero=" << from_zero);
      ExpectSameBitsBothWays([&] {
        const float* ptrs[8];
        for (int j = 0; j < b; ++j) ptrs[j] = u[j].data();
        Result r{false, std::vector<float>(in.size())};
        r.ok = FoldBatchChecked(from_zero ? nullptr : in.data(), ptrs, w, b, r.out.data(), n,
                                /*streaming=*/false);
        return r;
      });
    }
  }
  // An overflow is reported the same way.
  std::vector<float> huge = Values(3, 1.0f);
  huge[500] = 3e38f;
  ExpectSameBitsBothWays([&] {
    Result r{false, std::vector<float>(in.size())};
    r.ok = FoldChecked(huge.data(), huge.data(), 1.0f, r.out.data(), n, /*streaming=*/false);
    EXPECT_FALSE(r.ok);
    return r;
  });
}

// A fold into its own input (out == in, the aggregator's in-place fold) gives the bits and the
// verdict of a fold into a separate buffer, for every batch size, cached or streaming.
TEST(KernelTest, InPlaceFoldMatchesSeparateOutput) {
  std::vector<std::vector<float>> u;
  for (uint32_t j = 0; j < 8; ++j) u.push_back(Values(j + 11, 0.37f));
  u[3][700] = 3e38f;  // overflows with weight 7.5: the verdict must match too
  const std::vector<float> in = Values(98, 3.0f);
  const float w[8] = {1.0f, 3.0f, 0.1f, 7.5f, 1e-3f, 2.0f, 11.0f, 0.3f};
  const int64_t n = static_cast<int64_t>(in.size());
  for (bool portable : {true, false}) {
    ForcePortableKernelsForTesting(portable);
    for (int b = 1; b <= kMaxFoldBatch; ++b) {
      for (bool streaming : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "portable=" << portable << " b=" << b << " streaming=" << streaming);
        const float* ptrs[8];
        for (int j = 0; j < b; ++j) ptrs[j] = u[j].data();
        Result separate{false, std::vector<float>(in.size())};
        separate.ok = FoldBatchChecked(in.data(), ptrs, w, b, separate.out.data(), n, streaming);
        Result in_place{false, in};
        in_place.ok =
            FoldBatchChecked(in_place.out.data(), ptrs, w, b, in_place.out.data(), n, streaming);
        EXPECT_TRUE(separate == in_place);
        EXPECT_EQ(separate.ok, b < 4);
      }
    }
  }
  ForcePortableKernelsForTesting(false);
}

TEST_F(KernelIsaTest, ServerOptimizerSteps) {
  const std::vector<float> sum = Values(1, 5.0f);
  const std::vector<float> m = Values(2, 0.1f);
  std::vector<float> v = Values(3, 0.01f);
  for (float& x : v) x = x < 0 ? -x : x;
  const std::vector<float> g = Values(4, 1.0f);
  const int64_t n = static_cast<int64_t>(sum.size());
  ServerOptimizerParams p;
  p.inv_weight = 1.0f / 37.0f;
  p.eta = 0.1f;
  p.tau = 1e-3f;
  for (ServerOptimizer rule : {ServerOptimizer::kMomentum, ServerOptimizer::kAdam,
                               ServerOptimizer::kYogi, ServerOptimizer::kAdagrad}) {
    SCOPED_TRACE(static_cast<int>(rule));
    ExpectSameBitsBothWays([&] {
      // m', v' and the model, one after the other.
      Result r{false, std::vector<float>(3 * sum.size())};
      r.ok = ServerOptimizerStep(rule, p, sum.data(), m.data(), v.data(), g.data(), r.out.data(),
                                 r.out.data() + n, r.out.data() + 2 * n, n);
      EXPECT_TRUE(r.ok);
      return r;
    });
  }
}

TEST_F(KernelIsaTest, SumSquaresSameBitsAndCloseToALongDoubleSum) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    for (int64_t n : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{1003}}) {
      const std::vector<float> u = Values(seed, 1e3f);
      ForcePortableKernelsForTesting(true);
      const double portable = SumSquares(u.data(), n);
      ForcePortableKernelsForTesting(false);
      const double chosen = SumSquares(u.data(), n);
      EXPECT_EQ(std::memcmp(&portable, &chosen, sizeof(double)), 0) << "n=" << n;
      long double exact = 0;
      for (int64_t i = 0; i < n; ++i) exact += static_cast<long double>(u[i]) * u[i];
      EXPECT_NEAR(chosen, static_cast<double>(exact), 1e-12 * static_cast<double>(exact) + 1e-300);
    }
  }
}

}  // namespace
}  // namespace fedsched::aggregation_internal
