#include "server/planner/experience_tracker.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fedsched::planner {

void ExperienceTracker::Observe(double duration_s, double utility) {
  if (!has_range_) {
    range_ = {duration_s, duration_s, utility, utility};
    has_range_ = true;
  }
  range_.min_duration_s = std::min(range_.min_duration_s, duration_s);
  range_.max_duration_s = std::max(range_.max_duration_s, duration_s);
  range_.min_utility = std::min(range_.min_utility, utility);
  range_.max_utility = std::max(range_.max_utility, utility);
}

void ExperienceTracker::OnCompleted(profile::ClientIndex index, double duration_s, double utility,
                                    double speed_weight) {
  Observe(duration_s, utility);
  Set(index, FedCaseExperience(duration_s, utility, range_, speed_weight));
}

void ExperienceTracker::Set(profile::ClientIndex index, double experience) {
  auto [it, inserted] = experiences_.try_emplace(index, experience);
  if (!inserted) {
    ranked_.erase({-it->second, index});
    it->second = experience;
  }
  ranked_.insert({-experience, index});
  if (index >= experience_of_.size()) {
    experience_of_.resize(static_cast<size_t>(index) + 1, std::nan(""));
  }
  experience_of_[index] = experience;
}

void ExperienceTracker::ExportTo(v1::FedCaseState* f, const profile::ProfileBook* book) const {
  f->set_has_range(has_range_);
  f->set_min_duration_s(range_.min_duration_s);
  f->set_max_duration_s(range_.max_duration_s);
  f->set_min_utility(range_.min_utility);
  f->set_max_utility(range_.max_utility);
  f->clear_experiences();
  if (book != nullptr) {
    // Sorted by client index (registration order, stable across restarts), not by id: the
    // state is exported at every commit, and sorting 100k id strings per round took half of a
    // 100k-client simulation (docs/reports/SIMULATION.md, speed run).
    std::vector<std::pair<profile::ClientIndex, double>> indexed(experiences_.begin(),
                                                                 experiences_.end());
    std::sort(indexed.begin(), indexed.end());
    f->mutable_experiences()->Reserve(static_cast<int>(indexed.size()));
    for (const auto& [index, e] : indexed) {
      if (index >= book->size()) continue;
      v1::ClientExperience* ce = f->add_experiences();
      ce->set_client_id(book->profile(index).client_id());
      ce->set_experience(e);
    }
  }
  top_ratio_.ExportTo(f);
}

absl::Status ExperienceTracker::Validate(const v1::FedCaseState& f) {
  for (const v1::ClientExperience& ce : f.experiences()) {
    if (!std::isfinite(ce.experience())) {
      return absl::InvalidArgumentError(
          absl::StrCat("planner state: fedcase experience of ", ce.client_id(), " is not finite"));
    }
  }
  TopRatioLearner probe;
  return probe.ImportFrom(f);
}

void ExperienceTracker::ImportFrom(const v1::FedCaseState& f, const profile::ProfileBook* book) {
  has_range_ = f.has_range();
  range_ = {f.min_duration_s(), f.max_duration_s(), f.min_utility(), f.max_utility()};
  experiences_.clear();
  experience_of_.clear();
  ranked_.clear();
  if (book != nullptr) {
    for (const v1::ClientExperience& ce : f.experiences()) {
      if (auto index = book->FindByClientId(ce.client_id())) Set(*index, ce.experience());
    }
  }
  (void)top_ratio_.ImportFrom(f);
}

}  // namespace fedsched::planner
