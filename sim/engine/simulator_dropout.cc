// The simulator's side of PyramidFL's update dropout (Li et al., MobiCom 2022, section 4.3;
// docs/ALGORITHMS.md §10): a simulated device drops whole tensors of its update as the SDK does,
// and its upload carries only the kept ones.
#include <memory>
#include <random>

#include "server/round/checkin_pacer.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {
namespace {

// Keeps the dropout draws apart from every other stream derived from config.seed.
constexpr uint64_t kDropoutStream = 0x64726f706f757421ULL;  // "dropout!"

}  // namespace

void Simulator::ApplyUpdateDropout(SimTask& t, double p) const {
  if (!(p > 0)) return;
  if (blob_ != nullptr || t.delta == nullptr) {
    // A stand-in model has no real tensors to draw over: the expected share is dropped.
    t.timing.upload_s *= 1.0 - p;
    return;
  }
  // Seeded (reproducible runs) from the seed, the round and the client, like the utility noise.
  std::mt19937_64 rng(round::SplitMix64(
      config_.server().seed() ^
      round::SplitMix64(static_cast<uint64_t>(t.round) ^
                        round::SplitMix64(kDropoutStream + static_cast<uint64_t>(t.index)))));
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto thinned = std::make_shared<v1::Model>(*t.delta);
  int64_t total = 0;
  int64_t kept = 0;
  for (v1::Tensor& tensor : *thinned->mutable_tensors()) {
    total += tensor.data_size();
    if (uniform(rng) < p) {
      for (float& v : *tensor.mutable_data()) v = 0.0f;  // the server reads a dropped one as zeros
    } else {
      kept += tensor.data_size();
    }
  }
  if (total > 0) t.timing.upload_s *= static_cast<double>(kept) / static_cast<double>(total);
  t.delta = std::move(thinned);
}

}  // namespace fedsched::sim
