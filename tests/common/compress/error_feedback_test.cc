// Error feedback keeps what was not sent, adds it to the next update, and survives a
// serialise/restore (a device restart) unchanged.
#include "common/compress/error_feedback.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/compress/decode.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

std::vector<float> Update(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.Uniform() - 0.5f;
  return v;
}

CompressionSpec TopK(double fraction) {
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::TOPK;
  spec.topk_fraction = fraction;
  return spec;
}

std::vector<float> Decoded(const v1::CompressedTensor& t, int64_t n) {
  std::vector<float> out(n);
  EXPECT_THAT(Decode(t, absl::MakeSpan(out)), IsOk());
  return out;
}

TEST(ErrorFeedbackTest, FirstRoundSplitsTheUpdateExactly) {
  ErrorFeedback ef;
  Rng rng(1);
  const std::vector<float> u = Update(200, 1);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, ef.Compress("w", u, TopK(0.1), rng));
  EXPECT_EQ(t.name(), "w");
  EXPECT_EQ(t.indices_size(), 20);
  const std::vector<float> sent = Decoded(t, 200);
  const std::vector<float>& r = *ef.Residual("w");
  for (int i = 0; i < 200; ++i) {
    EXPECT_TRUE(sent[i] == 0.0f || r[i] == 0.0f) << i;  // each coordinate sent or kept
    EXPECT_EQ(sent[i] + r[i], u[i]) << i;
  }
}

// Over rounds, everything sent plus the final residual adds up to the sum of the updates: no
// mass is lost, and a coordinate too small to be sent at once is sent once it has accumulated.
TEST(ErrorFeedbackTest, CarriesTheResidualAcrossRounds) {
  constexpr int64_t kN = 500;
  ErrorFeedback ef;
  Rng rng(2);
  std::vector<double> sent_total(kN, 0.0), update_total(kN, 0.0);
  std::vector<float> constant(kN, 0.0f);
  constant[7] = 1e-3f;  // always the smallest non-zero: sent only once accumulated
  bool seven_sent = false;
  for (int round = 0; round < 30; ++round) {
    std::vector<float> u = Update(kN, 100 + round);
    u[7] = constant[7];
    ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, ef.Compress("w", u, TopK(0.02), rng));
    const std::vector<float> sent = Decoded(t, kN);
    for (int64_t i = 0; i < kN; ++i) {
      sent_total[i] += sent[i];
      update_total[i] += u[i];
    }
    seven_sent |= sent[7] != 0.0f;
  }
  const std::vector<float>& r = *ef.Residual("w");
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(sent_total[i] + r[i], update_total[i], 1e-4) << i;
  }
  // 30 rounds of random updates in [-0.5, 0.5): the residual of coordinate 7 stays small.
  EXPECT_FALSE(seven_sent && std::fabs(r[7]) > 0.03f);
}

TEST(ErrorFeedbackTest, SerialiseRestoreContinuesIdentically) {
  ErrorFeedback ef;
  Rng rng(3);
  for (int round = 0; round < 3; ++round) {
    ASSERT_THAT(ef.Compress("a", Update(300, round), TopK(0.05), rng), IsOk());
    ASSERT_THAT(ef.Compress("b", Update(40, 50 + round), TopK(0.1), rng), IsOk());
  }
  const std::string bytes = ef.Serialize();
  ASSERT_OK_AND_ASSIGN(ErrorFeedback restored, ErrorFeedback::Restore(bytes));
  EXPECT_EQ(*restored.Residual("a"), *ef.Residual("a"));
  EXPECT_EQ(*restored.Residual("b"), *ef.Residual("b"));
  EXPECT_EQ(restored.Serialize(), bytes);
  Rng r1(4), r2(4);
  const std::vector<float> next = Update(300, 99);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t1, ef.Compress("a", next, TopK(0.05), r1));
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t2, restored.Compress("a", next, TopK(0.05), r2));
  EXPECT_EQ(t1.SerializeAsString(), t2.SerializeAsString());
}

TEST(ErrorFeedbackTest, WorksWithQuantisation) {
  ErrorFeedback ef;
  Rng rng(5);
  CompressionSpec spec;
  spec.format = v1::CompressedTensor::QSGD;
  spec.bits = 2;
  spec.block_size = 64;
  const std::vector<float> u = Update(256, 7);
  ASSERT_OK_AND_ASSIGN(v1::CompressedTensor t, ef.Compress("q", u, spec, rng));
  const std::vector<float> sent = Decoded(t, 256);
  const std::vector<float>& r = *ef.Residual("q");
  for (int i = 0; i < 256; ++i) EXPECT_NEAR(sent[i] + r[i], u[i], 1e-6f) << i;
}

TEST(ErrorFeedbackTest, RefusesAShapeChangeUntilReset) {
  ErrorFeedback ef;
  Rng rng(6);
  ASSERT_THAT(ef.Compress("w", Update(10, 1), TopK(0.5), rng), IsOk());
  EXPECT_THAT(ef.Compress("w", Update(12, 1), TopK(0.5), rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reset")));
  EXPECT_EQ(ef.Residual("w")->size(), 10u);
  ef.Reset("w");
  EXPECT_EQ(ef.Residual("w"), nullptr);
  EXPECT_THAT(ef.Compress("w", Update(12, 1), TopK(0.5), rng), IsOk());
}

TEST(ErrorFeedbackTest, RestoreRefusesBadState) {
  EXPECT_THAT(ErrorFeedback::Restore("\xff\xff\xff"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parse")));
  v1::ErrorFeedbackState state;
  state.add_residuals()->set_name("w");
  state.add_residuals()->set_name("w");
  EXPECT_THAT(ErrorFeedback::Restore(state.SerializeAsString()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  state.Clear();
  v1::ErrorFeedbackState::Residual* r = state.add_residuals();
  r->set_name("w");
  r->add_values(NAN);
  EXPECT_THAT(ErrorFeedback::Restore(state.SerializeAsString()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds nan")));
  ASSERT_OK_AND_ASSIGN(ErrorFeedback empty, ErrorFeedback::Restore(""));
  EXPECT_EQ(empty.Residual("w"), nullptr);
}

}  // namespace
}  // namespace fedsched::compress
