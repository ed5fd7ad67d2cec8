// A gRPC server interceptor that counts every RPC by method and status code and the bytes of the
// messages each method receives and sends, into ServerMetrics (docs/guides/OPERATIONS.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/ops/server_metrics.h"

namespace fedsched::ops {

// Interceptor factories for grpc::ServerBuilder::experimental().SetInterceptorCreators.
// `metrics` must outlive the server. `raw_request_methods` lists the full names
// ("/fedsched.v1.Coordinator/DownloadModel") of the methods whose requests arrive as raw
// grpc::ByteBuffers (generated WithRawMethod / WithRawCallbackMethod): their received bytes are
// the buffers' lengths, the same figure as a typed request's ByteSizeLong. A raw method missing
// from the list is undefined behaviour (its ByteBuffer would be read as a message).
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeRpcMetricsInterceptors(ServerMetrics* metrics, std::vector<std::string> raw_request_methods);

// Exports the RPC series of every method of the gRPC service named `service_full_name`
// ("fedsched.v1.Coordinator", from the generated descriptor pool) at 0
// (ServerMetrics::DeclareRpcMethod), so that dashboards see them before the first call.
// Errors: NOT_FOUND when no generated service has that name.
[[nodiscard]] absl::Status DeclareServiceMethods(ServerMetrics& metrics,
                                                 const std::string& service_full_name);

}  // namespace fedsched::ops
