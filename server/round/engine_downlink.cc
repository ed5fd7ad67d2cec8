// RoundEngine's downlink: the shadow chain moved at each publication, and what each task
// downloads (docs/ALGORITHMS.md, "The shadow chain").
#include <utility>

#include "server/round/engine.h"

namespace fedsched::round {

void RoundEngine::PublishDownlink(int64_t version, const v1::Model& model) {
  if (!DownlinkCompressed(config_)) return;
  if (downlink_ != nullptr && downlink_->Advance(version, model).ok()) return;
  // The first publication starts the chain; a step that failed (a tensor of another size, a
  // difference the format cannot encode) restarts it at this model, which devices then
  // download whole. ValidateDownlink (Init) has checked the spec, so Create only fails on
  // exhausted memory, where keeping the old chain is the best left.
  const int32_t kept = config_.compression().downlink_versions_kept() > 0
                           ? config_.compression().downlink_versions_kept()
                           : kDefaultDownlinkVersionsKept;
  absl::StatusOr<std::unique_ptr<ShadowChain>> chain =
      ShadowChain::Create(config_.compression().downlink(), config_.seed(), kept, version, model,
                          /*make_blobs=*/true);
  if (chain.ok()) downlink_ = *std::move(chain);
}

void RoundEngine::PinDownload(Task& task, const v1::HeldModel* held) {
  if (downlink_ == nullptr || downlink_->version() != task.base_version) {
    const std::shared_ptr<const ModelBlob>& blob = task.blob;
    task.download_bytes = blob != nullptr
                              ? static_cast<int64_t>(blob->bytes.size())
                              : static_cast<int64_t>(versions_->published_model()->ByteSizeLong());
  } else {
    const DownloadPlan plan = downlink_->PlanDownload(held != nullptr ? held->version() : -1,
                                                      held != nullptr ? held->model_sha256() : "");
    task.blob = downlink_->shadow_blob();
    task.download_bytes = plan.bytes;
    if (plan.delta()) {
      absl::StatusOr<std::shared_ptr<const ModelBlob>> chain =
          downlink_->ChainBlob(plan.from_version);
      if (chain.ok()) {
        task.blob = *std::move(chain);
        task.download_from_version = plan.from_version;
        task.download_result = downlink_->shadow_blob();
        task.download_bytes = static_cast<int64_t>(task.blob->bytes.size());
      }
    }
  }
}

}  // namespace fedsched::round
