// fedsched-ctl's commands (docs/guides/JOBS.md "fedsched-ctl"): submit, list, status, watch,
// cancel, pause and resume jobs over a server's JobService. Kept apart from the binary so that the
// tests run them in-process against a server.
#ifndef FEDSCHED_SERVER_CLI_CTL_COMMANDS_H_
#define FEDSCHED_SERVER_CLI_CTL_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/cli/operator_channel.h"

namespace fedsched::cli {

// fedsched-ctl's exit codes.
enum CtlExit : int {
  kCtlOk = 0,
  // Any other failure: the server unreachable, a deadline passed, an internal error.
  kCtlOther = 1,
  // A usage error, or a job file that cannot be read or parsed (the message names the line and
  // the key).
  kCtlUsage = 2,
  // No such job.
  kCtlNotFound = 3,
  // The server refused: an invalid spec (the field named), a name in use, an action the job's
  // state does not allow, or jobs.max_jobs reached.
  kCtlRefused = 4,
  // No operator token, a wrong one, or no operator certificate.
  kCtlUnauthenticated = 5,
  // watch: the job ended failed or cancelled.
  kCtlJobNotFinished = 6,
};

// The exit code of a failed call: NOT_FOUND 3; INVALID_ARGUMENT, ALREADY_EXISTS,
// FAILED_PRECONDITION, RESOURCE_EXHAUSTED 4; UNAUTHENTICATED, PERMISSION_DENIED 5; others 1.
int CtlExitCode(grpc::StatusCode code);

// fedsched-ctl's usage text, exit codes included (its --help).
extern const char kCtlUsageText[];

struct CtlOptions {
  // Print JSON (one object per line: a JobRecord, or for watch a WatchJobEvent) instead of
  // tables. Default: false.
  bool json = false;
  // list: also ended jobs. Default: false.
  bool all = false;
  // cancel: the reason recorded; empty = the server's ("cancelled by the operator").
  std::string reason;
  // watch: the first round to show; 0 = rounds after the job's committed one. Default: 0.
  int64_t from_round = 0;
  // Deadline of each unary call. Default: 30 s.
  absl::Duration deadline = absl::Seconds(30);
};

// Runs one command: `args` is the command and its operands ("submit FILE", "list", "status
// JOB", "watch JOB", "cancel JOB", "pause JOB", "resume JOB"). Writes its result to `out`, errors
// to `err` (prefixed "fedsched-ctl: "), and returns a CtlExit code. watch prints each event as
// it arrives and returns once the stream ends: kCtlOk when the job finished,
// kCtlJobNotFinished when it failed or was cancelled.
int RunCtlCommand(const std::vector<std::string>& args, const CtlOptions& options,
                  const OperatorChannel& channel, std::ostream& out, std::ostream& err);

}  // namespace fedsched::cli

#endif  // FEDSCHED_SERVER_CLI_CTL_COMMANDS_H_
