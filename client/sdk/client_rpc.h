// The SDK's gRPC side, shared by client.cc (the protocol loop) and client_transfer.cc (model
// download and update upload). Internal: not installed, not part of the SDK's public API.
#ifndef FEDSCHED_CLIENT_SDK_CLIENT_RPC_H_
#define FEDSCHED_CLIENT_SDK_CLIENT_RPC_H_

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fedsched {

// Declared in client.h. `stub` serves everything but heartbeats; `heartbeat_stub` has a channel
// (and HTTP/2 connection) of its own so heartbeats never wait behind a transfer.
struct ClientRpc {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::unique_ptr<v1::Coordinator::Stub> heartbeat_stub;
};

// A gRPC status as absl::Status, its message prefixed with the RPC's name `what`.
[[nodiscard]] inline absl::Status FromGrpc(const grpc::Status& status, const char* what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// A task given up at `stage` because the device stopped being eligible (ClientOptions::
// eligible): ABORTED, its message kIneligibleReasonPrefix + " (stage)", which is also the failure
// report's reason (the server recognises the prefix, common/transport.h).
[[nodiscard]] inline absl::Status InterruptedStatus(absl::string_view stage) {
  return absl::AbortedError(absl::StrCat(kIneligibleReasonPrefix, " (", stage, ")"));
}

inline bool IsInterruption(const absl::Status& s) {
  return absl::IsAborted(s) && absl::StartsWith(s.message(), kIneligibleReasonPrefix);
}

// The failure of a task of job `job` that no trainer of the app runs (ClientOptions::trainers):
// FAILED_PRECONDITION "no trainer for job <job> (model architecture <arch>)", also the failure
// report's reason; a final verdict (running the task again cannot change it).
[[nodiscard]] inline absl::Status NoTrainerStatus(absl::string_view job,
                                                  absl::string_view architecture) {
  return absl::FailedPreconditionError(absl::StrCat(
      "no trainer for job ", job.empty() ? "(none named)" : job, " (model architecture ",
      architecture.empty() ? "(none)" : architecture, "); this device never trains it"));
}

inline bool IsNoTrainer(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) && absl::StartsWith(s.message(), "no trainer for job ");
}

// A verdict on the task itself, from the server or from a deterministic local step, that running
// the task again cannot change: the server refused the update (INVALID_ARGUMENT,
// FAILED_PRECONDITION: its round closed or the task failed, PERMISSION_DENIED, NOT_FOUND,
// OUT_OF_RANGE) or already holds it (ALREADY_EXISTS). Transport errors, an overloaded server
// (RESOURCE_EXHAUSTED), a lost session (UNAUTHENTICATED: the task resumes after registering
// again), interruptions and local failures (INTERNAL, out of memory) are not.
inline bool IsFinalTaskVerdict(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return true;
    default:
      return false;
  }
}

// Unary calls get a short deadline so a dead server is noticed quickly.
inline void SetUnaryDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_CLIENT_RPC_H_
