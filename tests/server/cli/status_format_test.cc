#include "server/cli/status_format.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::RoundRecord Committed(int64_t round, v1::SelectionPolicy policy) {
  v1::RoundRecord r;
  r.set_round(round);
  r.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  r.set_updates_accepted(2);
  r.set_test_accuracy(0.75);
  r.set_test_loss(0.6);
  v1::SelectionReason* c = r.add_cohort();
  c->set_client_id("c-1");
  c->set_policy(policy);
  c->set_statistical_utility(0.5);
  c->set_speed_penalty(1);
  c->set_score(0.5);
  return r;
}

int CountRounds(const std::string& text) {
  int n = 0;
  for (size_t at = text.find("\nround "); at != std::string::npos;
       at = text.find("\nround ", at + 1)) {
    ++n;
  }
  return n;
}

TEST(StatusFormatTest, RoundInFlightSaysInProgressAndHasNoAccuracy) {
  v1::GetStatusResponse status;
  status.set_state("running");
  v1::RoundRecord* in_flight = status.add_recent_rounds();
  in_flight->set_round(4);
  in_flight->set_deadline_s(30);
  in_flight->set_updates_accepted(1);
  *status.add_recent_rounds() = Committed(3, v1::SELECTION_POLICY_RANDOM);
  const std::string text = FormatStatus(status, {.rounds = 2});
  EXPECT_THAT(text, HasSubstr("round 4 (in progress, deadline 30.0 s): 1 accepted"));
  EXPECT_THAT(text, HasSubstr("not evaluated yet"));
  EXPECT_THAT(text, HasSubstr("round 3 (committed)"));
  EXPECT_THAT(text, HasSubstr("test_accuracy 0.7500"));
  EXPECT_THAT(text, Not(HasSubstr("UNSPECIFIED")));
  EXPECT_THAT(text, Not(HasSubstr("test_accuracy 0.0000")));
}

TEST(StatusFormatTest, RefusedUploadsAreShownByReason) {
  v1::GetStatusResponse status;
  v1::RoundRecord r = Committed(5, v1::SELECTION_POLICY_RANDOM);
  r.set_updates_rejected(4);
  v1::RejectionCount* late = r.add_rejected_by_reason();
  late->set_reason("late");
  late->set_count(1);
  v1::RejectionCount* median = r.add_rejected_by_reason();
  median->set_reason("norm_median");
  median->set_count(3);
  *status.add_recent_rounds() = r;
  const std::string text = FormatStatus(status, {.rounds = 1});
  EXPECT_THAT(text, HasSubstr("2 accepted, 4 rejected"));
  EXPECT_THAT(text, HasSubstr("rejected: late 1, norm_median 3"));
  // A round without refusals says nothing more.
  status.clear_recent_rounds();
  *status.add_recent_rounds() = Committed(6, v1::SELECTION_POLICY_RANDOM);
  EXPECT_THAT(FormatStatus(status, {.rounds = 1}), Not(HasSubstr("rejected:")));
}

TEST(StatusFormatTest, UnevaluatedCommittedRoundSaysNotEvaluated) {
  v1::GetStatusResponse status;
  v1::RoundRecord r = Committed(2, v1::SELECTION_POLICY_RANDOM);
  r.set_test_loss(0);
  r.set_test_accuracy(0);
  *status.add_recent_rounds() = r;
  const std::string text = FormatStatus(status, {});
  EXPECT_THAT(text, HasSubstr("round 2 (committed)"));
  EXPECT_THAT(text, HasSubstr("not evaluated"));
  EXPECT_THAT(text, Not(HasSubstr("test_accuracy")));
}

TEST(StatusFormatTest, PaceSteeringLineOnlyWhilePacing) {
  v1::GetStatusResponse status;
  status.set_state("running");
  EXPECT_THAT(FormatStatus(status, {}), Not(HasSubstr("pace steering")));
  status.set_paced_clients(9800);
  status.set_checkin_cycle_ms(250000);
  EXPECT_THAT(FormatStatus(status, {}),
              HasSubstr("pace steering: 9800 devices away until their check-in, each checks in "
                        "about every 250 s"));
}

