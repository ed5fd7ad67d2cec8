// Test helpers for speaking gRPC to the real CoordinatorService: an in-process server on
// 127.0.0.1:<ephemeral port> over a fresh RocksDB store, and raw-stub client calls that build
// upload streams message by message (so tests can also build broken ones).
#ifndef FEDSCHED_TESTS_SERVER_SERVICE_GRPC_TEST_HARNESS_H_
#define FEDSCHED_TESTS_SERVER_SERVICE_GRPC_TEST_HARNESS_H_

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "fedsched/v1/coordinator.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_service.h"
#include "server/service/server_config.h"
#include "server/store/store.h"
#include "tests/server/service/provisioning.h"

namespace fedsched::testing {

// absl::Status from a grpc::Status (same code and message).
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// A model of named tensors whose values are multiples of 1/4 (exact in float32, so sums and means
// in tests are exact): tensor t has `sizes[t]` values, value i = ((i + 3 t) % 8) / 4 + offset.
inline v1::Model PatternModel(const std::vector<int64_t>& sizes, float offset = 0.0f) {
  v1::Model model;
  for (size_t t = 0; t < sizes.size(); ++t) {
    v1::Tensor* tensor = model.add_tensors();
    tensor->set_name(absl::StrCat("t", t));
    tensor->add_shape(sizes[t]);
    tensor->mutable_data()->Resize(static_cast<int>(sizes[t]), 0.0f);
    float* data = tensor->mutable_data()->mutable_data();
    for (int64_t i = 0; i < sizes[t]; ++i) {
      data[i] = static_cast<float>((i + 3 * static_cast<int64_t>(t)) % 8) / 4.0f + offset;
    }
  }
  return model;
}

// A model shaped like `like` with every value `value`.
inline v1::Model FilledLike(const v1::Model& like, float value) {
  v1::Model model;
  for (const v1::Tensor& t : like.tensors()) {
    v1::Tensor* out = model.add_tensors();
    out->set_name(t.name());
    *out->mutable_shape() = t.shape();
    out->mutable_data()->Resize(t.data_size(), value);
  }
  return model;
}

// An in-process coordination server: Coordinator + CoordinatorService on 127.0.0.1:0.
class TestServer {
 public:
  struct Options {
    // Raw server config; store_path and listen_address are set by the harness, the rest goes
    // through ResolveServerConfig.
    v1::ServerConfig config;
    v1::Model initial_model;
    // Drive Coordinator::Tick every 20 ms from a thread (as server/main.cc does every 50 ms);
    // false = the test calls Tick() itself.
    bool tick_thread = false;
    // Default: from config.transport (MakeServerCredentials: plaintext unless TLS is set).
    std::shared_ptr<grpc::ServerCredentials> credentials;
    // Upload budget of the service (CoordinatorServiceOptions); 0 = its default.
    int64_t max_inflight_upload_bytes = 0;
    // CoordinatorServiceOptions.max_receiving_upload_bytes (the upload receive gate); 0 = none.
    int64_t max_receiving_upload_bytes = 0;
    // Called after each committed round (with no lock held).
    std::function<void(const v1::RoundRecord&)> on_round_committed;
    // CoordinatorOptions.enrolment_key (default kTestEnrolmentKey; "" = none, e.g. for a test
    // of trust on first use or of certificates) and CoordinatorServiceOptions.operator_token.
    std::string enrolment_key = kTestEnrolmentKey;
    std::string operator_token;
    // CoordinatorServiceOptions.aggregator_token_dir (a hierarchy's root).
    std::string aggregator_token_dir;
    // CoordinatorOptions.evaluator.
    Evaluator evaluator;
    // Long polls (CoordinatorServiceOptions.held_polls).
    HeldPollsOptions held_polls;
    // CoordinatorOptions.on_task_failed (called with the coordinator's lock held).
    std::function<void(const std::string& reason)> on_task_failed;
    // Written to the store before the coordinator opens, as fedsched-enroll --revoke_identity
    // does to a stopped server's store.
    std::vector<Revocation> revocations;
    // CoordinatorOptions.on_update_rejected (called with the coordinator's lock held).
    std::function<void(const std::string& reason)> on_update_rejected;
    // The store's folder, kept when the server ends, so that a test can restart a server on
    // it (or change it as fedsched-enroll does in between); "" = a fresh temporary one, removed.
    std::string store_dir;
  };

