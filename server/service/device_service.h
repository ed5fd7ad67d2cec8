// What the gRPC edge (grpc_service.h, held_polls.h, the upload reactor) asks of the server's
// core, so that one coordinator (one run) and the job host (many jobs over one fleet,
// server/fleet/job_host.h) serve devices through the same service code.
#ifndef FEDSCHED_SERVER_SERVICE_DEVICE_SERVICE_H_
#define FEDSCHED_SERVER_SERVICE_DEVICE_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "fedsched/v1/coordinator.pb.h"
#include "server/round/engine.h"

namespace fedsched {

// The device-facing calls of the server. Every method is thread-safe; their contracts are
// Coordinator's (server/service/coordinator.h), which implements them for one run; JobHost
// routes each to the job it concerns (a task id names its job) and answers registration,
// heartbeats and polls for the whole fleet.
class DeviceService {
 public:
  virtual ~DeviceService() = default;
  [[nodiscard]] virtual absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Time now, const std::string& cert_fingerprint,
      const std::string& peer_address) = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request, absl::Time now) = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::PollTaskResponse> PollTask(
      const v1::PollTaskRequest& request, absl::Time now) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::shared_ptr<const round::ModelBlob>> ModelForTask(
      const std::string& client_id, const std::string& token, const std::string& task_id,
      bool whole_model, absl::Time now) = 0;
  [[nodiscard]] virtual absl::Status CheckUploadHeader(const v1::UploadHeader& header,
                                                       absl::Time now) = 0;
  [[nodiscard]] virtual absl::Status SubmitUpdate(
      const v1::UploadHeader& header, absl::Span<const std::string_view> payload_pieces,
      absl::Time now, double upload_seconds, absl::AnyInvocable<void()> payload_parsed) = 0;
  [[nodiscard]] virtual absl::Status RefuseUploadStream(absl::Status status, absl::Time now) = 0;
  [[nodiscard]] virtual absl::Status ReportFailure(const v1::ReportFailureRequest& request,
                                                   absl::Time now) = 0;
  [[nodiscard]] virtual absl::StatusOr<v1::SecAggStepResponse> SecAggStep(
      const v1::SecAggStepRequest& request, absl::Time now) = 0;
  [[nodiscard]] virtual absl::Status SubmitPartialSum(const v1::PartialSum& partial,
                                                      absl::Time now) = 0;
  // GetStatus of request.job ("" = the config's run). Errors: NOT_FOUND for an unknown job.
  [[nodiscard]] virtual absl::StatusOr<v1::GetStatusResponse> GetStatusOf(
      const v1::GetStatusRequest& request) const = 0;
  virtual void NoteActivity(const std::string& client_id, absl::Time now) = 0;
  virtual int64_t PaceIdleRetryMs(const std::string& client_id, absl::Time now,
                                  int64_t unpaced_ms) = 0;
  virtual int64_t CheckInHoldLimit() const = 0;
  virtual void SetCheckInHold(absl::Duration hold) = 0;
  virtual void SetTaskListener(std::function<void()> listener) = 0;
  // The largest accepted upload payload over all jobs, bytes.
  virtual int64_t max_update_bytes() const = 0;
  // The job an upload's task belongs to ("" when there is one run, or the task is unknown),
  // for the receive gate's share per job (JobsConfig.max_upload_share).
  virtual std::string JobOfTask(std::string_view task_id) const { return ""; }
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_DEVICE_SERVICE_H_
