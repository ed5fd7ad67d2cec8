// The downlink's shadow chain (server/round/shadow_chain.h): a device applying the chain to the
// shadow it holds rebuilds the server's shadow bit for bit, for every format; the chain is sent
// only while it is smaller than the whole model and reachable; the shadow follows the model.
#include "server/round/shadow_chain.h"

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "common/compress/delta.h"
#include "common/compress/rng.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fedsched::round {
namespace {

using v1::CompressedTensor;

// Two tensors of 600 and 40 elements, values drawn from `seed` around `center`.
v1::Model RandomModel(uint64_t seed, float center) {
  compress::Rng rng(seed);
  v1::Model model;
  const std::pair<const char*, int> tensors[] = {{"w", 600}, {"b", 40}};
  for (const auto& [name, n] : tensors) {
    v1::Tensor* t = model.add_tensors();
    t->set_name(name);
    t->add_shape(n);
    for (int i = 0; i < n; ++i) t->add_data(center + rng.Uniform() - 0.5f);
  }
  return model;
}

v1::UpdateCompression Format(CompressedTensor::Format format, int bits = 0) {
  v1::UpdateCompression c;
  c.set_format(format);
  c.set_bits(bits);
  return c;
}

bool SameBits(const v1::Model& a, const v1::Model& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

double MaxAbsDiff(const v1::Model& a, const v1::Model& b) {
  double worst = 0;
  for (int t = 0; t < a.tensors_size(); ++t) {
    for (int i = 0; i < a.tensors(t).data_size(); ++i) {
      worst = std::max(worst,
                       std::fabs(static_cast<double>(a.tensors(t).data(i)) - b.tensors(t).data(i)));
    }
  }
  return worst;
}

TEST(ShadowChainTest, ChainRebuildsTheShadowBitForBitForEveryFormat) {
  const v1::UpdateCompression formats[] = {
      Format(CompressedTensor::FP16),    Format(CompressedTensor::QSGD, 8),
      Format(CompressedTensor::QSGD, 4), Format(CompressedTensor::QSGD, 2),
      Format(CompressedTensor::TOPK),    Format(CompressedTensor::HADAMARD_1BIT)};
  for (const v1::UpdateCompression& format : formats) {
    SCOPED_TRACE(CompressedTensor::Format_Name(format.format()));
    ASSERT_OK_AND_ASSIGN(auto chain, ShadowChain::Create(format, /*seed=*/7, /*versions_kept=*/4, 0,
                                                         RandomModel(1, 0), true));
    std::map<int64_t, v1::Model> held{{0, *chain->shadow()}};
    for (int64_t v = 1; v <= 6; ++v) {
      ASSERT_OK(chain->Advance(v, RandomModel(v + 1, 0.01f * v)));
      held[v] = *chain->shadow();
      EXPECT_EQ(chain->shadow_blob()->sha256, Sha256(chain->shadow()->SerializeAsString()));
    }
    // Reachable: versions 2..6 (four deltas kept); each chain rebuilds shadow_6 exactly.
    for (int64_t h = 2; h <= 6; ++h) {
      ASSERT_OK_AND_ASSIGN(v1::ModelDeltaChain c, chain->Chain(h));
      EXPECT_EQ(c.deltas_size(), 6 - h);
      v1::Model model = held[h];
      ASSERT_OK(compress::ApplyModelDeltaChain(c, &model));
      EXPECT_TRUE(SameBits(model, *chain->shadow())) << "from version " << h;
      ASSERT_OK_AND_ASSIGN(auto blob, chain->ChainBlob(h));
      EXPECT_EQ(static_cast<int64_t>(blob->bytes.size()), static_cast<int64_t>(c.ByteSizeLong()));
    }
    EXPECT_EQ(chain->Chain(1).status().code(), absl::StatusCode::kOutOfRange);
  }
}

TEST(ShadowChainTest, ShadowTracksTheModelWithErrorFeedback) {
  // QSGD 2-bit is coarse per step, but what a delta leaves out is carried into the next one, so
  // the shadow of a model that stops moving converges to it.
  ASSERT_OK_AND_ASSIGN(auto chain, ShadowChain::Create(Format(CompressedTensor::QSGD, 2), 3, 8, 0,
                                                       RandomModel(1, 0), true));
  const v1::Model target = RandomModel(99, 0.2f);
  ASSERT_OK(chain->Advance(1, target));
  const double first = MaxAbsDiff(*chain->shadow(), target);
  for (int64_t v = 2; v <= 12; ++v) ASSERT_OK(chain->Advance(v, target));
  EXPECT_LT(MaxAbsDiff(*chain->shadow(), target), first / 100);
}

TEST(ShadowChainTest, PlansAChainOnlyWhenReachableMatchingAndSmaller) {
  ASSERT_OK_AND_ASSIGN(auto chain,
                       ShadowChain::Create(Format(CompressedTensor::QSGD, 8), 5,
                                           /*versions_kept=*/8, 0, RandomModel(1, 0), true));
  std::map<int64_t, std::string> digest{{0, chain->shadow_blob()->sha256}};
  for (int64_t v = 1; v <= 5; ++v) {
    ASSERT_OK(chain->Advance(v, RandomModel(v + 1, 0)));
    digest[v] = chain->shadow_blob()->sha256;
  }
  // Holding version 0 while it is the current one: the chain would be empty (no bytes): whole.
  ASSERT_OK_AND_ASSIGN(auto fresh, ShadowChain::Create(Format(CompressedTensor::FP16), 5, 8, 0,
                                                       RandomModel(1, 0), true));
  EXPECT_FALSE(fresh->PlanDownload(0, "").delta());
  // No model: the whole shadow.
  DownloadPlan none = chain->PlanDownload(-1, "");
  EXPECT_FALSE(none.delta());
  EXPECT_EQ(none.bytes, chain->full_bytes());
  EXPECT_EQ(chain->full_bytes(), static_cast<int64_t>(chain->shadow_blob()->bytes.size()));
  // One version behind: one 8-bit delta, about a quarter of the model.
  DownloadPlan one = chain->PlanDownload(4, digest[4]);
  ASSERT_TRUE(one.delta());
  EXPECT_EQ(one.from_version, 4);
  EXPECT_LT(one.bytes * 3, chain->full_bytes());
  ASSERT_OK_AND_ASSIGN(auto blob, chain->ChainBlob(4));
  EXPECT_EQ(one.bytes, static_cast<int64_t>(blob->bytes.size()));
  // The current version: an empty chain of a few bytes.
  DownloadPlan same = chain->PlanDownload(5, digest[5]);
  ASSERT_TRUE(same.delta());
  EXPECT_LT(same.bytes, 8);
  // Five versions behind: five quarters of the model are more than the model: the whole shadow.
  EXPECT_FALSE(chain->PlanDownload(0, digest[0]).delta());
  // Three behind: three quarters, still smaller.
  EXPECT_TRUE(chain->PlanDownload(2, digest[2]).delta());
  // A held model whose digest is not the shadow's (a restarted server's, or corrupt): whole.
  EXPECT_FALSE(chain->PlanDownload(4, digest[3]).delta());
  // A version the chain never had (ahead of it): whole.
  EXPECT_FALSE(chain->PlanDownload(9, "").delta());
}

TEST(ShadowChainTest, TooOldVersionsGetTheWholeModel) {
  ASSERT_OK_AND_ASSIGN(auto chain,
                       ShadowChain::Create(Format(CompressedTensor::QSGD, 2), 5,
                                           /*versions_kept=*/2, 0, RandomModel(1, 0), true));
  for (int64_t v = 1; v <= 4; ++v) ASSERT_OK(chain->Advance(v, RandomModel(v + 1, 0)));
  EXPECT_TRUE(chain->PlanDownload(2, "").delta());
  EXPECT_TRUE(chain->PlanDownload(3, "").delta());
  EXPECT_FALSE(chain->PlanDownload(1, "").delta());
  EXPECT_FALSE(chain->PlanDownload(0, "").delta());
}

TEST(ShadowChainTest, RefusesBadSpecsAndVersions) {
  v1::UpdateCompression bad = Format(CompressedTensor::QSGD, 3);
  EXPECT_EQ(ShadowChain::Create(bad, 1, 8, 0, RandomModel(1, 0), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::ServerConfig config;
  *config.mutable_compression()->mutable_downlink() = bad;
  absl::Status s = ValidateDownlink(config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("compression.downlink"), std::string::npos) << s;
  config.mutable_compression()->mutable_downlink()->set_bits(8);
  config.mutable_compression()->set_downlink_versions_kept(-1);
  EXPECT_NE(ValidateDownlink(config).message().find("downlink_versions_kept"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(auto chain, ShadowChain::Create(Format(CompressedTensor::FP16), 1, 8, 3,
                                                       RandomModel(1, 0), true));
  EXPECT_EQ(chain->Advance(3, RandomModel(2, 0)).code(), absl::StatusCode::kFailedPrecondition);
  v1::Model wrong = RandomModel(2, 0);
  wrong.mutable_tensors(0)->mutable_data()->RemoveLast();
  EXPECT_EQ(chain->Advance(4, wrong).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chain->version(), 3);
}

}  // namespace
}  // namespace fedsched::round
