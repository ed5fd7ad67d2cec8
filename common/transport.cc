#include "common/transport.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kMaxGrpcMessage = std::numeric_limits<int32_t>::max();

}  // namespace

absl::StatusOr<v1::TransportConfig> ResolveTransport(const v1::TransportConfig& config) {
  v1::TransportConfig out = config;
  if (out.max_message_bytes() == 0) out.set_max_message_bytes(16 * kMiB);
  if (out.max_message_bytes() < kMiB || out.max_message_bytes() > kMaxGrpcMessage) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.max_message_bytes must be in [", kMiB, ", ", kMaxGrpcMessage, "] bytes, got ",
        config.max_message_bytes(), " (there is no 'unlimited' sentinel)"));
  }
  if (out.chunk_bytes() == 0) out.set_chunk_bytes(std::min<int64_t>(kMiB, out.max_message_bytes() / 2));
  if (out.chunk_bytes() < 1024 || out.chunk_bytes() > out.max_message_bytes() / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.chunk_bytes must be in [1024, max_message_bytes / 2 = ",
        out.max_message_bytes() / 2, "], got ", config.chunk_bytes()));
  }
  if (out.min_ping_interval_ms() == 0) out.set_min_ping_interval_ms(20000);
  if (out.keepalive_time_ms() == 0) {
    out.set_keepalive_time_ms(std::max<int64_t>(30000, out.min_ping_interval_ms()));
  }
  if (out.keepalive_timeout_ms() == 0) out.set_keepalive_timeout_ms(10000);
  if (out.min_ping_interval_ms() < 0 || out.keepalive_timeout_ms() < 0) {
    return absl::InvalidArgumentError("transport keepalive values must be positive");
  }
  if (out.keepalive_time_ms() < out.min_ping_interval_ms()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.keepalive_time_ms (", out.keepalive_time_ms(),
        ") must be >= min_ping_interval_ms (", out.min_ping_interval_ms(),
        "): the server would answer faster pings with GOAWAY too_many_pings"));
  }
  if (out.tls_cert_path().empty() != out.tls_key_path().empty()) {
    return absl::InvalidArgumentError("transport.tls_cert_path and tls_key_path go together");
  }
  if (out.require_client_cert() && out.tls_ca_path().empty()) {
    return absl::InvalidArgumentError("transport.require_client_cert needs tls_ca_path");
  }
  return out;
}

void ApplyServerTransport(const v1::TransportConfig& resolved, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(static_cast<int>(resolved.max_message_bytes()));
  builder->SetMaxSendMessageSize(static_cast<int>(resolved.max_message_bytes()));
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              static_cast<int>(resolved.min_ping_interval_ms()));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 5);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              static_cast<int>(resolved.keepalive_time_ms()));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              static_cast<int>(resolved.keepalive_timeout_ms()));
}

grpc::ChannelArguments ClientChannelArguments(const v1::TransportConfig& resolved) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(resolved.max_message_bytes()));
  args.SetMaxSendMessageSize(static_cast<int>(resolved.max_message_bytes()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(resolved.keepalive_time_ms()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(resolved.keepalive_timeout_ms()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly after a server restart; the SDK adds its own backoff with jitter on top.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return args;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TransportConfig& resolved) {
  if (resolved.tls_cert_path().empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      resolved.require_client_cert()
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  FEDSCHED_ASSIGN_OR_RETURN(std::string cert, ReadFileToString(resolved.tls_cert_path()));
  FEDSCHED_ASSIGN_OR_RETURN(std::string key, ReadFileToString(resolved.tls_key_path()));
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!resolved.tls_ca_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFileToString(resolved.tls_ca_path()));
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TransportConfig& resolved) {
  if (resolved.tls_ca_path().empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  FEDSCHED_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFileToString(resolved.tls_ca_path()));
  if (!resolved.tls_cert_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadFileToString(resolved.tls_cert_path()));
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_private_key, ReadFileToString(resolved.tls_key_path()));
  }
  return grpc::SslCredentials(options);
}

}  // namespace fedsched
