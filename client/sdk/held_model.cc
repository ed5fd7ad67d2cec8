#include "client/sdk/held_model.h"

#include "absl/strings/str_cat.h"
#include "common/compress/delta.h"
#include "common/sha256.h"
#include "fedsched/v1/compressed.pb.h"

namespace fedsched {

void DescribeHeld(const HeldModel& held, v1::PollTaskRequest* poll) {
  if (held.empty()) return;
  poll->mutable_held_model()->set_version(held.version);
  poll->mutable_held_model()->set_model_sha256(held.sha256);
}

absl::StatusOr<v1::Model> RebuildFromChain(const v1::Task& task, const std::string& payload,
                                           const HeldModel& held) {
  const v1::DownlinkDelta& announced = task.downlink_delta();
  if (held.empty() || held.version != announced.from_version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the delta chain starts at version ", announced.from_version(), " but this device holds ",
        held.empty() ? "no model" : "version ", held.empty() ? "" : absl::StrCat(held.version)));
  }
  v1::ModelDeltaChain chain;
  if (!chain.ParseFromString(payload)) {
    return absl::DataLossError("the downloaded delta chain does not parse");
  }
  if (chain.from_version() != announced.from_version() ||
      chain.to_version() != task.model_version()) {
    return absl::DataLossError(absl::StrCat(
        "the delta chain goes from version ", chain.from_version(), " to ", chain.to_version(),
        "; the task announced ", announced.from_version(), " to ", task.model_version()));
  }
  v1::Model model = *held.model;
  if (absl::Status s = compress::ApplyModelDeltaChain(chain, &model); !s.ok()) {
    return absl::DataLossError(absl::StrCat("the delta chain does not apply: ", s.message()));
  }
  const std::string bytes = model.SerializeAsString();
  if (static_cast<int64_t>(bytes.size()) != announced.model_bytes() ||
      Sha256(bytes) != announced.model_sha256()) {
    return absl::DataLossError(
        "the model rebuilt from the delta chain fails the announced size or SHA-256 check");
  }
  return model;
}

}  // namespace fedsched
