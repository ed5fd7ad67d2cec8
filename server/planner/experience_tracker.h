// FedCaSe's learned state (Khan et al., SoCC 2024, section 4, as its review code keeps it:
// aggregator.py `client_completion_handler`; docs/ALGORITHMS.md §4.1; the revision read:
// docs/reports/REFERENCE_CODE.md): running extremes of completed tasks' durations and utilities,
// each client's experience fixed when its task completes, and the top-ratio learner (top_ratio.h).
#ifndef FEDSCHED_SERVER_PLANNER_EXPERIENCE_TRACKER_H_
#define FEDSCHED_SERVER_PLANNER_EXPERIENCE_TRACKER_H_

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fedsched/v1/planner.pb.h"
#include "server/planner/scoring.h"
#include "server/planner/top_ratio.h"
#include "server/profile/profile_book.h"

namespace fedsched::planner {

// Persisted as v1::FedCaseState. The planner keeps it under every policy, so that a restart may
// switch policy. Not thread-safe. Copyable.
class ExperienceTracker {
 public:
  // Folds one (duration seconds, utility) pair into the extremes; the first pair sets them all.
  void Observe(double duration_s, double utility);
  // A task of client `index` completed in `duration_s` seconds with statistical utility
  // `utility`: Observe, then the client's experience becomes
  // FedCaseExperience(duration_s, utility, range(), speed_weight), normalised by the extremes
  // seen so far, this task included (the review code's normtime / normscore). It stays fixed
  // until the client's next completion.
  void OnCompleted(profile::ClientIndex index, double duration_s, double utility,
                   double speed_weight);

  // Whether anything was observed; range() is all zeros before.
  bool has_range() const { return has_range_; }
  const ExperienceRange& range() const { return range_; }
  // Experience of every client that completed a task, in [0, 1].
  const absl::flat_hash_map<profile::ClientIndex, double>& experiences() const {
    return experiences_;
  }
  std::optional<double> ExperienceOf(profile::ClientIndex index) const {
    if (index >= experience_of_.size() || std::isnan(experience_of_[index])) return std::nullopt;
    return experience_of_[index];
  }
  // Every client that completed a task as (-experience, index), ascending: best experience
  // first, ties by index. Kept as experiences change, so that FedCaSe's top clients are the
  // first entries rather than a sort of every experienced client each round.
  const absl::btree_set<std::pair<double, profile::ClientIndex>>& ranked() const { return ranked_; }

  TopRatioLearner& top_ratio() { return top_ratio_; }
  const TopRatioLearner& top_ratio() const { return top_ratio_; }

  // Writes every field of v1::FedCaseState; experiences are named by the client ids of `book`
  // (sorted by id) and omitted when `book` is null.
  void ExportTo(v1::FedCaseState* state, const profile::ProfileBook* book = nullptr) const;
  // Errors: INVALID_ARGUMENT for a malformed state (see TopRatioLearner::ImportFrom, or a
  // non-finite experience).
  [[nodiscard]] static absl::Status Validate(const v1::FedCaseState& state);
  // Restores a Validate()d state as stored; experiences of client ids `book` does not know are
  // dropped (none are restored when `book` is null).
  void ImportFrom(const v1::FedCaseState& state, const profile::ProfileBook* book = nullptr);

 private:
  bool has_range_ = false;
  ExperienceRange range_;
  // Sets experiences_[index] and its dense copy.
  void Set(profile::ClientIndex index, double experience);

  absl::flat_hash_map<profile::ClientIndex, double> experiences_;
  // experiences_ by index (NaN: none), for ExperienceOf: FedCaSe looks up every candidate of
  // every round, a hash probe each.
  std::vector<double> experience_of_;
  absl::btree_set<std::pair<double, profile::ClientIndex>> ranked_;  // see ranked()
  TopRatioLearner top_ratio_;
};

}  // namespace fedsched::planner

#endif  // FEDSCHED_SERVER_PLANNER_EXPERIENCE_TRACKER_H_
