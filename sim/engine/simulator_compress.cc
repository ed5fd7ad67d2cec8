// The simulator's side of update compression (docs/ALGORITHMS.md §13): a simulated device
// compresses its update as the SDK does (compress::CompressModel, seeded from the run's seed, the
// client and the round; error feedback kept per client in memory), its upload is charged the
// compressed bytes at its upload bandwidth, and the engine folds the compressed payload itself,
// so that the simulator and the server fold the same bits.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compress/update_codec.h"
#include "server/planner/compression_levels.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {

int64_t Simulator::UploadBytesOf(const v1::UpdateCompression& c, const v1::Model* delta) const {
  const int64_t model_bytes = parts_.learner->ModelBytes();
  if (compress::IsUncompressed(c)) return model_bytes;
  // A real update has real shapes; a stand-in model (no-train mode) is charged the modelled
  // size scaled by the format's bytes per element, as the planner predicts it.
  const bool real = blob_ == nullptr && delta != nullptr;
  return planner::UploadBytesPerLevel({c}, model_bytes, real ? delta : nullptr)[0];
}

absl::Status Simulator::CompressUpload(const SimTask& t, round::Update* update,
                                       std::unique_ptr<v1::CompressedModel>* payload) {
  if (compress::IsUncompressed(t.compression) || update->delta == nullptr) {
    return absl::OkStatus();
  }
  compress::Rng rng(SimCompressionSeed(config_.server().seed(), t.client, t.round));
  compress::ErrorFeedback* ef =
      t.compression.error_feedback() ? &error_feedback_[t.client] : nullptr;
  absl::StatusOr<v1::CompressedModel> compressed =
      compress::CompressModel(*update->delta, t.compression, ef, rng);
  if (!compressed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("simulator: compressing client ", t.client,
                                                   "'s update for task ", t.task_id, ": ",
                                                   compressed.status().message()));
  }
  *payload = std::make_unique<v1::CompressedModel>(*std::move(compressed));
  update->compressed = payload->get();
  update->delta = nullptr;
  // Charged at planning from the shapes (exact but for top-k's index gaps); the payload's own
  // size is what the server measures.
  if (blob_ == nullptr) update->upload_bytes = static_cast<int64_t>((*payload)->ByteSizeLong());
  return absl::OkStatus();
}

}  // namespace fedsched::sim
