#include "server/ops/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace fedsched::ops {
namespace {

void Apply(grpc::Server* server, bool serving) {
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
}

}  // namespace

void EnableHealthService() { grpc::EnableDefaultHealthCheckService(true); }

absl::StatusOr<std::unique_ptr<HealthEndpoint>> HealthEndpoint::Start(
    const std::string& listen_address) {
  EnableHealthService();
  std::unique_ptr<HealthEndpoint> endpoint(new HealthEndpoint());
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a busy port is an error
  // Probes connect, ask and leave: a connection that has not finished its HTTP/2 preface in
  // 10 s, or sits idle for 60 s, is closed rather than kept (gRPC serves many connections from
  // its polling threads, so idle ones never starve a probe; this bounds what they hold).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 60'000);
  builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(), &endpoint->port_);
  // gRPC's built-in health service runs on the callback API; a server with no synchronous
  // service must still own a polled completion queue, or BuildAndStart refuses to start. Nothing
  // is ever queued on it: the thread only drains it until shutdown.
  endpoint->cq_ = builder.AddCompletionQueue(/*is_frequently_polled=*/true);
  endpoint->server_ = builder.BuildAndStart();
  if (endpoint->server_ == nullptr || endpoint->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve health checks on ", listen_address, " (address in use?)"));
  }
  endpoint->cq_thread_ = std::thread([cq = endpoint->cq_.get()] {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) {
    }
  });
  Apply(endpoint->server_.get(), false);
  return endpoint;
}

HealthEndpoint::~HealthEndpoint() {
  if (server_ != nullptr) server_->Shutdown();
  if (cq_ != nullptr) cq_->Shutdown();  // after the server, as gRPC requires
  if (cq_thread_.joinable()) cq_thread_.join();
}

void HealthEndpoint::Attach(grpc::Server* server) {
  absl::MutexLock lock(&mu_);
  attached_.push_back(server);
  Apply(server, serving_);
}

void HealthEndpoint::Detach(grpc::Server* server) {
  absl::MutexLock lock(&mu_);
  attached_.erase(std::remove(attached_.begin(), attached_.end(), server), attached_.end());
}

void HealthEndpoint::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  serving_ = serving;
  Apply(server_.get(), serving);
  for (grpc::Server* s : attached_) Apply(s, serving);
}

bool HealthEndpoint::serving() const {
  absl::MutexLock lock(&mu_);
  return serving_;
}

}  // namespace fedsched::ops
