#include "common/transport.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/config.h"
#include "common/private_file.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr int64_t kMiB = 1 << 20;
// gRPC takes message limits and keepalive periods as C ints.
constexpr int64_t kMaxGrpcInt = std::numeric_limits<int32_t>::max();

// gRPC's experiment whose read path keeps per-connection buffers sized after the largest burst.
constexpr absl::string_view kReadChunksExperiment = "tcp_read_chunks";
// Set by BoundTcpReads: the largest TCP read buffer, bytes; 0 = gRPC's default.
std::atomic<int> g_tcp_read_chunk_bytes{0};

// INVALID_ARGUMENT naming `field` unless lo <= value <= hi. `original` is the configured value
// (before defaults), printed so that e.g. "-1" shows up as given.
absl::Status CheckRange(const char* field, int64_t value, int64_t original, int64_t lo, int64_t hi,
                        const char* unit, const char* note = "") {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("transport.", field, " must be in [", lo, ", ", hi,
                                                 "] ", unit, ", got ", original, note));
}

constexpr char kNoSentinel[] = " (0 means the default; there is no 'unlimited' sentinel)";

}  // namespace

absl::StatusOr<v1::TransportConfig> ResolveTransport(const v1::TransportConfig& config) {
  v1::TransportConfig out = config;
  if (out.max_message_bytes() == 0) out.set_max_message_bytes(16 * kMiB);
  FEDSCHED_RETURN_IF_ERROR(CheckRange("max_message_bytes", out.max_message_bytes(),
                                      config.max_message_bytes(), kMiB, kMaxGrpcInt, "bytes",
                                      kNoSentinel));
  if (out.chunk_bytes() == 0) {
    out.set_chunk_bytes(std::min<int64_t>(kMiB, out.max_message_bytes() / 2));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckRange("chunk_bytes", out.chunk_bytes(), config.chunk_bytes(), 1024,
                                      out.max_message_bytes() / 2, "bytes (max_message_bytes / 2)",
                                      kNoSentinel));
  if (out.min_ping_interval_ms() == 0) out.set_min_ping_interval_ms(20000);
  FEDSCHED_RETURN_IF_ERROR(CheckRange("min_ping_interval_ms", out.min_ping_interval_ms(),
                                      config.min_ping_interval_ms(), 1, kMaxGrpcInt, "ms",
                                      kNoSentinel));
  if (out.keepalive_time_ms() == 0) {
    out.set_keepalive_time_ms(std::max<int64_t>(30000, out.min_ping_interval_ms()));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckRange("keepalive_time_ms", out.keepalive_time_ms(),
                                      config.keepalive_time_ms(), 1, kMaxGrpcInt, "ms",
                                      kNoSentinel));
  if (out.keepalive_timeout_ms() == 0) out.set_keepalive_timeout_ms(10000);
  FEDSCHED_RETURN_IF_ERROR(CheckRange("keepalive_timeout_ms", out.keepalive_timeout_ms(),
                                      config.keepalive_timeout_ms(), 1, kMaxGrpcInt, "ms",
                                      kNoSentinel));
  if (out.keepalive_time_ms() < out.min_ping_interval_ms()) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport.keepalive_time_ms (", out.keepalive_time_ms(),
                     ") must be >= min_ping_interval_ms (", out.min_ping_interval_ms(),
                     "): the server would answer faster pings with GOAWAY too_many_pings"));
  }
  if (out.tls_cert_path().empty() != out.tls_key_path().empty()) {
    return absl::InvalidArgumentError("transport.tls_cert_path and tls_key_path go together");
  }
  if (out.require_client_cert() && (out.tls_ca_path().empty() || out.tls_cert_path().empty())) {
    return absl::InvalidArgumentError(
        "transport.require_client_cert needs tls_ca_path (to verify clients) and the server's "
        "own tls_cert_path / tls_key_path");
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
  if (const int chunk = g_tcp_read_chunk_bytes.load(); chunk > 0) {
    builder->AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, chunk);
  }
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
  if (const int chunk = g_tcp_read_chunk_bytes.load(); chunk > 0) {
    args.SetInt(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, chunk);
  }
  return args;
}

std::string ExperimentsWithBoundedReads(absl::string_view current) {
  for (absl::string_view name : absl::StrSplit(current, ',')) {
    name = absl::StripAsciiWhitespace(name);
    absl::ConsumePrefix(&name, "-");  // "-name" disables, "name" enables: both are a choice
    if (name == kReadChunksExperiment) return std::string(current);
  }
  const absl::string_view sep = absl::StripAsciiWhitespace(current).empty() ? "" : ",";
  return absl::StrCat(current, sep, "-", kReadChunksExperiment);
}

void BoundTcpReads(int chunk_bytes) {
  g_tcp_read_chunk_bytes.store(std::max(0, chunk_bytes));
  if (chunk_bytes <= 0) return;
  const char* current = getenv("GRPC_EXPERIMENTS");
  setenv("GRPC_EXPERIMENTS", ExperimentsWithBoundedReads(current == nullptr ? "" : current).c_str(),
         1);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const v1::TransportConfig& resolved) {
  if (resolved.tls_cert_path().empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      resolved.require_client_cert() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                     : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  FEDSCHED_ASSIGN_OR_RETURN(std::string cert, ReadFileToString(resolved.tls_cert_path()));
  // The server's private key: this uid's, mode 0600, never through a link (private_file.h).
  FEDSCHED_ASSIGN_OR_RETURN(std::string key, ReadPrivateFile(resolved.tls_key_path()));
  options.pem_key_cert_pairs.push_back({key, cert});
  if (!resolved.tls_ca_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFileToString(resolved.tls_ca_path()));
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const v1::TransportConfig& resolved) {
  if (resolved.tls_ca_path().empty()) {
    if (!resolved.tls_cert_path().empty()) {
      // A client certificate without a CA would silently fall back to plaintext.
      return absl::InvalidArgumentError(
          "transport.tls_cert_path is set but tls_ca_path is empty: a TLS client needs the CA "
          "that signed the server's certificate");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  FEDSCHED_ASSIGN_OR_RETURN(options.pem_root_certs, ReadFileToString(resolved.tls_ca_path()));
  if (!resolved.tls_cert_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadFileToString(resolved.tls_cert_path()));
    // The device's or relay's private key, held to the same rules as the server's.
    FEDSCHED_ASSIGN_OR_RETURN(options.pem_private_key, ReadPrivateFile(resolved.tls_key_path()));
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::string> CertificateFingerprint(absl::string_view pem) {
  constexpr absl::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  constexpr absl::string_view kEnd = "-----END CERTIFICATE-----";
  const size_t begin = pem.find(kBegin);
  const size_t end = begin == absl::string_view::npos ? begin : pem.find(kEnd, begin);
  if (begin == absl::string_view::npos || end == absl::string_view::npos) {
    return absl::InvalidArgumentError("not a PEM certificate (no BEGIN/END CERTIFICATE lines)");
  }
  std::string base64;
  for (char c : pem.substr(begin + kBegin.size(), end - begin - kBegin.size())) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) base64.push_back(c);
  }
  std::string der;
  if (base64.empty() || !absl::Base64Unescape(base64, &der) || der.empty()) {
    return absl::InvalidArgumentError("PEM certificate body is not valid base64");
  }
  return Sha256(der);
}

}  // namespace fedsched
