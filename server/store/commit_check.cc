#include "server/store/commit_check.h"

#include "absl/strings/str_cat.h"

namespace fedsched {

absl::Status CheckCommitFollows(const RoundCommit& commit, int64_t committed_round) {
  const int64_t round = commit.record.round();
  const int64_t earlier = static_cast<int64_t>(commit.earlier_records.size());
  if (round != committed_round + 1 + earlier) {
    return absl::FailedPreconditionError(absl::StrCat("commit of round ", round, " (with ", earlier,
                                                      " earlier records) but the last ",
                                                      "committed round is ", committed_round));
  }
  if (commit.model == nullptr) return absl::InvalidArgumentError("commit without a model");
  return absl::OkStatus();
}

}  // namespace fedsched
