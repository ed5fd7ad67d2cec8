// One TransportConfig sets gRPC limits and keepalive on both the server and the SDK
// (docs/reports/RELIABILITY.md §1: 4 MiB default limits, "-1 = unlimited" sentinels, ping storms).
#ifndef FEDSCHED_COMMON_TRANSPORT_H_
#define FEDSCHED_COMMON_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"
#include "grpcpp/grpcpp.h"

namespace fedsched {

// Returns `config` with defaults filled in for unset (zero) fields and every value checked:
// max_message_bytes in [1 MiB, 2 GiB - 1] bytes (default 16 MiB), chunk_bytes in
// [1 KiB, max_message_bytes / 2] bytes (default min(1 MiB, max_message_bytes / 2)),
// min_ping_interval_ms, keepalive_time_ms and keepalive_timeout_ms in [1, 2^31 - 1] ms (defaults
// 20000, max(30000, min_ping_interval_ms), 10000) with keepalive_time_ms >= min_ping_interval_ms,
// TLS key and cert given together, require_client_cert only with tls_ca_path and a server cert.
// Zero is "unset" (proto3) and takes the default; there is no "unlimited" sentinel: negative
// values such as -1 are rejected, never replaced by a default.
// Errors: INVALID_ARGUMENT naming the field ("transport.<field>"), the allowed range and the
// configured value.
[[nodiscard]] absl::StatusOr<v1::TransportConfig> ResolveTransport(
    const v1::TransportConfig& config);

// Applies a resolved transport config to a server builder: message limits, the minimum ping
// interval the server accepts, keepalive pings of idle clients, and the TCP read bound when
// BoundTcpReads selected one.
void ApplyServerTransport(const v1::TransportConfig& resolved, grpc::ServerBuilder* builder);

// Channel arguments for the SDK from a resolved config: message limits and keepalive pings no more
// often than the server's minimum; the TCP read bound when BoundTcpReads selected one.
grpc::ChannelArguments ClientChannelArguments(const v1::TransportConfig& resolved);

// Bounds the memory gRPC keeps per TCP connection for its reads, for the whole process
// (docs/DECISIONS.md "Server memory"). gRPC 1.51's default read path sizes each connection's read
// buffers after the largest burst the connection has received (up to 4 MiB) and keeps the unused
// part for the connection's next reads, for as long as it lives: about 1.3 MiB per connection that
// sent a 1M-parameter update, so a server with one connection per device holds that per device.
// With a bound, gRPC reads into one buffer of at most `chunk_bytes` per read (its older read path,
// selected through the GRPC_EXPERIMENTS variable, and GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, which
// ApplyServerTransport and ClientChannelArguments then add): at most about two such buffers per
// connection. `chunk_bytes` <= 0: no bound (GRPC_EXPERIMENTS untouched). Call once, before the
// process's first gRPC call (gRPC reads GRPC_EXPERIMENTS once); a GRPC_EXPERIMENTS already naming
// tcp_read_chunks is left as it is. Not thread-safe.
void BoundTcpReads(int chunk_bytes);

// The GRPC_EXPERIMENTS value BoundTcpReads sets, given the current one (empty when unset): the
// current list plus "-tcp_read_chunks", or the current list unchanged when it names that
// experiment already (an operator's explicit choice wins).
std::string ExperimentsWithBoundedReads(absl::string_view current);

// Server credentials: insecure when no cert is configured, else TLS (mutual when
// require_client_cert). The key file is read with ReadPrivateFile (common/private_file.h).
// Errors: NOT_FOUND / INVALID_ARGUMENT when files cannot be read; FAILED_PRECONDITION when the
// key file is a symbolic link, another uid's or open to group or others.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TransportConfig& resolved);

// Channel credentials: insecure when no CA is configured, else TLS with the CA (and the client's
// own cert/key when given, for mutual TLS). Errors: INVALID_ARGUMENT when a client certificate is
// configured without tls_ca_path (that would silently connect in plaintext); NOT_FOUND when a file
// cannot be read; FAILED_PRECONDITION when the client's key file is a symbolic link, another
// uid's or open to group or others (ReadPrivateFile).
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TransportConfig& resolved);

// SHA-256 fingerprint (raw 32 bytes) of the first certificate in `pem`: the digest of its DER
// encoding, the same value as `openssl x509 -noout -fingerprint -sha256`. Used to bind a client
// identity to the certificate it presented under mutual TLS.
// Errors: INVALID_ARGUMENT when `pem` holds no well-formed PEM certificate block.
[[nodiscard]] absl::StatusOr<std::string> CertificateFingerprint(absl::string_view pem);

// Protocol convention between the SDK and the server: a ReportFailureRequest.reason starting with
// this says the device stopped being eligible mid-task (ClientOptions::eligible: unplugged, off
// Wi-Fi, ...) and stops checking in. The server then ends its session at once, so it is not
// planned again before it returns (it registers again once eligible); the task counts as
// dropped (docs/ARCHITECTURE.md "Eligibility on the device").
inline constexpr char kIneligibleReasonPrefix[] = "interrupted: device no longer eligible";

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_TRANSPORT_H_
