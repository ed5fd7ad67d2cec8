#include "server/planner/pyramidfl_policy.h"

#include "server/planner/oort_policy.h"

namespace fedsched::planner {
namespace {

class PyramidFlPolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "pyramidfl"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_PYRAMIDFL; }
  absl::string_view config_type() const override { return "fedsched.v1.OortConfig"; }
  v1::CachePolicy implied_cache() const override { return v1::CACHE_POLICY_LRU; }
  WorkloadDefaults workload_defaults() const override {
    return {.extend_beta = 0.5, .dropout_low = 0.1, .dropout_high = 0.6};
  }
  bool scores_by_utility() const override { return true; }
  absl::Status MapConfig(v1::SelectionConfig* selection) const override {
    return MoveAnyOnto(name(), "selection.oort", selection, selection->mutable_oort());
  }
  // What PyramidFL adds to Oort is the planner's, applied after selection from the workload
  // defaults above, so its selection is Oort's own.
  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return std::make_unique<OortPolicy>(resources.pacer);
  }
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakePyramidFlPolicyKind() {
  return std::make_unique<PyramidFlPolicyKind>();
}

}  // namespace fedsched::planner
