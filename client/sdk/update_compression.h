// The SDK's side of update compression (docs/guides/COMPRESSION.md): which tasks it can upload
// compressed, and the device's error-feedback residuals, one per job, kept in its state dir across
// rounds and restarts. Internal: not installed, not part of the SDK's public API.
#ifndef FEDSCHED_CLIENT_SDK_UPDATE_COMPRESSION_H_
#define FEDSCHED_CLIENT_SDK_UPDATE_COMPRESSION_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "common/compress/error_feedback.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// OK when the SDK can upload `task`'s update as its upload_compression asks: uncompressed, or a
// valid spec (compress::SpecFrom) on a task without secure aggregation (Task.secagg: masking needs
// the float update, which it quantises itself) and without update dropout (Task.update_dropout).
// Checked before the download, so that a task the SDK cannot honour is never trained.
// Errors: INVALID_ARGUMENT "update compression <name>: <why>", the reason the task's failure
// report gives the server.
[[nodiscard]] absl::Status CheckUploadCompression(const v1::Task& task);

// The error-feedback residual (compress::ErrorFeedback; Stich et al., NeurIPS 2018) of each job
// (Task.job; "" for a server without jobs), so that two jobs never mix their residuals. With a
// state dir a job's residual is read from <state_dir>/ErrorFeedbackFile(job) at its first use by
// this store and written there by each Commit; without one it lives in memory. Not thread-safe:
// used by the thread that runs tasks.
class ErrorFeedbackStore {
 public:
  // `state_dir`: an existing private directory (MakePrivateDir), or "" for memory only.
  explicit ErrorFeedbackStore(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  // A copy of `job`'s residual fitted to `update` (a float32 Model delta): only the residuals of
  // `update`'s tensors with `update`'s sizes are kept; one of another size (the model changed) or
  // of a tensor `update` lacks is dropped, and such a tensor starts again from zero. A saved
  // residual that cannot be read or parsed is dropped too (logged): losing it costs the unsent
  // mass, never the round.
  compress::ErrorFeedback Fitted(const std::string& job, const v1::Model& update);

  // Keeps `ef` as `job`'s residual. Call it only after the server accepted the upload that `ef`
  // was computed for: a refused or failed upload keeps the previous residual (the update is lost
  // either way, and its residual belongs to it). Errors: INTERNAL when the state dir's file
  // cannot be written (the residual is kept in memory anyway).
  [[nodiscard]] absl::Status Commit(const std::string& job, compress::ErrorFeedback ef);

 private:
  // `job`'s residual as kept: loaded from the state dir at first use.
  compress::ErrorFeedback& Kept(const std::string& job);

  const std::string state_dir_;
  std::map<std::string, compress::ErrorFeedback> residuals_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_UPDATE_COMPRESSION_H_
