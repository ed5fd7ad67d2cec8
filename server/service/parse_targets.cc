#include "server/service/parse_targets.h"

#include <algorithm>
#include <utility>

namespace fedsched {
namespace {

// Parse targets kept for reuse: as many as updates are typically parsed at once (one per core of
// a small server), each the size of the model.
constexpr size_t kMaxKept = 2;

}  // namespace

ParseTargetPool::ParseTargetPool(std::vector<int> tensor_sizes)
    : tensor_sizes_(std::move(tensor_sizes)) {}

int64_t ParseTargetPool::parameters() const {
  int64_t params = 0;
  for (int size : tensor_sizes_) params += size;
  return params;
}

void ParseTargetPool::SetBudget(int64_t budget_bytes, int64_t target_bytes) {
  absl::MutexLock lock(&mu_);
  max_live_ = budget_bytes <= 0 ? 0
                                : static_cast<int>(std::max<int64_t>(
                                      1, budget_bytes / std::max<int64_t>(1, target_bytes)));
}

bool ParseTargetPool::Free() const { return max_live_ <= 0 || live_ < max_live_; }

std::unique_ptr<v1::Model> ParseTargetPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    // Waits only for another upload's norm and fold (the holder takes no lock this thread holds).
    mu_.Await(absl::Condition(this, &ParseTargetPool::Free));
    ++live_;
    if (!kept_.empty()) {
      std::unique_ptr<v1::Model> target = std::move(kept_.back());
      kept_.pop_back();
      return target;
    }
  }
  // Room for each tensor of the global model, in its order: parsing a payload that arrives in
  // pieces then never regrows a tensor (Clear keeps the tensors and their capacity for reuse).
  auto target = std::make_unique<v1::Model>();
  for (int size : tensor_sizes_) target->add_tensors()->mutable_data()->Reserve(size);
  target->Clear();
  return target;
}

void ParseTargetPool::Recycle(std::unique_ptr<v1::Model> target) {
  const bool keep = static_cast<size_t>(target->tensors_size()) <= tensor_sizes_.size();
  if (keep) target->Clear();
  absl::MutexLock lock(&mu_);
  --live_;
  if (keep && kept_.size() < kMaxKept) kept_.push_back(std::move(target));
}

void ParseTargetPool::DropKept() {
  absl::MutexLock lock(&mu_);
  kept_.clear();
}

}  // namespace fedsched
