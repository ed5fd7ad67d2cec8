#include "client/sdk/update_compression.h"

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/state_dir.h"
#include "common/compress/update_codec.h"
#include "common/logging.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched {

absl::Status CheckUploadCompression(const v1::Task& task) {
  const v1::UpdateCompression& c = task.upload_compression();
  if (compress::IsUncompressed(c)) return absl::OkStatus();
  const std::string name = compress::Describe(c);
  if (absl::StatusOr<compress::CompressionSpec> spec = compress::SpecFrom(c); !spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("update compression ", name, ": ", spec.status().message()));
  }
  if (task.has_secagg()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update compression ", name,
        " with secure aggregation: the masked sum needs the float update (secure aggregation "
        "quantises it itself); this device does not upload such a task"));
  }
  if (task.update_dropout() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update compression ", name,
        " with update dropout: a dropped tensor has no values to compress; this device does not "
        "upload such a task"));
  }
  return absl::OkStatus();
}

compress::ErrorFeedback& ErrorFeedbackStore::Kept(const std::string& job) {
  auto it = residuals_.find(job);
  if (it != residuals_.end()) return it->second;
  compress::ErrorFeedback loaded;
  if (!state_dir_.empty()) {
    absl::StatusOr<std::string> bytes = ReadErrorFeedback(state_dir_, job);
    absl::StatusOr<compress::ErrorFeedback> restored =
        bytes.ok() ? compress::ErrorFeedback::Restore(*bytes)
                   : absl::StatusOr<compress::ErrorFeedback>(bytes.status());
    if (restored.ok()) {
      loaded = *std::move(restored);
    } else if (!absl::IsNotFound(restored.status())) {
      FEDSCHED_LOG(warn, "error feedback of job '{}' starts from zero: {}", job,
                   restored.status().ToString());
    }
  }
  return residuals_.emplace(job, std::move(loaded)).first->second;
}

compress::ErrorFeedback ErrorFeedbackStore::Fitted(const std::string& job,
                                                   const v1::Model& update) {
  const compress::ErrorFeedback& kept = Kept(job);
  v1::ErrorFeedbackState state;
  for (const v1::Tensor& t : update.tensors()) {
    const std::vector<float>* residual = kept.Residual(t.name());
    if (residual == nullptr) continue;
    if (static_cast<int64_t>(residual->size()) != t.data_size()) {
      FEDSCHED_LOG(info,
                   "error feedback of job '{}': tensor '{}' changed size ({} -> {}); its "
                   "residual starts from zero",
                   job, t.name(), residual->size(), t.data_size());
      continue;
    }
    v1::ErrorFeedbackState::Residual* out = state.add_residuals();
    out->set_name(t.name());
    out->mutable_values()->Add(residual->begin(), residual->end());
  }
  // Restore cannot fail on what a kept residual holds (distinct names, finite values).
  absl::StatusOr<compress::ErrorFeedback> fitted =
      compress::ErrorFeedback::Restore(state.SerializeAsString());
  return fitted.ok() ? *std::move(fitted) : compress::ErrorFeedback();
}

absl::Status ErrorFeedbackStore::Commit(const std::string& job, compress::ErrorFeedback ef) {
  compress::ErrorFeedback& kept = residuals_[job];
  kept = std::move(ef);
  if (state_dir_.empty()) return absl::OkStatus();
  return WriteErrorFeedback(state_dir_, job, kept.Serialize());
}

}  // namespace fedsched
