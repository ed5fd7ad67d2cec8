// The simulator's downlink (docs/ALGORITHMS.md, "The shadow chain"): what a device downloads.
#include <cmath>

#include "sim/engine/simulator.h"

namespace fedsched::sim {

int64_t Simulator::DownloadBytesOf(const round::Task* pinned) const {
  const int64_t model_bytes = parts_.learner->ModelBytes();
  const round::ShadowChain* chain = engine_->downlink();
  if (pinned == nullptr || chain == nullptr || chain->full_bytes() <= 0 ||
      pinned->download_bytes <= 0) {
    return model_bytes;
  }
  // A share of the modelled size: in training mode the two sizes are the same, and a stand-in
  // model (no-train mode) keeps the ratio of the chain to the whole model.
  const double share =
      static_cast<double>(pinned->download_bytes) / static_cast<double>(chain->full_bytes());
  return static_cast<int64_t>(std::llround(share * static_cast<double>(model_bytes)));
}

}  // namespace fedsched::sim
