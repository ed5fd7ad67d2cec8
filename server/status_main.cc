// fedsched-status: prints a running server's state, its clients and why each participant of the
// recent rounds was picked (the planner's terms).
//
//   fedsched-status --token_file=RUN/store/operator_token [--server=127.0.0.1:50051]
//                   [--ca=ca.pem [--cert=operator.pem --key=operator.key]] [--rounds=3] [--clients]
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "common/flags_usage.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address.");
ABSL_FLAG(int32_t, rounds, 3, "Recent rounds to show.");
ABSL_FLAG(bool, clients, false, "Also list every client's profile.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the server's operator token (default: the server writes it to "
          "<store_path>/operator_token).");
ABSL_FLAG(std::string, ca, "", "CA certificate (PEM) of a TLS server; empty = plaintext.");
ABSL_FLAG(std::string, cert, "", "Client certificate (PEM) for a mutual-TLS server.");
ABSL_FLAG(std::string, key, "", "Private key (PEM) of --cert.");

namespace fedsched {
namespace {

const char* PolicyName(v1::SelectionPolicy p) {
  switch (p) {
    case v1::SELECTION_POLICY_OORT:
      return "oort";
    case v1::SELECTION_POLICY_FEDCASE:
      return "fedcase";
    default:
      return "random";
  }
}

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
  v1::GetStatusResponse status;
  grpc::Status s = stub->GetStatus(&context, request, &status);
  if (!s.ok()) {
    std::fprintf(stderr, "fedsched-status: %s: %s\n", absl::GetFlag(FLAGS_server).c_str(),
                 s.error_message().c_str());
    return 1;
  }
  std::printf("state %s | current round %lld | committed %lld | clients %d registered, %d online\n",
              status.state().c_str(), static_cast<long long>(status.current_round()),
              static_cast<long long>(status.committed_round()), status.registered_clients(),
              status.online_clients());
  if (!status.waiting_for().empty()) std::printf("waiting: %s\n", status.waiting_for().c_str());
  // --rounds=N shows at most N rounds (the server adds the round in flight to its N, and reads
  // 0 as its default): 0 shows none.
  int shown = 0;
  for (const v1::RoundRecord& r : status.recent_rounds()) {
    if (shown++ >= absl::GetFlag(FLAGS_rounds)) break;
    // An evaluated model has a positive test loss; 0 is "not evaluated", not accuracy 0.
    const std::string quality = r.test_loss() > 0
                                    ? absl::StrFormat("test_accuracy %.4f", r.test_accuracy())
                                    : std::string("not evaluated");
    std::printf(
        "\nround %lld (%s): %d accepted, %d rejected in %d aggregation calls, "
        "%d stragglers, %s, predictor MAPE %.1f %%\n",
        static_cast<long long>(r.round()), v1::RoundOutcome_Name(r.outcome()).c_str(),
        r.updates_accepted(), r.updates_rejected(), r.aggregation_calls(), r.stragglers_size(),
        quality.c_str(), 100 * r.predictor_mape());
    std::printf("  %-12s %-8s %-8s %9s %9s %9s %10s %6s %s\n", "client", "policy", "mode",
                "utility", "speed_pen", "score", "predicted", "steps", "note");
    for (const v1::SelectionReason& c : r.cohort()) {
      std::printf("  %-12s %-8s %-8s %9.4f %9.4f %9.4f %9.2fs %6d %s%s\n", c.client_id().c_str(),
                  PolicyName(c.policy()), c.explored() ? "explore" : "exploit",
                  c.statistical_utility(), c.speed_penalty(), c.score(), c.predicted_seconds(),
                  c.local_steps(), c.workload_reduced() ? "[steps reduced] " : "",
                  c.note().c_str());
    }
  }
  if (absl::GetFlag(FLAGS_clients)) {
    std::printf("\n  %-12s %-16s %-7s %12s %10s %8s %8s %9s\n", "client", "identity", "online",
                "ms/sample", "down kbps", "success", "failure", "utility");
    for (const v1::ClientSummary& c : status.clients()) {
      const v1::ClientProfile& p = c.profile();
      std::printf("  %-12s %-16s %-7s %12.3f %10.0f %8lld %8lld %9.2f\n", c.client_id().c_str(),
                  c.identity().c_str(), c.online() ? "yes" : "no", p.compute_ms_per_sample(),
                  p.download_kbps(), static_cast<long long>(p.successes()),
                  static_cast<long long>(p.failures()), p.statistical_utility());
    }
  }
  return 0;
}

}  // namespace
}  // namespace fedsched

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched operator status");
  absl::ParseCommandLine(argc, argv);
  return fedsched::Main();
}
