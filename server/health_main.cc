// fedsched-health: asks a server's standard gRPC health service (grpc.health.v1) for its status.
//
//   fedsched-health --server=127.0.0.1:50052 [--timeout_ms=2000] [--wait_serving_s=0]
//
// Prints SERVING, NOT_SERVING or the error, and exits 0 when SERVING, 1 when NOT_SERVING (or
// UNKNOWN), 2 when the server cannot be asked. With --wait_serving_s it polls until SERVING or
// the time is up. Plaintext only: point it at ops.health_listen_address
// (docs/guides/OPERATIONS.md).
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flags_usage.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50052", "Address of the health endpoint.");
ABSL_FLAG(int32_t, timeout_ms, 2000, "Deadline of one health check, ms.");
ABSL_FLAG(double, wait_serving_s, 0, "Poll until SERVING for at most this many seconds.");

namespace {

// One Check; returns the exit code and prints the answer when `print` is set.
int CheckOnce(grpc::health::v1::Health::Stub& stub, bool print) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub.Check(&context, request, &response);
  if (!status.ok()) {
    if (print) {
      std::printf("fedsched-health: %s: %s\n", absl::GetFlag(FLAGS_server).c_str(),
                  status.error_message().c_str());
    }
    return 2;
  }
  if (print) {
    std::printf(
        "%s\n",
        grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  }
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  fedsched::SetUsage("Asks a fedsched-server's grpc.health.v1 service for its status.");
  absl::ParseCommandLine(argc, argv);
  auto channel =
      grpc::CreateChannel(absl::GetFlag(FLAGS_server), grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  const absl::Time until = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_wait_serving_s));
  while (absl::Now() < until) {
    if (CheckOnce(*stub, /*print=*/false) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return CheckOnce(*stub, /*print=*/true);
}
