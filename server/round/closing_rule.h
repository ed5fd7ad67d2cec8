// When an open round closes (docs/ALGORITHMS.md §2 "Closing"; docs/ARCHITECTURE.md "The round
// engine"): under first-K closing (round_closing FIRST_K, and always under FedBuff) as soon as
// K = clients_per_round updates are folded; otherwise, and for a first-K round that falls
// short, at its deadline or once no task is left in flight, committed with at least
// min_updates updates and failed with fewer. Owned by RoundEngine; pure.
#ifndef FEDSCHED_SERVER_ROUND_CLOSING_RULE_H_
#define FEDSCHED_SERVER_ROUND_CLOSING_RULE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::round {

// What the rule decides for an open round.
enum class CloseVerdict {
  kOpen,    // keep collecting updates
  kCommit,  // close and commit
  kFail,    // close as a failed attempt (too few updates by the deadline or the last task)
};

// Immutable after construction; safe to share.
class ClosingRule {
 public:
  // The rule of a config resolved by ResolveRoundConfig (clients_per_round, min_updates,
  // round_closing, aggregation.async_fedbuff).
  explicit ClosingRule(const v1::ServerConfig& config);

  // Under first-K closing, the target K; updates beyond it are stragglers.
  int target() const { return target_; }
  // False when a round holding `accepted` updates (folded plus pending) is full: first-K
  // closing and accepted >= K. Always true under deadline closing.
  bool HasRoom(int accepted) const { return !(first_k_ && accepted >= target_); }
  // True when the round closes and commits now: first-K with K updates in, or min_updates in
  // and (now_s past deadline_s, or no task in flight: `outstanding` == 0). Seconds on the
  // caller's clock.
  bool ShouldCommit(int accepted, double now_s, double deadline_s, int outstanding) const;
  // The verdict for a round with `accepted` updates and `outstanding` tasks in flight at now_s.
  CloseVerdict Decide(int accepted, double now_s, double deadline_s, int outstanding) const;
  // Why a round failed: "<accepted> of min_updates <m> <what> by the deadline" (or "by the
  // last task" before the deadline); `what` names the contributions, e.g. "updates".
  std::string Shortfall(int accepted, bool past_deadline, absl::string_view what) const;

 private:
  bool first_k_;
  int target_;       // clients_per_round
  int min_updates_;  // the fewest updates a round commits with
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_CLOSING_RULE_H_
