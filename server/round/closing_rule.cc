#include "server/round/closing_rule.h"

#include "absl/strings/str_cat.h"

namespace fedsched::round {

ClosingRule::ClosingRule(const v1::ServerConfig& config)
    : first_k_(config.round_closing() == v1::ROUND_CLOSING_FIRST_K ||
               config.aggregation().async_fedbuff()),
      target_(config.clients_per_round()),
      min_updates_(config.min_updates()) {}

bool ClosingRule::ShouldCommit(int accepted, double now_s, double deadline_s,
                               int outstanding) const {
  const bool enough = accepted >= min_updates_;
  return !HasRoom(accepted) || (enough && (now_s >= deadline_s || outstanding == 0));
}

CloseVerdict ClosingRule::Decide(int accepted, double now_s, double deadline_s,
                                 int outstanding) const {
  if (ShouldCommit(accepted, now_s, deadline_s, outstanding)) return CloseVerdict::kCommit;
  if (now_s >= deadline_s || outstanding == 0) return CloseVerdict::kFail;
  return CloseVerdict::kOpen;
}

std::string ClosingRule::Shortfall(int accepted, bool past_deadline, absl::string_view what) const {
  return absl::StrCat(accepted, " of min_updates ", min_updates_, " ", what, " by the ",
                      past_deadline ? "deadline" : "last task");
}

}  // namespace fedsched::round
