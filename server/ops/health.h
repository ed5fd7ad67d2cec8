// Health reporting through the standard gRPC health service (grpc.health.v1, gRPC's built-in
// implementation), for load balancers and Kubernetes probes (docs/guides/OPERATIONS.md).
//
// The server reports NOT_SERVING while its store opens and the run resumes, SERVING once it
// accepts clients, and NOT_SERVING again while it drains (SIGTERM, run finished, a failed commit).
// Because the coordination port opens only once the store is ready, the status during start-up
// is served by a small separate endpoint (HealthEndpoint) that starts first; the coordination
// port carries the same health service once it is up.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server.h"

namespace fedsched::ops {

// Turns on gRPC's built-in health service for every server built after this call (process-wide,
// as gRPC defines it). Call once, before building any grpc::Server.
void EnableHealthService();

// A plaintext gRPC server carrying only the health service, plus the list of servers whose
// health status follows it. Thread-safe.
class HealthEndpoint {
 public:
  // Listens on `listen_address` (host:port; port 0 picks one) with status NOT_SERVING.
  // Errors: UNAVAILABLE when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HealthEndpoint>> Start(
      const std::string& listen_address);
  ~HealthEndpoint();

  // The bound port.
  int port() const { return port_; }
  // `server` (e.g. the coordination server, built after EnableHealthService) reports the same
  // status from now on. It must outlive this endpoint or be detached by Shutdown order: call
  // Detach before shutting it down.
  void Attach(grpc::Server* server);
  void Detach(grpc::Server* server);
  // SERVING (true) or NOT_SERVING (false) on every attached server and this endpoint.
  void SetServing(bool serving);
  bool serving() const;

 private:
  HealthEndpoint() = default;
  mutable absl::Mutex mu_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread cq_thread_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<grpc::Server*> attached_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  int port_ = 0;
};

}  // namespace fedsched::ops
