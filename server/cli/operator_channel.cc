#include "server/cli/operator_channel.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "common/transport.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the server's operator token (default: the server writes it to "
          "<store_path>/operator_token).");
ABSL_FLAG(std::string, ca, "", "CA certificate (PEM) of a TLS server; empty = plaintext.");
ABSL_FLAG(std::string, cert, "", "Client certificate (PEM) for a mutual-TLS server.");
ABSL_FLAG(std::string, key, "", "Private key (PEM) of --cert.");

namespace fedsched::cli {
namespace {

// The operator token in `path` ("" when `path` is empty).
absl::StatusOr<std::string> ReadToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read --token_file " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(buffer.str()));
}

}  // namespace

OperatorConnection OperatorConnectionFromFlags() {
  return {.server = absl::GetFlag(FLAGS_server),
          .token_file = absl::GetFlag(FLAGS_token_file),
          .ca = absl::GetFlag(FLAGS_ca),
          .cert = absl::GetFlag(FLAGS_cert),
          .key = absl::GetFlag(FLAGS_key)};
}

void OperatorChannel::Prepare(grpc::ClientContext* context, absl::Duration deadline) const {
  if (!token.empty()) context->AddMetadata("fedsched-operator-token", token);
  if (deadline != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
}

absl::StatusOr<OperatorChannel> OpenOperatorChannel(const OperatorConnection& connection) {
  v1::TransportConfig transport;
  transport.set_tls_ca_path(connection.ca);
  transport.set_tls_cert_path(connection.cert);
  transport.set_tls_key_path(connection.key);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(transport);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<std::string> token = ReadToken(connection.token_file);
  if (!token.ok()) return token.status();
  // A status with its client list is as large as the server sends (its max_message_bytes; the
  // list is cut to fit, GetStatus): the operator tools accept up to kOperatorMaxReceiveBytes
  // rather than gRPC's 4 MiB default, which about 25,000 clients already exceed.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kOperatorMaxReceiveBytes);
  return OperatorChannel{
      .channel = grpc::CreateCustomChannel(connection.server, *credentials, args),
      .token = *std::move(token)};
}

}  // namespace fedsched::cli
