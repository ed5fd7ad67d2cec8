#include "server/store/commit_check.h"

#include <algorithm>

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

absl::Status ValidateStoreNamespace(const std::string& ns) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  };
  const auto leading = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (ns.empty() || ns.size() > 63 || !leading(ns[0]) ||
      !std::all_of(ns.begin(), ns.end(), allowed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store namespace '", ns,
                     "': must be 1-63 characters of [a-z0-9._-] starting with a letter or digit"));
  }
  return absl::OkStatus();
}

}  // namespace fedsched
