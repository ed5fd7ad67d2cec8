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
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "common/flags_usage.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/cli/status_format.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address.");
ABSL_FLAG(int32_t, rounds, 3, "Recent rounds to show, the round in flight included (0 = none).");
ABSL_FLAG(bool, clients, false, "Also list every client's profile.");
ABSL_FLAG(std::string, job, "",
          "The job whose status to show (docs/JOBS.md); empty = the job of the server's own "
          "config.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the server's operator token (default: the server writes it to "
          "<store_path>/operator_token).");
ABSL_FLAG(std::string, ca, "", "CA certificate (PEM) of a TLS server; empty = plaintext.");
ABSL_FLAG(std::string, cert, "", "Client certificate (PEM) for a mutual-TLS server.");
ABSL_FLAG(std::string, key, "", "Private key (PEM) of --cert.");

namespace fedsched {
namespace {

// The operator token from --token_file ("" when the flag is unset).
absl::StatusOr<std::string> ReadToken() {
  const std::string path = absl::GetFlag(FLAGS_token_file);
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read --token_file " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(buffer.str()));
}

int Main() {
  v1::TransportConfig transport;
  transport.set_tls_ca_path(absl::GetFlag(FLAGS_ca));
  transport.set_tls_cert_path(absl::GetFlag(FLAGS_cert));
  transport.set_tls_key_path(absl::GetFlag(FLAGS_key));
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(transport);
  absl::StatusOr<std::string> token = ReadToken();
  if (!credentials.ok() || !token.ok()) {
    std::fprintf(stderr, "fedsched-status: %s\n",
                 (credentials.ok() ? token.status() : credentials.status()).ToString().c_str());
    return 2;
  }
  auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_server), *credentials);
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  if (!token->empty()) context.AddMetadata("fedsched-operator-token", *token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (absl::GetFlag(FLAGS_rounds) < 0) {
    std::fprintf(stderr, "fedsched-status: --rounds must be >= 0, got %d\n",
                 absl::GetFlag(FLAGS_rounds));
    return 2;
  }
  v1::GetStatusRequest request;
  request.set_recent_rounds(absl::GetFlag(FLAGS_rounds));
  request.set_job(absl::GetFlag(FLAGS_job));
  v1::GetStatusResponse status;
  grpc::Status s = stub->GetStatus(&context, request, &status);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND && !request.job().empty()) {
    std::fprintf(stderr, "fedsched-status: %s: no job %s (%s)\n",
                 absl::GetFlag(FLAGS_server).c_str(), request.job().c_str(),
                 s.error_message().c_str());
    return 1;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "fedsched-status: %s: %s\n", absl::GetFlag(FLAGS_server).c_str(),
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
