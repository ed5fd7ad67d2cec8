#include "server/ops/rpc_metrics.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace fedsched::ops {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One per RPC: the method's byte counters are looked up once, at creation.
class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(ServerMetrics* metrics, std::string method, bool protobuf_requests)
      : metrics_(metrics), method_(std::move(method)) {
    // Only fedsched's own services are counted in bytes. A received message is read as a
    // protobuf message where the method's requests are typed; raw methods (e.g. UploadUpdate)
    // hand the interceptor the grpc::ByteBuffer itself, whose length is the same figure.
    if (method_.rfind("/fedsched.", 0) == 0) {
      bytes_out_ = metrics->BytesOut(method_);
      bytes_in_ = metrics->BytesIn(method_);
      raw_requests_ = !protobuf_requests;
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // Sizes are of the encoded message, what crosses the wire before gRPC's 5-byte frame
    // header. A sent message is taken in serialised form, which is valid for typed and raw
    // methods alike (gRPC serialises it once either way).
    if (bytes_out_ != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage(); buffer != nullptr) {
        bytes_out_->Increment(static_cast<double>(buffer->Length()));
      }
    }
    if (bytes_in_ != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage(); m != nullptr) {
        bytes_in_->Increment(static_cast<double>(
            raw_requests_ ? static_cast<const grpc::ByteBuffer*>(m)->Length()
                          : static_cast<const google::protobuf::MessageLite*>(m)->ByteSizeLong()));
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->OnRpcFinished(method_, static_cast<int>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  ServerMetrics* metrics_;
  std::string method_;
  prometheus::Counter* bytes_in_ = nullptr;
  prometheus::Counter* bytes_out_ = nullptr;
  bool raw_requests_ = false;
};

class RpcMetricsFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RpcMetricsFactory(ServerMetrics* metrics, std::vector<std::string> raw_request_methods)
      : metrics_(metrics), raw_(std::move(raw_request_methods)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string method = info->method() != nullptr ? info->method() : "unknown";
    const bool typed = std::find(raw_.begin(), raw_.end(), method) == raw_.end();
    return new RpcMetricsInterceptor(metrics_, method, typed);
  }

 private:
  ServerMetrics* metrics_;
  std::vector<std::string> raw_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MakeRpcMetricsInterceptors(ServerMetrics* metrics, std::vector<std::string> raw_request_methods) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<RpcMetricsFactory>(metrics, std::move(raw_request_methods)));
  return out;
}

absl::Status DeclareServiceMethods(ServerMetrics& metrics, const std::string& service_full_name) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_full_name);
  if (service == nullptr) {
    return absl::NotFoundError(absl::StrCat("no gRPC service named ", service_full_name));
  }
  for (int i = 0; i < service->method_count(); ++i) {
    metrics.DeclareRpcMethod(
        absl::StrCat("/", service->full_name(), "/", service->method(i)->name()));
  }
  return absl::OkStatus();
}

}  // namespace fedsched::ops
