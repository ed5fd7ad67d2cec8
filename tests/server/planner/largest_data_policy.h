// A toy selection policy, registered only by tests through the public registration path
// (planner::RegisterSelectionPolicy): the worked example of docs/guides/EXTENDING.md "Adding a
// selection policy". "largest_data" takes the round's slots among the candidates declaring the
// most samples (ClientState::num_samples), largest first, skipping any with fewer than its
// config's minimum; a candidate not predicted online is passed over, as by every policy.
#ifndef FEDSCHED_TESTS_SERVER_PLANNER_LARGEST_DATA_POLICY_H_
#define FEDSCHED_TESTS_SERVER_PLANNER_LARGEST_DATA_POLICY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "google/protobuf/wrappers.pb.h"
#include "server/planner/policy.h"
#include "server/planner/policy_kind.h"
#include "server/planner/policy_registry.h"

namespace fedsched::testing {

// The selection itself: one instance per planner.
class LargestDataPolicy final : public planner::SelectionPolicy {
 public:
  explicit LargestDataPolicy(int64_t min_samples) : min_samples_(min_samples) {}

  void Select(const planner::RoundContext& round, planner::CandidatePool* pool,
              planner::RoundPlan* plan) override {
    planner::PoolCandidates(round, pool);
    const profile::ProfileBook& book = round.book;
    pool->FillStage(
        [&](const planner::Candidate& c) {
          return book.state(c.index).num_samples >= min_samples_;
        },
        [&](const planner::Candidate& c) {
          return static_cast<double>(book.state(c.index).num_samples);
        });
    pool->TakeTop(round.slots, planner::ChooseIfOnline(round, pool, planner::kNoteNone,
                                                       /*exploited=*/false,
                                                       /*explore_pick=*/false));
  }

  // The record's score is the number of samples the client was picked by.
  void Describe(const planner::Candidate& c, const profile::ClientState& client,
                v1::SelectionReason* reason) const override {
    reason->set_score(static_cast<double>(client.num_samples));
  }

 private:
  int64_t min_samples_;
};

// Its definition: name, config type and factory; every property keeps the interface's
// default (no implied cache, not uniform, no workload defaults, no preset).
class LargestDataPolicyKind final : public planner::SelectionPolicyKind {
 public:
  absl::string_view name() const override { return "largest_data"; }
  // selection.policy_config { [type.googleapis.com/google.protobuf.Int64Value] { value: N } }:
  // the minimum number of samples; unset = 0.
  absl::string_view config_type() const override { return "google.protobuf.Int64Value"; }
  absl::StatusOr<std::unique_ptr<planner::SelectionPolicy>> Create(
      const planner::PolicyResources& resources) const override {
    google::protobuf::Int64Value min_samples;
    if (resources.options.policy_config.ByteSizeLong() > 0) {
      absl::Status s =
          planner::UnpackPolicyConfig(name(), resources.options.policy_config, &min_samples);
      if (!s.ok()) return s;
    }
    return std::make_unique<LargestDataPolicy>(min_samples.value());
  }
};

// Registers "largest_data" once per process; later calls return the first call's status.
inline absl::Status RegisterLargestDataPolicy() {
  static const absl::Status status =
      planner::RegisterSelectionPolicy(std::make_unique<LargestDataPolicyKind>());
  return status;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_PLANNER_LARGEST_DATA_POLICY_H_
