// Whole rounds in process: the unmasked sum equals the plaintext sum of the contributors within
// the documented quantisation bound for K = 3..100, with dropouts at every step.
#include "secagg/local_round.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "secagg/quantize.h"
#include "tests/secagg/test_util.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::secagg::testing::Params;
using ::fedsched::secagg::testing::Updates;
using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

struct Round {
  LocalRoundResult result;
  std::vector<std::vector<float>> updates;
};

Round RunRound(const fedsched::v1::SecAggRoundParams& p, const std::vector<DropPoint>& drops,
               uint32_t seed) {
  Round round;
  round.updates = Updates(p.cohort_size(), p.vector_length(), seed, p.clip_norm());
  std::vector<absl::Span<const float>> spans(round.updates.begin(), round.updates.end());
  std::vector<double> weights(p.cohort_size(), 1.0);
  Bytes32 entropy{};
  entropy[0] = static_cast<uint8_t>(seed);
  round.result = RunLocalRound(p, spans, weights, drops, entropy);
  return round;
}

// The survivors (U3) a drop plan leaves: clients that sent a masked input.
std::vector<uint32_t> Contributors(const std::vector<DropPoint>& drops) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < drops.size(); ++i) {
    if (drops[i] == DropPoint::kNever || drops[i] == DropPoint::kBeforeUnmask) out.push_back(i);
  }
  return out;
}

void ExpectSum(const Round& round, const std::vector<DropPoint>& drops) {
  ASSERT_TRUE(round.result.sum.ok()) << round.result.sum.status();
  EXPECT_TRUE(round.result.client_errors.empty()) << round.result.client_errors[0].second;
  const UnmaskedSum& sum = *round.result.sum;
  EXPECT_EQ(sum.contributors, Contributors(drops));
  for (size_t e = 0; e < sum.sum.size(); ++e) {
    double truth = 0;
    for (uint32_t i : sum.contributors) truth += round.updates[i][e];
    ASSERT_NEAR(sum.sum[e], truth, sum.error_bound) << "element " << e;
  }
}

// Whether every check of the protocol passes for this drop plan: each step's participants
// keep t holders, and every secret the server must rebuild has t responders among its holders.
bool Tolerable(const CommunicationGraph& g, uint32_t t, const std::vector<DropPoint>& drops) {
  const uint32_t n = g.size();
  auto alive_at = [&](uint32_t i, int step) {  // completed steps 0..step
    return drops[i] == DropPoint::kNever || static_cast<int>(drops[i]) > step + 1;
  };
  for (int step = 0; step < 4; ++step) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; ++i) count += alive_at(i, step);
    if (count < t) return false;
  }
  auto holders = [&](uint32_t v, int step) {
    uint32_t c = alive_at(v, step);
    for (uint32_t j : g.Neighbours(v)) c += alive_at(j, step);
    return c;
  };
  for (uint32_t v = 0; v < n; ++v) {
    if (alive_at(v, 0) && holders(v, 0) < t) return false;  // ShareKeys
    if (alive_at(v, 1) && holders(v, 1) < t) return false;  // MaskInput
    const bool survivor = alive_at(v, 2);
    bool needed = survivor;
    if (alive_at(v, 1) && !survivor) {
      for (uint32_t j : g.Neighbours(v)) needed = needed || alive_at(j, 2);
    }
    if (needed && holders(v, 3) < t) return false;  // Unmask
  }
  return true;
}

// Drops up to n - t clients at random steps, keeping only drops the protocol tolerates.
std::vector<DropPoint> RandomDrops(const fedsched::v1::SecAggRoundParams& p, uint32_t seed) {
  const uint32_t n = p.cohort_size();
  Bytes32 graph_seed;
  std::copy(p.graph_seed().begin(), p.graph_seed().end(), graph_seed.begin());
  const CommunicationGraph graph = *CommunicationGraph::Create(n, p.degree(), graph_seed);
  std::vector<DropPoint> drops(n, DropPoint::kNever);
  std::mt19937 rng(seed);
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  uint32_t budget = n - p.threshold();
  for (uint32_t i : order) {
    if (budget == 0) break;
    drops[i] = static_cast<DropPoint>(1 + rng() % 4);
    if (Tolerable(graph, p.threshold(), drops)) {
      --budget;
    } else {
      drops[i] = DropPoint::kNever;
    }
  }
  return drops;
}

TEST(LocalRoundTest, NoDropouts) {
  for (uint32_t n : {3u, 4u, 5u, 10u, 13u, 14u, 31u, 50u, 100u}) {
    const auto p = Params(n, n <= 20 ? 32 : 6);
    const std::vector<DropPoint> drops(n, DropPoint::kNever);
    SCOPED_TRACE(n);
    ExpectSum(RunRound(p, drops, n), drops);
  }
}