  static absl::StatusOr<std::unique_ptr<TestServer>> Start(Options options) {
    auto server = std::unique_ptr<TestServer>(new TestServer());
    static std::atomic<int> counter{0};
    server->keep_dir_ = !options.store_dir.empty();
    if (server->keep_dir_) {
      server->dir_ = options.store_dir;
    } else {
      server->dir_ = std::filesystem::temp_directory_path() /
                     absl::StrCat("fedsched_grpc_", ::getpid(), "_", counter++);
      std::filesystem::remove_all(server->dir_);
    }
    options.config.set_store_path(server->dir_.string());
    options.config.set_listen_address("127.0.0.1:0");
    FEDSCHED_ASSIGN_OR_RETURN(server->config_, ResolveServerConfig(options.config));
    FEDSCHED_ASSIGN_OR_RETURN(server->store_, Store::Open({.path = server->dir_.string()}));
    for (const Revocation& r : options.revocations) {
      FEDSCHED_RETURN_IF_ERROR(server->store_->PutRevocation(r));
    }
    CoordinatorOptions coordinator_options;
    coordinator_options.config = server->config_;
    coordinator_options.store = server->store_.get();
    coordinator_options.initial_model = std::move(options.initial_model);
    coordinator_options.on_round_committed = std::move(options.on_round_committed);
    coordinator_options.enrolment_key = options.enrolment_key;
    coordinator_options.evaluator = std::move(options.evaluator);
    coordinator_options.on_task_failed = std::move(options.on_task_failed);
    coordinator_options.on_update_rejected = std::move(options.on_update_rejected);
    FEDSCHED_ASSIGN_OR_RETURN(server->coordinator_,
                              Coordinator::Create(std::move(coordinator_options)));
    CoordinatorServiceOptions service_options;
    service_options.transport = server->config_.transport();
    service_options.operator_token = options.operator_token;
    service_options.aggregator_token_dir = options.aggregator_token_dir;
    service_options.held_polls = options.held_polls;
    service_options.max_receiving_upload_bytes = options.max_receiving_upload_bytes;
    if (options.max_inflight_upload_bytes > 0) {
      service_options.max_inflight_upload_bytes = options.max_inflight_upload_bytes;
    }
    server->service_ =
        std::make_unique<CoordinatorService>(server->coordinator_.get(), service_options);
    std::shared_ptr<grpc::ServerCredentials> credentials = options.credentials;
    if (credentials == nullptr) {
      FEDSCHED_ASSIGN_OR_RETURN(credentials, MakeServerCredentials(server->config_.transport()));
    }
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port);
    ApplyServerTransport(server->config_.transport(), &builder);
    builder.RegisterService(server->service_.get());
    server->server_ = builder.BuildAndStart();
    if (server->server_ == nullptr || port == 0) {
      return absl::UnavailableError("cannot listen on 127.0.0.1");
    }
    server->address_ = absl::StrCat("127.0.0.1:", port);
    if (options.tick_thread) {
      server->ticker_ = std::thread([s = server.get()] {
        while (!s->stop_ticker_.load()) {
          s->coordinator_->Tick(absl::Now());
          absl::SleepFor(absl::Milliseconds(20));
        }
      });
    }
    return server;
  }

  ~TestServer() {
    Shutdown();
    coordinator_.reset();
    store_.reset();
    if (!keep_dir_) std::filesystem::remove_all(dir_);
  }

  // Stops ticking and serving (pending RPCs get 2 s, then are cancelled). Idempotent.
  void Shutdown() {
    stop_ticker_ = true;
    if (ticker_.joinable()) ticker_.join();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_.reset();
    }
  }

  const std::string& address() const { return address_; }
  const v1::ServerConfig& config() const { return config_; }
  Coordinator& coordinator() { return *coordinator_; }
  CoordinatorService& service() { return *service_; }
  Store& store() { return *store_; }
  void Tick() { coordinator_->Tick(absl::Now()); }

  // A stub on a fresh channel (own connection) with the server's transport settings.
  std::unique_ptr<v1::Coordinator::Stub> NewStub(
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr) const {
    grpc::ChannelArguments args = ClientChannelArguments(config_.transport());
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::Coordinator::NewStub(grpc::CreateCustomChannel(
        address_, credentials ? credentials : grpc::InsecureChannelCredentials(), args));
  }

  // A stub on a fresh channel without HTTP/2 BDP probing: each stream keeps gRPC's initial
  // 64 KiB flow-control window, so a download it stops reading stalls on the server instead of
  // completing into the client's buffers (with probing, the window can grow past 16 MB on a
  // fast loopback and the "staller" would have received everything).
  std::unique_ptr<v1::Coordinator::Stub> NewSlowReaderStub() const {
    grpc::ChannelArguments args = ClientChannelArguments(config_.transport());
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args));
  }

  // Waits (polling every 10 ms, up to `timeout`) until `done()`; returns its last value.
  static bool WaitFor(const std::function<bool()>& done,
                      absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time end = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > end) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

 private:
  TestServer() = default;

  std::filesystem::path dir_;
  bool keep_dir_ = false;  // Options.store_dir was given
  v1::ServerConfig config_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<bool> stop_ticker_{false};
  std::thread ticker_;
};

// A registered session as seen by a raw client.
struct Session {
  std::string client_id;
  std::string token;
};

inline void SetDeadline(grpc::ClientContext* context, absl::Duration d = absl::Seconds(30)) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
}

// The credentials servers issued to identities registered by RegisterRaw in this process, so that
// a re-registration proves its identity as a device would (docs/guides/SECURITY.md).
inline absl::flat_hash_map<std::string, std::string>& IssuedCredentials() {
  static auto* credentials = new absl::flat_hash_map<std::string, std::string>();
  return *credentials;
}
inline absl::Mutex& IssuedCredentialsMutex() {
  static auto* mu = new absl::Mutex();
  return *mu;
}

