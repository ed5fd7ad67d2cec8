// Text rendering of a server's GetStatusResponse for fedsched-status (docs/reports/RELIABILITY.md
// §8, operator facts). Kept apart from the binary so that its output is unit-tested.
#ifndef FEDSCHED_SERVER_CLI_STATUS_FORMAT_H_
#define FEDSCHED_SERVER_CLI_STATUS_FORMAT_H_

#include <string>

#include "fedsched/v1/coordinator.pb.h"

namespace fedsched::cli {

struct StatusFormatOptions {
  // Rounds to show, newest first, the round in flight (if any) counting as one. Default: 3.
  // 0 shows none. The server sends the round in flight on top of the N recent ones it is asked
  // for: the formatter cuts the list to N.
  int rounds = 3;
  // Also list every client's profile. Default: false.
  bool clients = false;
};

// Renders `status` as fedsched-status prints it: a state line, what the server waits for, then
// per round its outcome ("in progress" for the round in flight, whose record has no outcome
// yet; no test accuracy until it is evaluated) and its cohort. The cohort's Oort columns
// (normalised utility, speed penalty, score, explore/exploit) appear only for rounds planned by
// Oort or FedCaSe, which builds on Oort's scores; under random selection they are meaningless.
// The client table's utility is the raw Oort utility |B| sqrt(mean loss^2) of the profile, not
// the per-round normalised one: the columns are labelled norm_util and raw_util. A cohort member
// the device-to-job matcher offered with a reason (SelectionReason.match_reason) ends its note
// with " [matched: <reason>]". Pure; no I/O.
std::string FormatStatus(const v1::GetStatusResponse& status, const StatusFormatOptions& options);

}  // namespace fedsched::cli

#endif  // FEDSCHED_SERVER_CLI_STATUS_FORMAT_H_