TEST(LocalRoundTest, RandomDropoutsEveryCohortSize3To100) {
  for (uint32_t n = 3; n <= 100; ++n) {
    const auto p = Params(n, n <= 20 ? 32 : 6);
    const std::vector<DropPoint> drops = RandomDrops(p, 1000 + n);
    SCOPED_TRACE(n);
    ExpectSum(RunRound(p, drops, n), drops);
  }
}

// The complete graph (Bonawitz et al.) tolerates exactly n - t dropouts at any one step.
TEST(LocalRoundTest, CompleteGraphNMinusTDropoutsAtEachStep) {
  for (uint32_t n : {3u, 4u, 7u, 10u, 13u, 40u}) {
    const auto p = Params(n, 16, 7, n - 1);
    for (int step = 1; step <= 4; ++step) {
      std::vector<DropPoint> drops(n, DropPoint::kNever);
      for (uint32_t i = 0; i < n - p.threshold(); ++i) {
        drops[(i * 7 + step) % n] = static_cast<DropPoint>(step);
      }
      SCOPED_TRACE(absl::StrCat("n=", n, " step=", step));
      ExpectSum(RunRound(p, drops, n + step), drops);
    }
  }
}

TEST(LocalRoundTest, FewerThanThresholdFailsAtEachStep) {
  const uint32_t n = 10;
  const auto p = Params(n, 16);  // complete graph, t = 6
  ASSERT_EQ(p.threshold(), 6u);
  for (int step = 1; step <= 4; ++step) {
    std::vector<DropPoint> drops(n, DropPoint::kNever);
    for (uint32_t i = 0; i < n - p.threshold() + 1; ++i) drops[i] = static_cast<DropPoint>(step);
    const Round round = RunRound(p, drops, step);
    SCOPED_TRACE(step);
    EXPECT_THAT(round.result.sum, StatusIs(absl::StatusCode::kFailedPrecondition,
                                           HasSubstr("fewer than the threshold 6")));
  }
}

TEST(LocalRoundTest, WeightsAndClippingHappenOnTheClient) {
  const auto p = Params(5, 4);
  std::vector<std::vector<float>> updates(5, std::vector<float>{3, 0, 4, 0});  // norm 5
  std::vector<absl::Span<const float>> spans(updates.begin(), updates.end());
  const std::vector<double> weights = {1, 0.5, 0.5, 0, 1};
  const LocalRoundResult r =
      RunLocalRound(p, spans, weights, std::vector<DropPoint>(5, DropPoint::kNever), {});
  ASSERT_TRUE(r.sum.ok()) << r.sum.status();
  EXPECT_NEAR(r.sum->sum[0], 3.0 * 0.6, r.sum->error_bound);  // sum of weights 3, clip to 1
  EXPECT_NEAR(r.sum->sum[2], 3.0 * 0.8, r.sum->error_bound);
}

TEST(LocalRoundTest, CountsBytesPerStep) {
  const auto p = Params(20, 1000);
  const std::vector<DropPoint> drops(20, DropPoint::kNever);
  const Round round = RunRound(p, drops, 3);
  ASSERT_TRUE(round.result.sum.ok());
  // Masked inputs: 20 x 1000 fixed32 plus a few header bytes each.
  EXPECT_GE(round.result.bytes.to_server[2], 20u * 4000u);
  EXPECT_LT(round.result.bytes.to_server[2], 20u * 4100u);
  for (int s = 0; s < 4; ++s) EXPECT_GT(round.result.bytes.to_server[s], 0u) << s;
}

// Below 32 bits per element the masked inputs are packed: 2 bytes per element at 16 bits, 1.5 at
// 12 (plus the same few header bytes), and the sum, with random dropouts, is within the bound.
TEST(LocalRoundTest, PackedMaskedInputsShrinkWithTheirBits) {
  for (const auto& [bits, per_element] : {std::pair{16u, 2.0}, std::pair{12u, 1.5}}) {
    SCOPED_TRACE(bits);
    auto p = Params(20, 1000);
    p.set_bits_per_element(bits);
    const std::vector<DropPoint> none(20, DropPoint::kNever);
    const Round round = RunRound(p, none, 3);
    ExpectSum(round, none);
    const auto data = static_cast<uint64_t>(20 * 1000 * per_element);
    EXPECT_GE(round.result.bytes.to_server[2], data);
    EXPECT_LT(round.result.bytes.to_server[2], data + 20u * 100u);
    const auto drops = RandomDrops(p, 17);
    ExpectSum(RunRound(p, drops, 17), drops);
  }
}

}  // namespace
}  // namespace fedsched::secagg
