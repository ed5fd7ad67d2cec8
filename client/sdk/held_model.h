// The model a device keeps from its last download, and the model rebuilt from it and a delta
// chain (downlink compression: CompressionConfig.downlink, docs/guides/COMPRESSION.md
// "Downlink"). Pure: no RPC, no clock.
#ifndef FEDSCHED_CLIENT_SDK_HELD_MODEL_H_
#define FEDSCHED_CLIENT_SDK_HELD_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// The last downloaded model: its version (Task.model_version), the raw SHA-256 of its
// serialization, and the model. Empty (version -1, null model) before the first download.
struct HeldModel {
  int64_t version = -1;
  std::string sha256;
  std::shared_ptr<const v1::Model> model;
  bool empty() const { return model == nullptr || version < 0; }
};

// What PollTaskRequest.held_model says of `held`; nothing is set when it is empty.
void DescribeHeld(const HeldModel& held, v1::PollTaskRequest* poll);

// Rebuilds the model of `task` (Task.downlink_delta set) from `payload`, a serialized
// v1::ModelDeltaChain that passed the download's size and digest checks, and `held`: the chain's
// deltas applied in order to a copy of the held model (compress::ApplyModelDeltaChain). Errors
// (the caller then downloads the whole model): FAILED_PRECONDITION when `held` is empty or not
// the version the chain starts from; DATA_LOSS when the payload does not parse, names other
// versions than the task's, does not apply to the held model, or the result's serialized size or
// SHA-256 is not DownlinkDelta's. `held` is never changed.
[[nodiscard]] absl::StatusOr<v1::Model> RebuildFromChain(const v1::Task& task,
                                                         const std::string& payload,
                                                         const HeldModel& held);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_HELD_MODEL_H_
