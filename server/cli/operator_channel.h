// The connection of the operator tools (fedsched-status, fedsched-ctl) to a server: address,
// TLS files and the operator token, from the flags both tools share (--server, --token_file,
// --ca, --cert, --key; defined in operator_channel.cc).
#ifndef FEDSCHED_SERVER_CLI_OPERATOR_CHANNEL_H_
#define FEDSCHED_SERVER_CLI_OPERATOR_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace fedsched::cli {

// Where and how an operator tool connects.
struct OperatorConnection {
  // host:port. Default: the flag --server (127.0.0.1:50051).
  std::string server;
  // File holding the server's operator token; empty = send none (a server under mutual TLS may
  // accept an operator certificate instead).
  std::string token_file;
  // TLS: the server's CA certificate (empty = plaintext), and for mutual TLS the client's
  // certificate and key (PEM files).
  std::string ca;
  std::string cert;
  std::string key;
};

// The connection the flags --server, --token_file, --ca, --cert and --key ask for.
OperatorConnection OperatorConnectionFromFlags();

// An open channel and the token to present on each call.
struct OperatorChannel {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;  // "" when none

  // Adds the token (metadata fedsched-operator-token) and, when `deadline` is finite, a deadline
  // `deadline` from now to `context`.
  void Prepare(grpc::ClientContext* context, absl::Duration deadline) const;
};

// The largest response the operator tools accept, bytes: 64 MiB (a server's max_message_bytes
// bounds what it sends; its default is 16 MiB).
inline constexpr int kOperatorMaxReceiveBytes = 64 << 20;

// Reads the token file (trailing whitespace dropped) and the TLS files, and opens a channel
// (connecting lazily) that accepts responses up to kOperatorMaxReceiveBytes. Errors: NOT_FOUND for
// an unreadable --token_file; those of MakeChannelCredentials (common/transport.h) for the TLS
// files.
[[nodiscard]] absl::StatusOr<OperatorChannel> OpenOperatorChannel(
    const OperatorConnection& connection);

}  // namespace fedsched::cli

#endif  // FEDSCHED_SERVER_CLI_OPERATOR_CHANNEL_H_
