// One TransportConfig sets gRPC limits and keepalive on both the server and the SDK
// (research.md section 7: 4 MiB default limits, "-1 = unlimited" sentinels, ping storms).
#ifndef FEDSCHED_COMMON_TRANSPORT_H_
#define FEDSCHED_COMMON_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "grpcpp/grpcpp.h"

namespace fedsched {

// Returns `config` with defaults filled in for unset (zero) fields and every value checked:
// max_message_bytes in [1 MiB, 2 GiB - 1] (default 16 MiB; negative values such as -1 are rejected,
// never replaced by a default), chunk_bytes in [1 KiB, max_message_bytes / 2] (default 1 MiB),
// keepalive_time_ms >= min_ping_interval_ms (defaults 30000 / 20000), keepalive_timeout_ms > 0
// (default 10000), TLS key and cert given together.
// Errors: INVALID_ARGUMENT naming the field and value.
absl::StatusOr<v1::TransportConfig> ResolveTransport(const v1::TransportConfig& config);

// Applies a resolved transport config to a server builder: message limits, the minimum ping
// interval the server accepts, and keepalive pings of idle clients.
void ApplyServerTransport(const v1::TransportConfig& resolved, grpc::ServerBuilder* builder);

// Channel arguments for the SDK from a resolved config: message limits and keepalive pings no more
// often than the server's minimum.
grpc::ChannelArguments ClientChannelArguments(const v1::TransportConfig& resolved);

// Server credentials: insecure when no cert is configured, else TLS (mutual when
// require_client_cert). Errors: NOT_FOUND / INVALID_ARGUMENT when files cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TransportConfig& resolved);

// Channel credentials: insecure when no CA is configured, else TLS with the CA (and the client's
// own cert/key when given, for mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TransportConfig& resolved);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_TRANSPORT_H_
