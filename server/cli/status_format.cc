#include "server/cli/status_format.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "server/planner/policy_registry.h"

namespace fedsched::cli {
namespace {

// The policy that picked `c`: its registered name ("oort", or one a program registered), else
// the enum name without its prefix, lower case (records written before names were recorded).
std::string PolicyName(const v1::SelectionReason& c) {
  if (!c.policy_name().empty()) return c.policy_name();
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::SelectionPolicy_Name(c.policy()), "SELECTION_POLICY_"));
}

// Oort's terms mean something only when the policy scored the cohort with them
// (SelectionPolicyKind::scores_by_utility).
bool UsesOortScores(const v1::RoundRecord& r) {
  return std::any_of(r.cohort().begin(), r.cohort().end(), [](const v1::SelectionReason& c) {
    if (c.policy() == v1::SELECTION_POLICY_UNSPECIFIED) return false;
    v1::SelectionConfig selection;
    selection.set_policy(c.policy());
    absl::StatusOr<const planner::SelectionPolicyKind*> kind =
        planner::ConfiguredSelectionPolicy(selection);
    return kind.ok() && (*kind)->scores_by_utility();
  });
}

std::string RoundHeadline(const v1::RoundRecord& r) {
  // The round in flight has no outcome yet; its model is not evaluated before it commits.
  const bool in_flight = r.outcome() == v1::ROUND_OUTCOME_UNSPECIFIED;
  std::string outcome;
  std::string quality;
  if (in_flight) {
    outcome = absl::StrFormat("in progress, deadline %.1f s", r.deadline_s());
    quality = "not evaluated yet";
  } else {
    outcome = r.outcome() == v1::ROUND_OUTCOME_COMMITTED ? "committed" : "failed";
    // An evaluated model has a positive test loss; 0 is "not evaluated", not accuracy 0.
    quality = r.test_loss() > 0 ? absl::StrFormat("test_accuracy %.4f", r.test_accuracy())
                                : std::string("not evaluated");
  }
  std::string line = absl::StrFormat(
      "round %d (%s): %d accepted, %d rejected in %d aggregation calls, %d stragglers, %s",
      r.round(), outcome, r.updates_accepted(), r.updates_rejected(), r.aggregation_calls(),
      r.stragglers_size(), quality);
  if (!in_flight) {
    absl::StrAppendFormat(&line, ", predictor MAPE %.1f %%", 100 * r.predictor_mape());
  }
  // Why uploads were refused (docs/guides/SECURITY.md "Screens that cannot be starved"), e.g.
  // "rejected: norm_median 3, late 1".
  if (r.rejected_by_reason_size() > 0) {
    absl::StrAppend(&line, ", rejected:");
    for (int i = 0; i < r.rejected_by_reason_size(); ++i) {
      const v1::RejectionCount& c = r.rejected_by_reason(i);
      absl::StrAppendFormat(&line, "%s %s %d", i == 0 ? "" : ",", c.reason(), c.count());
    }
  }
  // FedBuff versions: how stale their updates were, and the tasks dropped as too stale.
  if (r.staleness_max() > 0 || r.dropped_stale() > 0) {
    absl::StrAppendFormat(&line, ", staleness mean %.2f max %d, %d dropped as stale",
                          r.staleness_mean(), r.staleness_max(), r.dropped_stale());
  }
  // Resource fit (docs/guides/RESOURCE_FIT.md): out-of-memory task failures, the memory predictor's
  // error, and the candidates passed over because they fit no batch.
  if (r.oom_failures() > 0) absl::StrAppendFormat(&line, ", %d out of memory", r.oom_failures());
  if (!in_flight && r.memory_predictions_scored() > 0) {
    absl::StrAppendFormat(&line, ", memory MAPE %.1f %%", 100 * r.memory_mape());
  }
  if (r.passed_over_size() > 0) {
    absl::StrAppendFormat(&line, ", %d passed over (does not fit)", r.passed_over_size());
  }
  // Differential privacy (docs/guides/PRIVACY.md): the budget spent after this round, and the clip
  // norm and noise it used.
  if (r.dp_delta() > 0) {
    absl::StrAppendFormat(&line, ", epsilon %.4f at delta %.2g (clip %.4g, noise std %.4g)",
                          r.dp_epsilon(), r.dp_delta(), r.dp_clip_norm(), r.dp_noise_stddev());
  }
  absl::StrAppend(&line, "\n");
  return line;
}

constexpr double kMiB = 1024.0 * 1024.0;

// " [batch 8: memory]" for a participant whose batch was lowered to fit its memory budget.
std::string BatchNote(const v1::SelectionReason& c) {
  return c.batch_reduced() ? absl::StrFormat(" [batch %d: memory]", c.batch_size()) : "";
}

// " [matched: <reason>]" for a participant the device-to-job matcher offered to its job with a
// reason (SelectionReason.match_reason; docs/guides/JOBS.md "Scheduling devices across jobs").
std::string MatchNote(const v1::SelectionReason& c) {
  return c.match_reason().empty() ? "" : absl::StrCat(" [matched: ", c.match_reason(), "]");
}

// One line per candidate passed over as "does not fit".
std::string PassedOverLines(const v1::RoundRecord& r) {
  std::string out;
  for (const v1::SelectionReason& c : r.passed_over()) {
    absl::StrAppendFormat(&out,
                          "  passed over %s: %s (predicted %.2f MiB at batch %d, budget %.2f "
                          "MiB)\n",
                          c.client_id(), c.note(), c.predicted_peak_bytes() / kMiB, c.batch_size(),
                          c.memory_budget_bytes() / kMiB);
  }
  return out;
}

