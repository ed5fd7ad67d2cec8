// fedsched-ctl: submits and controls a running server's jobs over its JobService (docs/JOBS.md).
//
//   fedsched-ctl --token_file=RUN/store/operator_token [--server=127.0.0.1:50051]
//                [--ca=ca.pem [--cert=operator.pem --key=operator.key]] [--json]
//                submit FILE | list [--all] | status JOB | watch JOB | cancel JOB [--reason=TEXT]
//                | pause JOB | resume JOB
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/flags_usage.h"
#include "server/cli/ctl_commands.h"
#include "server/cli/operator_channel.h"

ABSL_FLAG(bool, json, false, "Print JSON, one object per line, instead of tables.");
ABSL_FLAG(bool, all, false, "list: also ended jobs (finished, failed, cancelled).");
ABSL_FLAG(std::string, reason, "", "cancel: the reason recorded with the job.");
ABSL_FLAG(int64_t, from_round, 0,
          "watch: the first round to show (0 = the rounds after the job's committed one).");
ABSL_FLAG(int32_t, timeout_s, 30, "Deadline of each call but watch, seconds.");

namespace {

// abseil's own usage flags, which its parser handles without registering them.
bool IsUsageFlag(absl::string_view name) {
  for (absl::string_view usage : {"help", "helpfull", "helpshort", "helppackage", "helpon",
                                  "helpmatch", "version", "only_check_args"}) {
    if (name == usage) return true;
  }
  return false;
}

// The first argument before "--" that names no flag ("--jsn", "-x=1"), or "" when there is none:
// abseil's parser would exit 1 on it, and a usage error exits 2 here.
std::string UnknownFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const absl::string_view name = arg.substr(0, arg.find('='));
    const bool negated_bool = absl::ConsumePrefix(&arg, "no") &&
                              absl::FindCommandLineFlag(arg.substr(0, arg.find('='))) != nullptr;
    if (absl::FindCommandLineFlag(name) == nullptr && !negated_bool && !IsUsageFlag(name)) {
      return argv[i];
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  fedsched::SetUsage(fedsched::cli::kCtlUsageText);
  if (const std::string flag = UnknownFlag(argc, argv); !flag.empty()) {
    std::cerr << "fedsched-ctl: unknown flag " << flag << " (see --help)\n";
    return fedsched::cli::kCtlUsage;
  }
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> args(positional.begin() + 1, positional.end());
  absl::StatusOr<fedsched::cli::OperatorChannel> channel =
      fedsched::cli::OpenOperatorChannel(fedsched::cli::OperatorConnectionFromFlags());
  if (!channel.ok()) {
    std::cerr << "fedsched-ctl: " << channel.status().message() << "\n";
    return fedsched::cli::kCtlUsage;
  }
  if (absl::GetFlag(FLAGS_timeout_s) <= 0 || absl::GetFlag(FLAGS_from_round) < 0) {
    std::cerr << "fedsched-ctl: --timeout_s must be > 0 and --from_round >= 0\n";
    return fedsched::cli::kCtlUsage;
  }
  const fedsched::cli::CtlOptions options{
      .json = absl::GetFlag(FLAGS_json),
      .all = absl::GetFlag(FLAGS_all),
      .reason = absl::GetFlag(FLAGS_reason),
      .from_round = absl::GetFlag(FLAGS_from_round),
      .deadline = absl::Seconds(absl::GetFlag(FLAGS_timeout_s))};
  return fedsched::cli::RunCtlCommand(args, options, *channel, std::cout, std::cerr);
}
