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
  experiences_[index] = FedCaseExperience(duration_s, utility, range_, speed_weight);
}

std::optional<double> ExperienceTracker::ExperienceOf(profile::ClientIndex index) const {
  auto it = experiences_.find(index);
  if (it == experiences_.end()) return std::nullopt;
  return it->second;
}

void ExperienceTracker::ExportTo(v1::FedCaseState* f, const profile::ProfileBook* book) const {
  f->set_has_range(has_range_);
  f->set_min_duration_s(range_.min_duration_s);
  f->set_max_duration_s(range_.max_duration_s);
  f->set_min_utility(range_.min_utility);
  f->set_max_utility(range_.max_utility);
  f->clear_experiences();
  if (book != nullptr) {
    std::vector<std::pair<std::string, double>> named;
    for (const auto& [index, e] : experiences_) {
      if (index < book->size()) named.emplace_back(book->profile(index).client_id(), e);
    }
    std::sort(named.begin(), named.end());
    for (const auto& [id, e] : named) {
      v1::ClientExperience* ce = f->add_experiences();
      ce->set_client_id(id);
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
  if (book != nullptr) {
    for (const v1::ClientExperience& ce : f.experiences()) {
      if (auto index = book->FindByClientId(ce.client_id())) experiences_[*index] = ce.experience();
    }
  }
  (void)top_ratio_.ImportFrom(f);
}

}  // namespace fedsched::planner
