#include "server/planner/pyramidfl_policy.h"

#include "server/planner/oort_policy.h"

namespace fedsched::planner {
namespace {

// Oort's kind with PyramidFL's name and workload defaults: what PyramidFL adds to Oort is the
// planner's, applied after selection from those defaults, so its selection and config are Oort's.
class PyramidFlPolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "pyramidfl"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_PYRAMIDFL; }
  WorkloadDefaults workload_defaults() const override {
    return {.extend_beta = 0.5, .dropout_low = 0.1, .dropout_high = 0.6};
  }
  absl::string_view config_type() const override { return oort_->config_type(); }
  v1::CachePolicy implied_cache() const override { return oort_->implied_cache(); }
  bool scores_by_utility() const override { return oort_->scores_by_utility(); }
  absl::Status MapConfig(v1::SelectionConfig* selection) const override {
    return oort_->MapConfig(selection);
  }
  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return oort_->Create(resources);
  }

 private:
  const std::unique_ptr<SelectionPolicyKind> oort_ = MakeOortPolicyKind();
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakePyramidFlPolicyKind() {
  return std::make_unique<PyramidFlPolicyKind>();
}

}  // namespace fedsched::planner
