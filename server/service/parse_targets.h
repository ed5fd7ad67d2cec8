// The models uploads are parsed into (docs/ARCHITECTURE.md "An upload's path"): each has room
// for every tensor of the global model, so parsing an update allocates nothing, and at most a
// budget of them are out at once, so the uploads parsed and folded together never hold more
// than that many model-sized buffers (the server's peak RSS; docs/DECISIONS.md "Server
// memory"). Owned by the Coordinator.
#ifndef FEDSCHED_SERVER_SERVICE_PARSE_TARGETS_H_
#define FEDSCHED_SERVER_SERVICE_PARSE_TARGETS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Thread-safe: every method may be called concurrently.
class ParseTargetPool {
 public:
  // Targets for a global model whose tensors hold `tensor_sizes` values each, in order.
  explicit ParseTargetPool(std::vector<int> tensor_sizes);
  ParseTargetPool(const ParseTargetPool&) = delete;
  ParseTargetPool& operator=(const ParseTargetPool&) = delete;

  // Values in the global model (the sum of the tensor sizes).
  int64_t parameters() const;
  // Bounds the targets out at once to max(1, budget_bytes / target_bytes) (target_bytes: the
  // serialized global model's size). budget_bytes <= 0: no bound (the default).
  void SetBudget(int64_t budget_bytes, int64_t target_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // An empty model to parse an update into: a kept one (its tensors keep their storage) or a
  // new one with room for the global model's tensors. Blocks while the budget's targets are out
  // (until another thread recycles one). Hand it back with Recycle.
  std::unique_ptr<v1::Model> Take() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns a target from Take. Kept for reuse (at most 2) unless it grew more tensors than the
  // global model has (a malformed or hostile update), which would keep them all allocated.
  void Recycle(std::unique_ptr<v1::Model> target) ABSL_LOCKS_EXCLUDED(mu_);
  // Frees the kept targets (before a commit makes the new model's bytes: the two never coexist).
  void DropKept() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Free() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<int> tensor_sizes_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<v1::Model>> kept_ ABSL_GUARDED_BY(mu_);
  int live_ ABSL_GUARDED_BY(mu_) = 0;      // taken and not yet recycled
  int max_live_ ABSL_GUARDED_BY(mu_) = 0;  // SetBudget; 0 = no bound
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_PARSE_TARGETS_H_
