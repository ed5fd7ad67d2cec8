// Aggregator::AccumulateCompressed: the fold of compressed updates gives the bits of the decoded
// update folded as float32, refuses malformed payloads leaving the sum untouched, and never
// poisons the running sum.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/decode.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"

namespace fedsched {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

// A model of `sizes` elements per tensor ("t0" a matrix, the others vectors, plus a scalar "s"),
// values from `seed` in about [-scale, scale].
v1::Model RandomModel(const std::vector<int64_t>& sizes, uint64_t seed, float scale = 1.0f) {
  compress::Rng rng(seed);
  v1::Model m;
  for (size_t k = 0; k < sizes.size(); ++k) {
    v1::Tensor* t = m.add_tensors();
    t->set_name(absl::StrCat("t", k));
    if (k == 0 && sizes[k] % 4 == 0) {
      t->add_shape(4);
      t->add_shape(sizes[k] / 4);
    } else {
      t->add_shape(sizes[k]);
    }
    for (int64_t i = 0; i < sizes[k]; ++i) {
      t->add_data(scale * (2.0f * rng.Uniform() - 1.0f));
    }
  }
  v1::Tensor* s = m.add_tensors();
  s->set_name("s");
  s->add_data(0.25f);
  return m;
}

v1::UpdateCompression Spec(v1::CompressedTensor::Format format, int bits = 0, int block = 0) {
  v1::UpdateCompression c;
  c.set_format(format);
  c.set_bits(bits);
  c.set_block_size(block);
  if (format == v1::CompressedTensor::TOPK) {
    c.set_topk_fraction(0.05);
    c.set_error_feedback(true);
  }
  return c;
}

std::vector<v1::UpdateCompression> AllFormats() {
  using F = v1::CompressedTensor;
  return {Spec(F::FLOAT32),    Spec(F::FP16), Spec(F::QSGD, 8, 256),         Spec(F::QSGD, 4, 64),
          Spec(F::QSGD, 2, 8), Spec(F::TOPK), Spec(F::HADAMARD_1BIT, 1, 128)};
}

// What a device uploads: its delta compressed (no error feedback state: a first round).
v1::CompressedModel Compress(const v1::Model& delta, const v1::UpdateCompression& c,
                             uint64_t seed) {
  compress::Rng rng(seed);
  absl::StatusOr<v1::CompressedModel> out = compress::CompressModel(delta, c, nullptr, rng);
  EXPECT_THAT(out, IsOk());
  return out.ok() ? *out : v1::CompressedModel();
}

v1::Model Decoded(const v1::CompressedModel& cm, const v1::Model& like) {
  v1::Model m = like;
  for (int k = 0; k < cm.tensors_size(); ++k) {
    v1::Tensor* t = m.mutable_tensors(k);
    EXPECT_EQ(t->name(), cm.tensors(k).name());
    EXPECT_THAT(compress::Decode(cm.tensors(k),
                                 absl::MakeSpan(t->mutable_data()->mutable_data(), t->data_size())),
                IsOk());
  }
  return m;
}

std::unique_ptr<Aggregator> Make(const v1::AggregationConfig& config, const v1::Model& global) {
  absl::StatusOr<std::unique_ptr<Aggregator>> agg = Aggregator::Create(config, global);
  EXPECT_THAT(agg, IsOk());
  return agg.ok() ? std::move(*agg) : nullptr;
}

// Bitwise equality of two models' values.
void ExpectSameBits(const v1::Model& a, const v1::Model& b) {
  ASSERT_EQ(a.tensors_size(), b.tensors_size());
  for (int k = 0; k < a.tensors_size(); ++k) {
    ASSERT_EQ(a.tensors(k).data_size(), b.tensors(k).data_size());
    EXPECT_EQ(std::memcmp(a.tensors(k).data().data(), b.tensors(k).data().data(),
                          sizeof(float) * a.tensors(k).data_size()),
              0)
        << "tensor " << a.tensors(k).name();
  }
}

// Folds three updates compressed with `c` into one aggregator and their decoded float32 forms
// into another; both finalize to the same bits.
void ExpectFoldMatchesDecode(const v1::AggregationConfig& config, const v1::UpdateCompression& c,
                             const std::vector<int64_t>& sizes) {
  SCOPED_TRACE(compress::Describe(c));
  const v1::Model global = RandomModel(sizes, 1);
  auto compressed = Make(config, global);
  auto dense = Make(config, global);
  EXPECT_EQ(compressed->fold_slices(), config.fold_threads());
  for (int u = 0; u < 3; ++u) {
    const v1::Model delta = RandomModel(sizes, 10 + u, 0.5f + u);
    const v1::CompressedModel cm = Compress(delta, c, 100 + u);
    ASSERT_OK(compressed->AccumulateCompressed(cm, 10 + 7 * u, /*staleness=*/u % 2));
    ASSERT_OK(dense->Accumulate(Decoded(cm, delta), 10 + 7 * u, u % 2));
  }
  ASSERT_OK_AND_ASSIGN(const v1::Model a, compressed->Finalize(global));
  ASSERT_OK_AND_ASSIGN(const v1::Model b, dense->Finalize(global));
  ExpectSameBits(a, b);
}

v1::AggregationConfig Config(v1::AggregationRule rule, double clip = 0.0, int threads = 1) {
  v1::AggregationConfig config;
  config.set_rule(rule);
  config.set_clip_update_norm(clip);
  config.set_fold_threads(threads);
  config.set_max_staleness(5);
  return config;
}

TEST(CompressedFoldTest, SameBitsAsFoldingTheDecodedUpdateEveryFormat) {
  for (const v1::UpdateCompression& c : AllFormats()) {
    ExpectFoldMatchesDecode(Config(v1::AGGREGATION_RULE_FEDAVG), c, {1000, 37, 300});
    ExpectFoldMatchesDecode(Config(v1::AGGREGATION_RULE_FEDADAM), c, {64, 129});
  }
}

TEST(CompressedFoldTest, ClippingTakesTheDecodedNorm) {
  for (const v1::UpdateCompression& c : AllFormats()) {
    ExpectFoldMatchesDecode(Config(v1::AGGREGATION_RULE_FEDAVG, /*clip=*/3.0), c, {500, 40});
  }
}

TEST(CompressedFoldTest, RobustRulesFoldTheDecodedUpdate) {
  for (const v1::UpdateCompression& c : AllFormats()) {
    ExpectFoldMatchesDecode(Config(v1::AGGREGATION_RULE_MEDIAN), c, {200, 9});
  }
}

TEST(CompressedFoldTest, SlicedFoldGivesTheSameBits) {
  // Two fold slices (at least 512K values each): tensors go whole to the slice of their start.
  const std::vector<int64_t> sizes = {600000, 3, 500000};
  for (const v1::UpdateCompression& c :
       {Spec(v1::CompressedTensor::QSGD, 4, 256), Spec(v1::CompressedTensor::FP16)}) {
    ExpectFoldMatchesDecode(Config(v1::AGGREGATION_RULE_FEDAVG, 0.0, /*threads=*/2), c, sizes);
  }
}

TEST(CompressedFoldTest, BatchMixesFloat32AndCompressedInOrder) {
  const std::vector<int64_t> sizes = {300, 20};
  const v1::Model global = RandomModel(sizes, 1);
  auto batched = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
  auto single = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
  std::vector<v1::Model> deltas;
  std::vector<v1::CompressedModel> compressed;
  for (int u = 0; u < 6; ++u) deltas.push_back(RandomModel(sizes, 20 + u));
  for (int u = 0; u < 6; ++u) {
    compressed.push_back(Compress(deltas[u], Spec(v1::CompressedTensor::QSGD, 8, 64), 7 + u));
  }
  std::vector<Aggregator::WeightedUpdate> batch;
  for (int u = 0; u < 6; ++u) {
    // float32, float32, compressed, float32, compressed, compressed
    const bool is_compressed = u == 2 || u >= 4;
    Aggregator::WeightedUpdate w;
    w.num_examples = 5 + u;
    if (is_compressed) {
      w.compressed = &compressed[u];
      ASSERT_OK(single->AccumulateCompressed(compressed[u], 5 + u));
    } else {
      w.delta = &deltas[u];
      ASSERT_OK(single->Accumulate(deltas[u], 5 + u));
    }
    batch.push_back(w);
  }
  for (const absl::Status& s : batched->AccumulateBatch(batch)) EXPECT_THAT(s, IsOk());
  EXPECT_EQ(batched->num_updates(), 6);
  ASSERT_OK_AND_ASSIGN(const v1::Model a, batched->Finalize(global));
  ASSERT_OK_AND_ASSIGN(const v1::Model b, single->Finalize(global));
  ExpectSameBits(a, b);
}

TEST(CompressedFoldTest, SumSquaresAreThoseOfTheDecodedUpdate) {
  const std::vector<int64_t> sizes = {400, 11};
  const v1::Model global = RandomModel(sizes, 1);
  auto agg = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
  const v1::Model delta = RandomModel(sizes, 3);
  const v1::CompressedModel cm = Compress(delta, Spec(v1::CompressedTensor::QSGD, 2, 32), 4);
  ASSERT_OK_AND_ASSIGN(const std::vector<double> ss, agg->CompressedSumSquares(cm));
  EXPECT_EQ(ss, Aggregator::TensorSumSquares(Decoded(cm, delta)));
  ASSERT_OK_AND_ASSIGN(const v1::Model decoded, agg->DecodeCompressed(cm));
  ExpectSameBits(decoded, Decoded(cm, delta));
}

// A good update, then `bad` refused with `message`: the aggregator finalizes to what the good
// update alone gives.
void ExpectRefusedUntouched(const v1::CompressedModel& good, const v1::CompressedModel& bad,
                            const v1::Model& global, const std::string& message) {
  SCOPED_TRACE(message);
  auto agg = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
  auto reference = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
  ASSERT_OK(agg->AccumulateCompressed(good, 4));
  ASSERT_OK(reference->AccumulateCompressed(good, 4));
  EXPECT_THAT(agg->AccumulateCompressed(bad, 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  EXPECT_EQ(agg->num_updates(), 1);
  EXPECT_EQ(agg->total_examples(), 4);
  ASSERT_OK_AND_ASSIGN(const v1::Model a, agg->Finalize(global));
  ASSERT_OK_AND_ASSIGN(const v1::Model b, reference->Finalize(global));
  ExpectSameBits(a, b);
}

TEST(CompressedFoldTest, MalformedPayloadsRefusedSumUntouched) {
  const std::vector<int64_t> sizes = {256, 16};
  const v1::Model global = RandomModel(sizes, 1);
  const v1::Model delta = RandomModel(sizes, 2);
  const v1::CompressedModel good = Compress(delta, Spec(v1::CompressedTensor::QSGD, 4, 64), 3);

  v1::CompressedModel truncated = good;
  truncated.mutable_tensors(1)->mutable_packed()->pop_back();
  ExpectRefusedUntouched(good, truncated, global, "truncated");

  v1::CompressedModel bad_bits = good;
  bad_bits.mutable_tensors(0)->set_bits(3);
  ExpectRefusedUntouched(good, bad_bits, global, "QSGD bits 3");

  v1::CompressedModel missing = good;
  missing.mutable_tensors()->RemoveLast();
  ExpectRefusedUntouched(good, missing, global, "s");

  v1::CompressedModel wrong_count = good;
  wrong_count.mutable_tensors(1)->set_element_count(15);
  ExpectRefusedUntouched(good, wrong_count, global, "t1");

  v1::CompressedModel bad_scale = good;
  bad_scale.mutable_tensors(0)->set_scales(1, std::numeric_limits<float>::infinity());
  ExpectRefusedUntouched(good, bad_scale, global, "scale");

  v1::CompressedModel topk = Compress(delta, Spec(v1::CompressedTensor::TOPK), 3);
  auto* indices = topk.mutable_tensors(0)->mutable_indices();
  std::swap(*indices->Mutable(0), *indices->Mutable(1));
  ExpectRefusedUntouched(good, topk, global, "not strictly increasing");
}

// Overwrites value `at` of a FLOAT32 / TOPK payload, or code `at` of an FP16 one.
void SetPacked(v1::CompressedTensor* t, int at, float value) {
  std::string& packed = *t->mutable_packed();
  if (t->format() == v1::CompressedTensor::FP16) {
    const uint16_t inf = 0x7c00;  // binary16 +Inf
    std::memcpy(&packed[2 * at], &inf, sizeof inf);
  } else {
    std::memcpy(&packed[4 * at], &value, sizeof value);
  }
}

TEST(CompressedFoldTest, NonFiniteOrOverflowingPayloadNeverPoisonsTheSum) {
  const std::vector<int64_t> sizes = {256, 16};
  const v1::Model global = RandomModel(sizes, 1);
  const v1::Model delta = RandomModel(sizes, 2);
  const v1::CompressedModel good = Compress(delta, Spec(v1::CompressedTensor::FP16), 3);
  const float kNaN = std::numeric_limits<float>::quiet_NaN();

  v1::CompressedModel fp16_inf = good;
  SetPacked(fp16_inf.mutable_tensors(0), 200, 0);
  ExpectRefusedUntouched(good, fp16_inf, global, "non-finite");

  v1::CompressedModel topk = Compress(delta, Spec(v1::CompressedTensor::TOPK), 3);
  SetPacked(topk.mutable_tensors(0), 5, kNaN);
  ExpectRefusedUntouched(good, topk, global, "non-finite");

  v1::CompressedModel huge = Compress(delta, Spec(v1::CompressedTensor::FLOAT32), 3);
  SetPacked(huge.mutable_tensors(0), 100, 3e38f);  // x 3 examples overflows float32
  ExpectRefusedUntouched(good, huge, global, "overflows");

  v1::CompressedModel qsgd = Compress(delta, Spec(v1::CompressedTensor::QSGD, 8, 256), 3);
  qsgd.mutable_tensors(0)->set_scales(0, 3e38f);
  ExpectRefusedUntouched(good, qsgd, global, "overflows");
}

TEST(CompressedFoldTest, BoundedPayloadsFoldInPlace) {
  const std::vector<int64_t> sizes = {256, 16};
  const v1::Model global = RandomModel(sizes, 1);
  for (const v1::UpdateCompression& c : AllFormats()) {
    SCOPED_TRACE(compress::Describe(c));
    auto agg = Make(Config(v1::AGGREGATION_RULE_FEDAVG), global);
    for (int u = 0; u < 3; ++u) {
      ASSERT_OK(agg->AccumulateCompressed(Compress(RandomModel(sizes, 5 + u), c, u), 2));
    }
    EXPECT_EQ(agg->sum_buffers_held(), 1);
  }
}

}  // namespace
}  // namespace fedsched
