#include "server/planner/round_plan.h"

#include <algorithm>
#include <numeric>

namespace fedsched::planner {

ClosingForecast ForecastClosing(absl::Span<const PlannedTask> participants, int32_t k,
                                v1::RoundClosing closing, double round_deadline_s) {
  ClosingForecast f;
  f.deadline_s = round_deadline_s;
  const size_t n = participants.size();
  const size_t kk = static_cast<size_t>(std::clamp<int64_t>(k, 0, static_cast<int64_t>(n)));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return participants[a].predicted_seconds < participants[b].predicted_seconds;
  });
  f.first.assign(order.begin(), order.begin() + kk);
  if (closing == v1::ROUND_CLOSING_DEADLINE || kk == 0) {
    f.expected_close_s = round_deadline_s;
  } else {
    f.expected_close_s = std::min(participants[order[kk - 1]].predicted_seconds, round_deadline_s);
  }
  return f;
}

}  // namespace fedsched::planner