TEST(StatusFormatTest, ShowsAtMostTheRequestedRoundsInFlightIncluded) {
  v1::GetStatusResponse status;
  status.add_recent_rounds()->set_round(5);  // in flight, sent on top of the N asked for
  for (int64_t r = 4; r >= 2; --r) *status.add_recent_rounds() = Committed(r, {});
  EXPECT_EQ(CountRounds(FormatStatus(status, {.rounds = 2})), 2);
  EXPECT_EQ(CountRounds(FormatStatus(status, {.rounds = 0})), 0);
  EXPECT_EQ(CountRounds(FormatStatus(status, {.rounds = 10})), 4);
}

TEST(StatusFormatTest, OortColumnsOnlyForOortScoredRounds) {
  for (v1::SelectionPolicy policy :
       {v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_FEDCASE, v1::SELECTION_POLICY_RANDOM}) {
    v1::GetStatusResponse status;
    *status.add_recent_rounds() = Committed(1, policy);
    const std::string text = FormatStatus(status, {});
    if (policy == v1::SELECTION_POLICY_RANDOM) {
      EXPECT_THAT(text, Not(HasSubstr("norm_util")));
      EXPECT_THAT(text, Not(HasSubstr("speed_pen")));
      EXPECT_THAT(text, Not(HasSubstr("exploit")));
      EXPECT_THAT(text, HasSubstr("c-1"));
    } else {
      EXPECT_THAT(text, HasSubstr("norm_util speed_pen"));
      EXPECT_THAT(text, HasSubstr("exploit"));
    }
  }
}

// A policy registered by name (no enum value) is shown by its name, not as "unspecified".
TEST(StatusFormatTest, CohortShowsAPolicyByItsRegisteredName) {
  v1::GetStatusResponse status;
  *status.add_recent_rounds() = Committed(1, v1::SELECTION_POLICY_UNSPECIFIED);
  status.mutable_recent_rounds(0)->mutable_cohort(0)->set_policy_name("largest_data");
  const std::string text = FormatStatus(status, {});
  EXPECT_THAT(text, HasSubstr("largest_data"));
  EXPECT_THAT(text, Not(HasSubstr("unspecified")));
}

// Jobs sharing a fleet: why the device-to-job matcher offered a member to its job ends its note,
// in both cohort tables; nothing is added without a reason.
TEST(StatusFormatTest, CohortShowsTheMatchReasonWhenThereIsOne) {
  for (v1::SelectionPolicy policy : {v1::SELECTION_POLICY_OORT, v1::SELECTION_POLICY_RANDOM}) {
    v1::GetStatusResponse status;
    *status.add_recent_rounds() = Committed(1, policy);
    EXPECT_THAT(FormatStatus(status, {}), Not(HasSubstr("matched")));
    status.mutable_recent_rounds(0)->mutable_cohort(0)->set_match_reason(
        "scarce group first; fast tier");
    EXPECT_THAT(FormatStatus(status, {}), HasSubstr("[matched: scarce group first; fast tier]"));
  }
}

TEST(StatusFormatTest, ClientTableLabelsItsUtilityRaw) {
  v1::GetStatusResponse status;
  v1::ClientSummary* c = status.add_clients();
  c->set_client_id("c-7");
  c->mutable_profile()->set_statistical_utility(123.5);
  EXPECT_THAT(FormatStatus(status, {.clients = false}), Not(HasSubstr("c-7")));
  const std::string text = FormatStatus(status, {.clients = true});
  EXPECT_THAT(text, HasSubstr("raw_util"));
  EXPECT_THAT(text, HasSubstr("123.50"));
}

// A long identity (a certificate or enrolled device name) widens its column instead of pushing
// the next columns out of line.
TEST(StatusFormatTest, ClientTableColumnsFitLongIdentities) {
  v1::GetStatusResponse status;
  v1::ClientSummary* a = status.add_clients();
  a->set_client_id("c-1");
  a->set_identity("device-eu-west-rack-17-unit-042");
  a->set_online(true);
  v1::ClientSummary* b = status.add_clients();
  b->set_client_id("c-2");
  b->set_identity("d");
  const std::string text = FormatStatus(status, {.clients = true});
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::vector<size_t> online_column;
  for (const std::string& line : lines) {
    if (line.find("c-1") != std::string::npos) online_column.push_back(line.find("yes"));
    if (line.find("c-2") != std::string::npos) online_column.push_back(line.find(" no "));
  }
  ASSERT_EQ(online_column.size(), 2u);
  EXPECT_EQ(online_column[0], online_column[1] + 1) << text;
}

