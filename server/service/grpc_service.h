// The gRPC Coordinator service: the one place where absl::Status becomes grpc::Status.
#ifndef FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_
#define FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service/coordinator.h"

namespace fedsched {

// Converts an absl::Status to a grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Implements service Coordinator with gRPC's callback API (reactors for the streams), so a stalled
// download or upload holds no thread. Model downloads stream the serialized global model in
// chunks of transport.chunk_bytes; uploads must send the header first, then data chunks with
// seq 0, 1, ... in order, exactly header.num_chunks of them, totalling header.total_bytes.
// Thread-safe; owns nothing but a pointer to the coordinator, which must outlive it.
class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  CoordinatorService(Coordinator* coordinator, const v1::TransportConfig& transport);

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* PollTask(grpc::CallbackServerContext* context,
                                     const v1::PollTaskRequest* request,
                                     v1::PollTaskResponse* response) override;
  grpc::ServerWriteReactor<v1::ModelChunk>* DownloadModel(
      grpc::CallbackServerContext* context, const v1::DownloadModelRequest* request) override;
  grpc::ServerReadReactor<v1::UploadChunk>* UploadUpdate(
      grpc::CallbackServerContext* context, v1::UploadUpdateResponse* response) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ReportFailureRequest* request,
                                          v1::ReportFailureResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;

 private:
  Coordinator* const coordinator_;
  const int64_t chunk_bytes_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_GRPC_SERVICE_H_