// Registers `identity` with `credential`, or (when null) with the credential a server issued
// to it earlier in this process, else its enrolment secret under kTestEnrolmentKey (a
// provisioned device); remembers a newly issued one. `signing_public_key`: the device's Ed25519
// key for signed secure-aggregation advertisements (RegisterRequest.signing_public_key).
inline absl::StatusOr<Session> RegisterRaw(v1::Coordinator::Stub& stub, const std::string& identity,
                                           int64_t num_samples = 100,
                                           const std::string* credential = nullptr,
                                           const std::string& signing_public_key = "") {
  v1::RegisterRequest request;
  request.set_identity(identity);
  request.mutable_device()->set_num_samples(num_samples);
  request.set_signing_public_key(signing_public_key);
  if (credential != nullptr) {
    request.set_credential(*credential);
  } else {
    absl::MutexLock lock(&IssuedCredentialsMutex());
    auto it = IssuedCredentials().find(identity);
    request.set_credential(it != IssuedCredentials().end() ? it->second : TestCredential(identity));
  }
  v1::RegisterResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(stub.Register(&context, request, &response)));
  if (!response.credential().empty() && credential == nullptr) {
    absl::MutexLock lock(&IssuedCredentialsMutex());
    IssuedCredentials()[identity] = response.credential();
  }
  return Session{response.client_id(), response.session_token()};
}

inline absl::StatusOr<v1::PollTaskResponse> PollRaw(v1::Coordinator::Stub& stub,
                                                    const Session& who) {
  v1::PollTaskRequest request;
  request.set_client_id(who.client_id);
  request.set_session_token(who.token);
  v1::PollTaskResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(stub.PollTask(&context, request, &response)));
  return response;
}

inline absl::Status HeartbeatRaw(v1::Coordinator::Stub& stub, const Session& who) {
  v1::HeartbeatRequest request;
  request.set_client_id(who.client_id);
  request.set_session_token(who.token);
  v1::HeartbeatResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  return FromGrpc(stub.Heartbeat(&context, request, &response));
}

// Downloads the task's model whole and checks the stream's size and SHA-256.
inline absl::StatusOr<std::string> DownloadRaw(v1::Coordinator::Stub& stub, const Session& who,
                                               const std::string& task_id) {
  v1::DownloadModelRequest request;
  request.set_client_id(who.client_id);
  request.set_session_token(who.token);
  request.set_task_id(task_id);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(120));
  auto reader = stub.DownloadModel(&context, request);
  std::string payload;
  std::string sha;
  int64_t total = -1;
  v1::ModelChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.seq() == 0) {
      sha = chunk.sha256();
      total = chunk.total_bytes();
    }
    payload.append(chunk.data());
  }
  FEDSCHED_RETURN_IF_ERROR(FromGrpc(reader->Finish()));
  if (static_cast<int64_t>(payload.size()) != total || Sha256(payload) != sha) {
    return absl::DataLossError("download fails its size or SHA-256 check");
  }
  return payload;
}

// The messages of a well-formed upload of `payload` for `task`: the header, then chunks of at
// most `chunk_bytes` with seq 0, 1, ...
inline std::vector<v1::UploadChunk> UploadMessages(const Session& who, const v1::Task& task,
                                                   const std::string& payload, int64_t num_examples,
                                                   int64_t chunk_bytes) {
  std::vector<v1::UploadChunk> messages(1);
  v1::UploadHeader* header = messages[0].mutable_header();
  header->set_client_id(who.client_id);
  header->set_session_token(who.token);
  header->set_task_id(task.task_id());
  header->set_round(task.round());
  header->set_total_bytes(static_cast<int64_t>(payload.size()));
  header->set_sha256(Sha256(payload));
  header->set_num_chunks((static_cast<int64_t>(payload.size()) + chunk_bytes - 1) / chunk_bytes);
  header->mutable_metrics()->set_num_examples(num_examples);
  header->mutable_metrics()->set_train_seconds(0.01);
  for (int64_t offset = 0, seq = 0; offset < static_cast<int64_t>(payload.size());
       offset += chunk_bytes, ++seq) {
    v1::UploadChunk chunk;
    chunk.set_seq(seq);
    chunk.set_data(payload.substr(offset, chunk_bytes));
    messages.push_back(std::move(chunk));
  }
  return messages;
}

// Sends `messages` on one UploadUpdate stream (stopping early if the server has already closed
// it), half-closes, and returns the server's status.
inline absl::Status UploadRaw(v1::Coordinator::Stub& stub,
                              const std::vector<v1::UploadChunk>& messages) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(120));
  v1::UploadUpdateResponse response;
  auto writer = stub.UploadUpdate(&context, &response);
  for (const v1::UploadChunk& m : messages) {
    if (!writer->Write(m)) break;
  }
  writer->WritesDone();
  absl::Status s = FromGrpc(writer->Finish());
  if (s.ok() && !response.accepted()) return absl::InternalError("OK status but not accepted");
  return s;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_SERVICE_GRPC_TEST_HARNESS_H_
