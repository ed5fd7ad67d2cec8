#include "server/planner/candidate_pool.h"

#include <algorithm>
#include <iterator>

namespace fedsched::planner {
namespace {

constexpr const char* kNoteText[] = {"",
                                     "random",
                                     "oort-initial-random",
                                     "oort-exploit",
                                     "oort-explore",
                                     "oort-fill-exploit",
                                     "oort-fill-explore",
                                     "fedcase-top-experience",
                                     "fedcase-random",
                                     "fedcase-completion-fill"};

bool ByKeyDescending(const Keyed& a, const Keyed& b) { return a.key > b.key; }

}  // namespace

const char* NoteText(Note note) {
  const size_t i = static_cast<size_t>(note);
  return i < std::size(kNoteText) ? kNoteText[i] : "";
}

void CandidatePool::BeginRound(size_t num_clients) {
  pool_.clear();
  stage_.clear();
  chosen_.clear();
  if (stamp_.size() < num_clients) stamp_.resize(num_clients);
  if (++serial_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), Stamp());
    serial_ = 1;
  }
}

double CandidatePool::NthLargestStageKey(size_t n) {
  std::nth_element(stage_.begin(), stage_.begin() + (n - 1), stage_.end(), ByKeyDescending);
  return stage_[n - 1].key;
}

void CandidatePool::KeepStageKeysAtLeast(double min_key) {
  size_t n = 0;
  for (const Keyed& k : stage_) {
    if (k.key >= min_key) stage_[n++] = k;
  }
  stage_.resize(n);
}

void CandidatePool::KeepBestOfStage(size_t n) {
  if (n >= stage_.size()) return;
  std::nth_element(stage_.begin(), stage_.begin() + n, stage_.end(), ByKeyDescending);
  stage_.resize(n);
}

absl::Span<const Keyed> CandidatePool::BestOfStage(size_t count) {
  const size_t n = std::min(stage_.size(), count);
  auto better = [](const Keyed& a, const Keyed& b) {
    return a.key > b.key || (a.key == b.key && a.pos < b.pos);
  };
  if (n < stage_.size()) std::nth_element(stage_.begin(), stage_.begin() + n, stage_.end(), better);
  std::sort(stage_.begin(), stage_.begin() + n, better);
  return absl::MakeConstSpan(stage_.data(), n);
}

void CandidatePool::KeepFastestChosen(size_t n) {
  std::stable_sort(chosen_.begin(), chosen_.end(),
                   [this](uint32_t a, uint32_t b) { return pool_[a].t_s < pool_[b].t_s; });
  for (size_t k = n; k < chosen_.size(); ++k) pool_[chosen_[k]].status = kRejected;
  if (chosen_.size() > n) chosen_.resize(n);
}

}  // namespace fedsched::planner
