// Operations endpoints: Prometheus metrics (values and the HTTP endpoint), the RPC interceptor,
// and the grpc.health.v1 status through start-up and drain (server/ops, docs/guides/OPERATIONS.md).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fedsched/v1/coordinator.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/ops/health.h"
#include "server/ops/rpc_metrics.h"
#include "server/ops/server_metrics.h"

namespace fedsched::ops {
namespace {

using grpc::health::v1::HealthCheckResponse;

// A TCP connection to 127.0.0.1:port, or -1. Reads on it give up after `timeout_s` seconds.
int Connect(int port, int timeout_s = 60) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// GET http://127.0.0.1:port/path with a plain socket (HTTP/1.0, read until close, or until no
// byte came for `timeout_s` seconds).
std::string HttpGet(int port, const std::string& path, int timeout_s = 60) {
  const int fd = Connect(port, timeout_s);
  if (fd < 0) return "";
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ::send(fd, request.data(), request.size(), 0);
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
  ::close(fd);
  return response;
}

v1::RoundRecord Record(int64_t round, int participants, double accuracy) {
  v1::RoundRecord r;
  r.set_round(round);
  r.set_updates_accepted(participants);
  r.set_updates_rejected(1);
  r.set_total_examples(1000);
  r.set_start_unix_ms(1'000'000);
  r.set_end_unix_ms(1'000'750);
  r.add_stragglers("c-1");
  r.set_test_accuracy(accuracy);
  r.set_test_loss(0.5);
  r.set_predictor_mape(0.25);
  r.set_uplink_bytes(300 * round);
  r.set_downlink_bytes(4000);
  return r;
}

TEST(ServerMetricsTest, RoundsTasksAndClientsAppearInTheExposition) {
  ServerMetrics metrics;
  metrics.OnRoundCommitted(Record(1, 3, 0.7));
  metrics.OnRoundCommitted(Record(2, 4, 0.8));
  metrics.OnRoundFailed();
  metrics.OnTaskFailed("missed heartbeats");
  metrics.OnTaskFailed("client reported: out of memory");
  metrics.OnTaskFailed("client reported: out of memory");
  metrics.SetClients(20, 17);
  metrics.OnUpdateRejected("norm_median");
  metrics.OnUpdateRejected("norm_median");
  metrics.OnUpdateRejected("late");
  const std::string text = metrics.TextExposition();
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_committed_total 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_failed_total 1"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_participants_total 7"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_stragglers_total 2"));
  // Bytes on the devices' links (docs/guides/COMPRESSION.md "Metrics").
  EXPECT_TRUE(absl::StrContains(text, "fedsched_uplink_bytes_total 900"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_downlink_bytes_total 8000"));
  // Refusals are counted as they happen, by reason (not from the records).
  EXPECT_TRUE(absl::StrContains(text, "fedsched_updates_rejected_total{reason=\"norm_median\"} 2"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_updates_rejected_total{reason=\"late\"} 1"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_committed_round 2"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_test_accuracy 0.8"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_round_duration_seconds_count 2"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_round_duration_seconds_bucket{le=\"1\"} 2"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_task_failures_total{cause=\"reported\"} 2"));
  EXPECT_TRUE(
      absl::StrContains(text, "fedsched_task_failures_total{cause=\"missed_heartbeats\"} 1"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_clients_registered 20"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_clients_online 17"));
}

// Jobs (docs/guides/JOBS.md): round, task and update series of each named job carry its `job`
// label, apart from each other and from the unlabelled series of a server of one run.
TEST(ServerMetricsTest, EachJobHasItsOwnLabelledSeries) {
  ServerMetrics metrics;
  metrics.DeclareJob("idle");
  metrics.OnRoundCommitted(Record(1, 3, 0.7), "main");
  metrics.OnRoundCommitted(Record(2, 4, 0.8), "main");
  metrics.OnRoundCommitted(Record(1, 2, 0.4), "mlp");
  metrics.OnRoundFailed("mlp");
  metrics.OnTaskFailed("missed heartbeats", "mlp");
  metrics.DeclareRejectReason("late", "main");
  metrics.OnUpdateRejected("norm_median", "mlp");
  const std::string text = metrics.TextExposition();
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_committed_total{job=\"main\"} 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_committed_total{job=\"mlp\"} 1"));
  EXPECT_FALSE(absl::StrContains(text, "fedsched_rounds_committed_total 0"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_failed_total{job=\"mlp\"} 1"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_rounds_committed_total{job=\"idle\"} 0"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_participants_total{job=\"main\"} 7"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_committed_round{job=\"main\"} 2"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_test_accuracy{job=\"mlp\"} 0.4"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_round_duration_seconds_count{job=\"mlp\"} 1"));
  EXPECT_TRUE(absl::StrContains(
      text, "fedsched_task_failures_total{cause=\"missed_heartbeats\",job=\"mlp\"} 1"));
  EXPECT_TRUE(
      absl::StrContains(text, "fedsched_updates_rejected_total{job=\"main\",reason=\"late\"} 0"));
  EXPECT_TRUE(absl::StrContains(
      text, "fedsched_updates_rejected_total{job=\"mlp\",reason=\"norm_median\"} 1"));
}

// Jobs sharing a fleet: each job's wait gauges follow the ledger's figures; its starvation
// counter only grows, to the ledger's count.
TEST(ServerMetricsTest, JobWaitsAndStarvations) {
  ServerMetrics metrics;
  metrics.SetJobWait("a", 12.5, 40, 1);
  metrics.SetJobWait("b", 0, 3, 0);
  metrics.SetJobWait("a", 0, 40, 3);
  metrics.SetJobWait("a", 2, 40, 2);  // never lowers the counter
  const std::string text = metrics.TextExposition();
  EXPECT_TRUE(absl::StrContains(text, "fedsched_job_waiting_seconds{job=\"a\"} 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "fedsched_job_max_wait_seconds{job=\"a\"} 40"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_job_starvations_total{job=\"a\"} 3"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_job_starvations_total{job=\"b\"} 0"));
  EXPECT_TRUE(absl::StrContains(text, "fedsched_job_max_wait_seconds{job=\"b\"} 3"));
}

// A healthy server's dashboard panels have data: every task-failure cause of a declared job and
// every RPC method of a declared service is exported at 0 before its first event, and the
// first event counts in that same series.
TEST(ServerMetricsTest, DeclaredSeriesAreExportedAtZero) {
  ServerMetrics metrics;
  metrics.DeclareJob("");
  metrics.DeclareJob("mlp");
  // The generated descriptors of coordinator.proto are in the pool once its code is linked.
  ASSERT_NE(v1::GetStatusRequest::descriptor(), nullptr);
  ASSERT_TRUE(DeclareServiceMethods(metrics, "fedsched.v1.Coordinator").ok());
  EXPECT_EQ(DeclareServiceMethods(metrics, "fedsched.v1.NoSuchService").code(),
            absl::StatusCode::kNotFound);
  std::string text = metrics.TextExposition();
  for (const char* cause : ServerMetrics::kTaskFailureCauses) {
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("fedsched_task_failures_total{cause=\"", cause, "\"} 0")))
        << cause << "\n"
        << text;
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("fedsched_task_failures_total{cause=\"", cause, "\",job=\"mlp\"} 0")));
  }
  const std::string poll = "/fedsched.v1.Coordinator/PollTask";
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("fedsched_rpcs_total{code=\"0\",method=\"", poll, "\"} 0")));
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("fedsched_received_bytes_total{method=\"", poll, "\"} 0")));
  EXPECT_TRUE(
      absl::StrContains(text, absl::StrCat("fedsched_sent_bytes_total{method=\"", poll, "\"} 0")));
  metrics.OnTaskFailed("missed heartbeats");
  metrics.OnRpcFinished(poll, 0);
  text = metrics.TextExposition();
  EXPECT_TRUE(
      absl::StrContains(text, "fedsched_task_failures_total{cause=\"missed_heartbeats\"} 1"));
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("fedsched_rpcs_total{code=\"0\",method=\"", poll, "\"} 1")));
}

TEST(ServerMetricsTest, CauseLabelsFollowTheEngineReasons) {
  EXPECT_EQ(ServerMetrics::CauseLabel("missed heartbeats"), "missed_heartbeats");
  EXPECT_EQ(ServerMetrics::CauseLabel("client reported: deadline passed"), "reported");
  EXPECT_EQ(ServerMetrics::CauseLabel("more than max_staleness = 4 versions behind"), "stale");
  EXPECT_EQ(ServerMetrics::CauseLabel("something new"), "other");
  // Every label CauseLabel gives is one DeclareJob exports at 0.
  for (const char* reason : {"client reported: x", "update refused (norm_bound): x",
                             "missed heartbeats", "max_staleness", "deadline passed", "new"}) {
    const std::string label = ServerMetrics::CauseLabel(reason);
    EXPECT_NE(std::find(std::begin(ServerMetrics::kTaskFailureCauses),
                        std::end(ServerMetrics::kTaskFailureCauses), label),
              std::end(ServerMetrics::kTaskFailureCauses))
        << label;
  }
}

TEST(ServerMetricsTest, ServesTheRegistryOverHttp) {
  absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics = ServerMetrics::Serve("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_GT((*metrics)->port(), 0);
  (*metrics)->OnRoundCommitted(Record(5, 2, 0.6));
  const std::string body = HttpGet((*metrics)->port(), "/metrics");
  EXPECT_TRUE(absl::StrContains(body, "200 OK")) << body;
  EXPECT_TRUE(absl::StrContains(body, "fedsched_committed_round 5")) << body;
}

// Idle connections (connected, nothing sent) and half-open requests (a request line, never its
// end) once held every CivetWeb thread for 30 s, so each scrape timed out. The scrape must be
// answered while more of them than the old 2 threads stay open; 20 s is below that old hold.
TEST(ServerMetricsTest, ScrapesAnswerWhileIdleAndHalfOpenConnectionsStayOpen) {
  absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics = ServerMetrics::Serve("127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->OnRoundCommitted(Record(7, 2, 0.6));
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    const int fd = Connect((*metrics)->port());
    ASSERT_GE(fd, 0);
    if (i % 2 == 1) {
      const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      ASSERT_EQ(::send(fd, partial.data(), partial.size(), 0),
                static_cast<ssize_t>(partial.size()));
    }
    idle.push_back(fd);
  }
  const std::string body = HttpGet((*metrics)->port(), "/metrics", /*timeout_s=*/20);
  EXPECT_TRUE(absl::StrContains(body, "fedsched_committed_round 7")) << "scrape: '" << body << "'";
  for (int fd : idle) ::close(fd);
}

TEST(ServerMetricsTest, ABusyAddressIsAnErrorNotACrash) {
  absl::StatusOr<std::unique_ptr<ServerMetrics>> first = ServerMetrics::Serve("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  const std::string busy = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<ServerMetrics>> second = ServerMetrics::Serve(busy);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

HealthCheckResponse::ServingStatus Check(int port, grpc::StatusCode* code = nullptr) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest request;
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (code != nullptr) *code = status.error_code();
  return status.ok() ? response.status() : HealthCheckResponse::UNKNOWN;
}

TEST(HealthEndpointTest, NotServingUntilToldThenFollowedByAttachedServers) {
  absl::StatusOr<std::unique_ptr<HealthEndpoint>> health = HealthEndpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(Check((*health)->port()), HealthCheckResponse::NOT_SERVING);

  // A second server (the coordination port in fedsched-server), built after the endpoint, with
  // the RPC-metrics interceptor.
  ServerMetrics metrics;
  int main_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &main_port);
  builder.experimental().SetInterceptorCreators(MakeRpcMetricsInterceptors(&metrics, {}));
  // This stand-in has no synchronous service (the real one has the Coordinator): give it the
  // polled completion queue gRPC then requires.
  std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue(true);
  std::unique_ptr<grpc::Server> main_server = builder.BuildAndStart();
  ASSERT_NE(main_server, nullptr);
  std::thread drain([&cq] {
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) {
    }
  });
  (*health)->Attach(main_server.get());
  EXPECT_EQ(Check(main_port), HealthCheckResponse::NOT_SERVING);

  (*health)->SetServing(true);
  EXPECT_EQ(Check((*health)->port()), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(main_port), HealthCheckResponse::SERVING);
  (*health)->SetServing(false);  // draining
  EXPECT_EQ(Check(main_port), HealthCheckResponse::NOT_SERVING);
  (*health)->Detach(main_server.get());
  main_server->Shutdown();
  cq->Shutdown();
  drain.join();

  // The interceptor counted the three checks on the main port (status OK = code 0).
  EXPECT_TRUE(absl::StrContains(
      metrics.TextExposition(),
      "fedsched_rpcs_total{code=\"0\",method=\"/grpc.health.v1.Health/Check\"} 3"))
      << metrics.TextExposition();
}

TEST(HealthEndpointTest, ABusyAddressIsAnError) {
  absl::StatusOr<std::unique_ptr<HealthEndpoint>> first = HealthEndpoint::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<HealthEndpoint>> second =
      HealthEndpoint::Start("127.0.0.1:" + std::to_string((*first)->port()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fedsched::ops
