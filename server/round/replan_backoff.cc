#include "server/round/replan_backoff.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fedsched::round {

ReplanBackoff::ReplanBackoff(const v1::ServerConfig& config)
    : after_failures_(config.replan_backoff_after_failures()),
      max_delay_s_(config.replan_backoff_max_s()) {}

absl::Status ReplanBackoff::CheckMayPlan(int64_t round, double now_s) const {
  if (now_s >= next_plan_s_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "backing off: round ", round, " failed ", failures_, " times in a row (last: ", last_failure_,
      "); next attempt in ", std::ceil(next_plan_s_ - now_s), " s"));
}

std::string ReplanBackoff::NoteFailure(double now_s, const std::string& why) {
  ++failures_;
  last_failure_ = why;
  // A round that keeps failing must not spin: wait 1 s after the N-th consecutive failure,
  // doubling per further failure.
  if (after_failures_ <= 0 || failures_ < after_failures_) return why;
  const double delay =
      std::min(max_delay_s_, std::ldexp(1.0, std::min(failures_ - after_failures_, 30)));
  next_plan_s_ = now_s + delay;
  return absl::StrCat(why, "; ", failures_, " consecutive failures, next attempt in ", delay, " s");
}

void ReplanBackoff::Reset() {
  failures_ = 0;
  next_plan_s_ = 0;
  last_failure_.clear();
}

}  // namespace fedsched::round
