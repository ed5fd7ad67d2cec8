// The backoff of a round that keeps failing (too few clients, every upload refused): after
// config.replan_backoff_after_failures consecutive failed attempts the round is planned again
// no earlier than 1 s after the last failure, doubling per further failure, at most
// config.replan_backoff_max_s (docs/reports/RELIABILITY.md). Owned by RoundEngine; pure.
#ifndef FEDSCHED_SERVER_ROUND_REPLAN_BACKOFF_H_
#define FEDSCHED_SERVER_ROUND_REPLAN_BACKOFF_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// Seconds on the caller's clock. Not thread-safe.
class ReplanBackoff {
 public:
  // The backoff of a config resolved by ResolveRoundConfig (replan_backoff_after_failures: 0 =
  // never back off; replan_backoff_max_s).
  explicit ReplanBackoff(const v1::ServerConfig& config);

  // Consecutive failed attempts of the current round.
  int failures() const { return failures_; }
  // No round is planned before this (0 when not backing off).
  double next_plan_s() const { return next_plan_s_; }
  // OK when round `round` may be planned at now_s; otherwise FAILED_PRECONDITION "backing off:
  // round <round> failed <n> times in a row (last: <why>); next attempt in <s> s".
  [[nodiscard]] absl::Status CheckMayPlan(int64_t round, double now_s) const;
  // Counts a failed attempt at now_s that failed for `why`. Returns the reason to report: `why`,
  // plus "; <n> consecutive failures, next attempt in <s> s" once backing off.
  std::string NoteFailure(double now_s, const std::string& why);
  // The round committed: no failures, no backoff.
  void Reset();

 private:
  int after_failures_;  // replan_backoff_after_failures
  double max_delay_s_;  // replan_backoff_max_s
  int failures_ = 0;
  double next_plan_s_ = 0;
  std::string last_failure_;  // why the last attempt failed, for CheckMayPlan's status
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_REPLAN_BACKOFF_H_