std::string CohortTable(const v1::RoundRecord& r) {
  std::string out;
  if (UsesOortScores(r)) {
    absl::StrAppendFormat(&out, "  %-12s %-8s %-8s %9s %9s %9s %10s %6s %s\n", "client", "policy",
                          "mode", "norm_util", "speed_pen", "score", "predicted", "steps", "note");
    for (const v1::SelectionReason& c : r.cohort()) {
      absl::StrAppendFormat(
          &out, "  %-12s %-8s %-8s %9.4f %9.4f %9.4f %9.2fs %6d %s%s%s%s\n", c.client_id(),
          PolicyName(c), c.explored() ? "explore" : "exploit", c.statistical_utility(),
          c.speed_penalty(), c.score(), c.predicted_seconds(), c.local_steps(),
          c.workload_reduced() ? "[steps reduced] " : "", c.note(), BatchNote(c), MatchNote(c));
    }
    return out + PassedOverLines(r);
  }
  absl::StrAppendFormat(&out, "  %-12s %-8s %10s %6s %s\n", "client", "policy", "predicted",
                        "steps", "note");
  for (const v1::SelectionReason& c : r.cohort()) {
    absl::StrAppendFormat(&out, "  %-12s %-8s %9.2fs %6d %s%s%s%s\n", c.client_id(), PolicyName(c),
                          c.predicted_seconds(), c.local_steps(),
                          c.workload_reduced() ? "[steps reduced] " : "", c.note(), BatchNote(c),
                          MatchNote(c));
  }
  return out + PassedOverLines(r);
}

std::string ClientTable(const v1::GetStatusResponse& status) {
  // The id and identity columns fit the longest value shown (certificate names and enrolled
  // device names are often longer than a column of fixed width).
  size_t id_width = 12;
  size_t identity_width = 16;
  for (const v1::ClientSummary& c : status.clients()) {
    id_width = std::max(id_width, c.client_id().size());
    identity_width = std::max(identity_width, c.identity().size());
  }
  const int idw = static_cast<int>(id_width);
  const int identw = static_cast<int>(identity_width);
  std::string out = absl::StrFormat("\n  %-*s %-*s %-7s %12s %10s %8s %8s %9s\n", idw, "client",
                                    identw, "identity", "online", "ms/sample", "down kbps",
                                    "success", "failure", "raw_util");
  for (const v1::ClientSummary& c : status.clients()) {
    const v1::ClientProfile& p = c.profile();
    absl::StrAppendFormat(&out, "  %-*s %-*s %-7s %12.3f %10.0f %8d %8d %9.2f\n", idw,
                          c.client_id(), identw, c.identity(), c.online() ? "yes" : "no",
                          p.compute_ms_per_sample(), p.download_kbps(), p.successes(),
                          p.failures(), p.statistical_utility());
  }
  if (status.clients_size() < status.registered_clients()) {
    absl::StrAppendFormat(&out,
                          "  (%d of %d clients shown: the list is cut to what one status "
                          "response carries, transport.max_message_bytes)\n",
                          status.clients_size(), status.registered_clients());
  }
  out +=
      "  raw_util: the profile's Oort utility |B| sqrt(mean loss^2); a round's norm_util is it "
      "clipped and normalised over that round's candidates\n";
  return out;
}

}  // namespace

std::string FormatStatus(const v1::GetStatusResponse& status, const StatusFormatOptions& options) {
  std::string out = absl::StrFormat(
      "state %s | current round %d | committed %d | clients %d registered, %d online\n",
      status.state(), status.current_round(), status.committed_round(), status.registered_clients(),
      status.online_clients());
  if (!status.waiting_for().empty()) absl::StrAppend(&out, "waiting: ", status.waiting_for(), "\n");
  if (status.checkin_cycle_ms() > 0 || status.paced_clients() > 0) {
    // Pace steering (docs/ALGORITHMS.md "Pace steering"): away devices are not "online" but
    // have not left.
    absl::StrAppend(&out,
                    absl::StrFormat("pace steering: %d devices away until their check-in, "
                                    "each checks in about every %.0f s\n",
                                    status.paced_clients(), status.checkin_cycle_ms() / 1000.0));
  }
  if (status.revoked_identities() > 0) {
    // docs/guides/OPERATIONS.md "Revoking a device"; the names only reach callers on the server's
    // host.
    absl::StrAppend(
        &out, "revoked identities: ", status.revoked_identities(),
        status.revoked_identity_names().empty()
            ? " (names shown on the server's host only)"
            : absl::StrCat(" (", absl::StrJoin(status.revoked_identity_names(), ", "), ")"),
        "\n");
  }
  const int shown = std::min(options.rounds, status.recent_rounds_size());
  for (int i = 0; i < shown; ++i) {
    const v1::RoundRecord& r = status.recent_rounds(i);
    absl::StrAppend(&out, "\n", RoundHeadline(r), CohortTable(r));
  }
  if (options.clients) out += ClientTable(status);
  // Secure aggregation (docs/guides/SECURE_AGGREGATION.md "A malicious member"): members kept out
  // of its cohorts, each with why; shown whether or not the client table is.
  for (const v1::ClientSummary& c : status.clients()) {
    if (c.profile().secagg_excluded().empty()) continue;
    absl::StrAppend(&out, "secure aggregation excludes ", c.client_id(),
                    c.identity().empty() ? "" : absl::StrCat(" (", c.identity(), ")"), ": ",
                    c.profile().secagg_excluded(), "\n");
  }
  return out;
}

}  // namespace fedsched::cli
