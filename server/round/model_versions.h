// The chain of global models a run commits and publishes: the latest committed version, the one
// before it (kept so that the collapse guard can take a round back, and recycled as the buffer
// of the next model), and the published version that new tasks train on. FedBuff's staleness
// (Nguyen et al., AISTATS 2022, section 3; docs/ALGORITHMS.md §6) is counted here: the versions
// committed since a task's base model. Owned by RoundEngine; pure (no clock, no disk).
#ifndef FEDSCHED_SERVER_ROUND_MODEL_VERSIONS_H_
#define FEDSCHED_SERVER_ROUND_MODEL_VERSIONS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::round {

// A serialized global model as downloads serve it (server only; the simulator publishes none).
struct ModelBlob {
  std::string bytes;   // v1::Model wire format
  std::string sha256;  // raw 32-byte SHA-256 of `bytes`
};

// Versions are counts of committed rounds (0 = the initial model). Invariant:
// published_version() <= version(). Not thread-safe (the engine's owner serialises calls).
class ModelVersions {
 public:
  // Starts at committed `version` (>= 0) with `model` as its global model; nothing published.
  ModelVersions(int64_t version, v1::Model model);
  ModelVersions(const ModelVersions&) = delete;
  ModelVersions& operator=(const ModelVersions&) = delete;

  // The latest committed version and its model (the caller must not keep the model across
  // calls that commit).
  int64_t version() const { return version_; }
  const std::shared_ptr<const v1::Model>& model() const { return model_; }
  // The published version (-1 before the first Publish), its model and its blob (null in the
  // simulator).
  int64_t published_version() const { return published_version_; }
  const std::shared_ptr<const v1::Model>& published_model() const { return published_model_; }
  const std::shared_ptr<const ModelBlob>& published_blob() const { return published_blob_; }

  // Committed versions since `base_version`, or since the published one when base_version < 0
  // (a task not pinned yet trains on the published model); never negative.
  int64_t VersionsSince(int64_t base_version) const;

  // The buffer the next model is written into: the model before the latest one when nobody
  // holds it any more (no allocation per round), else a new one. From here until Commit the
  // latest version cannot be taken back (CanRevert is false).
  std::shared_ptr<v1::Model> TakeBuffer();
  // `next` (filled from TakeBuffer) becomes the latest committed model, as `version`; the
  // previous latest is kept, and may be restored by Revert while `revertible` and unpublished.
  void Commit(int64_t version, std::shared_ptr<v1::Model> next, bool revertible);
  // The latest version was committed revertible, is not published, and its predecessor is kept.
  bool CanRevert() const;
  // Requires CanRevert(): the predecessor becomes the latest version again (version() - 1); the
  // taken-back model is never handed out and becomes the spare buffer.
  void Revert();

  // Publishes committed `version` with its `model` and `blob` (null in the simulator). Errors:
  // FAILED_PRECONDITION for a version not in (published_version(), version()];
  // INVALID_ARGUMENT for a null model.
  [[nodiscard]] absl::Status Publish(int64_t version, std::shared_ptr<const v1::Model> model,
                                     std::shared_ptr<const ModelBlob> blob);

 private:
  int64_t version_ = 0;
  std::shared_ptr<v1::Model> model_mutable_;  // == model_
  std::shared_ptr<const v1::Model> model_;
  std::shared_ptr<v1::Model> spare_;  // the model before model_, recycled when nobody holds it
  bool revertible_ = false;
  int64_t published_version_ = -1;
  std::shared_ptr<const v1::Model> published_model_;
  std::shared_ptr<const ModelBlob> published_blob_;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_MODEL_VERSIONS_H_
