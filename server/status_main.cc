// fedsched-status: prints a running server's state, its clients and why each participant of the
// recent rounds was picked (the planner's terms).
//
//   fedsched-status --token_file=RUN/store/operator_token [--server=127.0.0.1:50051]
//                   [--ca=ca.pem [--cert=operator.pem --key=operator.key]] [--rounds=3] [--clients]
//                   [--job=NAME]
//
// Exits 0 with the status, 1 when the server cannot be asked or refuses (a --job it does not
// know: "no job NAME"), 2 on usage errors.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/flags_usage.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/cli/operator_channel.h"
#include "server/cli/status_format.h"

ABSL_FLAG(int32_t, rounds, 3, "Recent rounds to show, the round in flight included (0 = none).");
ABSL_FLAG(bool, clients, false, "Also list every client's profile.");
ABSL_FLAG(std::string, job, "",
          "The job whose status to show (docs/guides/JOBS.md); empty = the job of the server's own "
          "config.");

namespace fedsched {
namespace {

int Main() {
  const cli::OperatorConnection connection = cli::OperatorConnectionFromFlags();
  absl::StatusOr<cli::OperatorChannel> channel = cli::OpenOperatorChannel(connection);
  if (!channel.ok()) {
    std::fprintf(stderr, "fedsched-status: %s\n", channel.status().ToString().c_str());
    return 2;
  }
  auto stub = v1::Coordinator::NewStub(channel->channel);
  grpc::ClientContext context;
  channel->Prepare(&context, absl::Seconds(5));
  if (absl::GetFlag(FLAGS_rounds) < 0) {
    std::fprintf(stderr, "fedsched-status: --rounds must be >= 0, got %d\n",
                 absl::GetFlag(FLAGS_rounds));
    return 2;
  }
  v1::GetStatusRequest request;
  request.set_recent_rounds(absl::GetFlag(FLAGS_rounds));
  request.set_job(absl::GetFlag(FLAGS_job));
  // The client list costs about 200 bytes per device: asked for only with --clients (the
  // clients secure aggregation excludes come either way).
  request.set_omit_clients(!absl::GetFlag(FLAGS_clients));
  v1::GetStatusResponse status;
  grpc::Status s = stub->GetStatus(&context, request, &status);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND && !request.job().empty()) {
    std::fprintf(stderr, "fedsched-status: %s: no job %s (%s)\n",
                 connection.server.c_str(), request.job().c_str(),
                 s.error_message().c_str());
    return 1;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "fedsched-status: %s: %s\n", connection.server.c_str(),
                 s.error_message().c_str());
    return 1;
  }
  std::fputs(cli::FormatStatus(status, {.rounds = absl::GetFlag(FLAGS_rounds),
                                        .clients = absl::GetFlag(FLAGS_clients)})
                 .c_str(),
             stdout);
  return 0;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched operator status");
  absl::ParseCommandLine(argc, argv);
  return fedsched::Main();
}