// A client list cut to fit one response says how much of the fleet it shows.
TEST(StatusFormatTest, ACutClientListSaysSo) {
  v1::GetStatusResponse status;
  status.set_registered_clients(1000000);
  status.add_clients()->set_client_id("c-1");
  EXPECT_THAT(FormatStatus(status, {.clients = true}),
              HasSubstr("(1 of 1000000 clients shown: the list is cut"));
  status.set_registered_clients(1);
  EXPECT_THAT(FormatStatus(status, {.clients = true}), Not(HasSubstr("clients shown")));
}

// Secure aggregation: a member kept out of its cohorts is named with why, with or without the
// client table (docs/guides/SECURE_AGGREGATION.md "A malicious member").
TEST(StatusFormatTest, NamesMembersExcludedFromSecureAggregation) {
  v1::GetStatusResponse status;
  status.add_clients()->set_client_id("c-1");
  v1::ClientSummary* c = status.add_clients();
  c->set_client_id("c-7");
  c->set_identity("device-7");
  c->mutable_profile()->set_secagg_excluded("round 2: its key shares did not authenticate");
  for (const bool clients : {false, true}) {
    const std::string text = FormatStatus(status, {.clients = clients});
    EXPECT_THAT(text, HasSubstr("secure aggregation excludes c-7 (device-7): round 2: its key "
                                "shares did not authenticate\n"));
    EXPECT_THAT(text, Not(HasSubstr("excludes c-1")));
  }
}

// Revoked identities (docs/guides/OPERATIONS.md "Revoking a device"): the count, and the names when
// the server sent them (to callers on its host).
TEST(StatusFormatTest, CountsAndNamesRevokedIdentities) {
  v1::GetStatusResponse status;
  EXPECT_THAT(FormatStatus(status, {}), Not(HasSubstr("revoked")));
  status.set_revoked_identities(2);
  EXPECT_THAT(FormatStatus(status, {}),
              HasSubstr("revoked identities: 2 (names shown on the server's host only)\n"));
  status.add_revoked_identity_names("dev-a");
  status.add_revoked_identity_names("dev-b");
  EXPECT_THAT(FormatStatus(status, {}), HasSubstr("revoked identities: 2 (dev-a, dev-b)\n"));
}

TEST(StatusFormatTest, FedBuffVersionsShowStalenessAndDroppedTasks) {
  v1::GetStatusResponse status;
  v1::RoundRecord r = Committed(7, v1::SELECTION_POLICY_RANDOM);
  *status.add_recent_rounds() = r;
  EXPECT_THAT(FormatStatus(status, {}), Not(HasSubstr("staleness")));  // synchronous
  r.set_staleness_mean(0.5);
  r.set_staleness_max(2);
  r.set_dropped_stale(1);
  *status.mutable_recent_rounds(0) = r;
  EXPECT_THAT(FormatStatus(status, {}), HasSubstr("staleness mean 0.50 max 2, 1 dropped as stale"));
}

// Differential privacy (docs/guides/PRIVACY.md): each round shows the epsilon spent after it.
TEST(StatusFormatTest, PrivateRoundsShowEpsilon) {
  v1::GetStatusResponse status;
  v1::RoundRecord r = Committed(3, v1::SELECTION_POLICY_RANDOM);
  *status.add_recent_rounds() = r;
  EXPECT_THAT(FormatStatus(status, {}), Not(HasSubstr("epsilon")));  // DP off
  r.set_dp_epsilon(1.25);
  r.set_dp_delta(1e-5);
  r.set_dp_clip_norm(0.5);
  r.set_dp_noise_stddev(0.5);
  *status.mutable_recent_rounds(0) = r;
  EXPECT_THAT(FormatStatus(status, {}),
              HasSubstr("epsilon 1.2500 at delta 1e-05 (clip 0.5, noise std 0.5)"));
}

TEST(StatusFormatTest, SaysWhatTheServerWaitsFor) {
  v1::GetStatusResponse status;
  status.set_state("waiting_for_clients");
  status.set_waiting_for("waiting for min_online_clients: 3 of 10 reachable");
  EXPECT_THAT(FormatStatus(status, {}),
              HasSubstr("waiting: waiting for min_online_clients: 3 of 10 reachable\n"));
}

}  // namespace
}  // namespace fedsched::cli
