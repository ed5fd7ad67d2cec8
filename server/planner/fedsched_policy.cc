#include "server/planner/fedsched_policy.h"

#include "server/planner/fedcase_policy.h"

namespace fedsched::planner {
namespace {

// FedCaSe's kind with fedsched's name, cache and preset: its selection and config are FedCaSe's.
class FedschedPolicyKind final : public SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "fedsched"; }
  v1::SelectionPolicy record_value() const override { return v1::SELECTION_POLICY_FEDSCHED; }
  v1::CachePolicy implied_cache() const override { return v1::CACHE_POLICY_LRU; }
  absl::string_view config_type() const override { return fedcase_->config_type(); }
  bool selects_by_experience() const override { return fedcase_->selects_by_experience(); }
  bool scores_by_utility() const override { return fedcase_->scores_by_utility(); }
  absl::Status MapConfig(v1::SelectionConfig* selection) const override {
    return fedcase_->MapConfig(selection);
  }

  void ApplyPreset(v1::ServerConfig* config) const override {
    // The levers measured together in docs/reports/SIMULATION.md ("One configuration for both
    // models"): each alone is an option of any policy; the preset is their one tested combination.
    v1::SelectionConfig* sel = config->mutable_selection();
    sel->set_workload_sizing(true);
    sel->mutable_oort()->set_hold_round_threshold(true);
    v1::WorkloadExtensionConfig* ext = sel->mutable_extend_workload();
    if (!ext->disable() && ext->beta() == 0) ext->set_beta(0.5);
    if (config->cache().policy() == v1::CACHE_POLICY_UNSPECIFIED) {
      config->mutable_cache()->set_policy(v1::CACHE_POLICY_LRU);
    }
  }

  absl::StatusOr<std::unique_ptr<SelectionPolicy>> Create(
      const PolicyResources& resources) const override {
    return fedcase_->Create(resources);
  }

 private:
  const std::unique_ptr<SelectionPolicyKind> fedcase_ = MakeFedCasePolicyKind();
};

}  // namespace

std::unique_ptr<SelectionPolicyKind> MakeFedschedPolicyKind() {
  return std::make_unique<FedschedPolicyKind>();
}

}  // namespace fedsched::planner
