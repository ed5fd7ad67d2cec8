// Prometheus metrics of a running fedsched-server (docs/guides/OPERATIONS.md lists every name).
//
// ServerMetrics owns a prometheus-cpp registry and, when given an address, the HTTP exposer that
// serves it at /metrics. The server feeds it from the coordinator's callbacks (rounds committed
// and failed, tasks failed), from a periodic status snapshot (clients online and registered) and
// from a gRPC interceptor (RPCs by method and status code, bytes in and out; rpc_metrics.h).
// Every method is thread-safe and cheap (atomic adds; a label lookup under a small lock).
// Metrics of a round, a task or an update carry a `job` label when the caller names the job
// (docs/guides/JOBS.md: the server names every job, its config's own too); without one (""), they
// are exported without it, as a server of one run did.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "proto/fedsched/v1/records.pb.h"

namespace prometheus {
class Exposer;
}

namespace fedsched::ops {

class ServerMetrics {
 public:
  // A registry without an HTTP endpoint (tests; or metrics collected but not served).
  ServerMetrics();
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Threads serving /metrics at once, and how long one waits for a connection's request (ms)
  // before closing it: idle or half-open connections hold a thread for at most that long.
  static constexpr int kServingThreads = 8;
  static constexpr int kRequestTimeoutMs = 3000;

  // Serves the registry at http://`listen_address`/metrics (e.g. "127.0.0.1:9464"; port 0 picks
  // a free one, see port()) on kServingThreads threads, each request read within
  // kRequestTimeoutMs. Errors: UNAVAILABLE when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ServerMetrics>> Serve(
      const std::string& listen_address);
  // The bound HTTP port, or 0 without an endpoint.
  int port() const;

  // The cause labels of fedsched_task_failures_total (CauseLabel's values).
  static constexpr const char* kTaskFailureCauses[] = {"reported", "refused",  "missed_heartbeats",
                                                       "stale",    "deadline", "other"};

  // Exports `job`'s round series and its fedsched_task_failures_total{cause} of every cause at
  // 0 before its first round or failure ("" = the unlabelled ones), so that dashboards and
  // alerts see them on a healthy server.
  void DeclareJob(const std::string& job);
  // A committed round (or FedBuff version) of `job`: counts it, observes its duration (seconds
  // from start_unix_ms to end_unix_ms), participants, stragglers, examples, and sets the gauges
  // for the last round (test accuracy when evaluated, predictor MAPE).
  void OnRoundCommitted(const v1::RoundRecord& record, const std::string& job = "");
  // A round attempt of `job` that failed (it is re-planned).
  void OnRoundFailed(const std::string& job = "");
  // A task of `job` that failed; `reason` is reduced to a small cause label (CauseLabel).
  void OnTaskFailed(const std::string& reason, const std::string& job = "");
  // An upload for `job` refused, `reason` one of round::RejectReasonName's labels: counted at
  // once in fedsched_updates_rejected_total{reason}, whether or not its round commits.
  void OnUpdateRejected(const std::string& reason, const std::string& job = "");
  // Exports fedsched_updates_rejected_total{reason} of `job` at 0 before the first refusal, so
  // that dashboards and alerts see every reason from the start.
  void DeclareRejectReason(const std::string& reason, const std::string& job = "");
  // Jobs sharing a fleet (docs/guides/JOBS.md "Scheduling devices across jobs"), from the fleet
  // ledger's snapshot: how long `job`'s current demand has waited unmet and its longest wait,
  // seconds (gauges), and its starvations so far (waits past the starvation bound; a counter
  // raised to `starved` when it grew).
  void SetJobWait(const std::string& job, double waiting_s, double max_wait_s, int64_t starved);
  // Current client counts (from the coordinator's status snapshot).
  void SetClients(int64_t registered, int64_t online);
  // One finished RPC: `method` as gRPC names it ("/fedsched.v1.Coordinator/PollTask"), its
  // status code (grpc::StatusCode as an int).
  void OnRpcFinished(const std::string& method, int code);
  // Counters of payload bytes received from / sent to clients for `method` (protobuf-encoded
  // message sizes), owned by the registry; stable for the metrics' lifetime.
  prometheus::Counter* BytesIn(const std::string& method);
  prometheus::Counter* BytesOut(const std::string& method);

  // Exports fedsched_rpcs_total{method, code="0"} and `method`'s byte counters (a fedsched
  // method's, as the interceptor counts them) at 0 before its first call; `method` as gRPC
  // names it.
  void DeclareRpcMethod(const std::string& method);

  // The registry's current text exposition (what /metrics serves), for tests and debugging.
  std::string TextExposition() const;

  // Maps a task-failure reason to a cause label: "reported" (the client said it failed),
  // "refused" (its update was refused), "missed_heartbeats", "stale" (FedBuff: beyond
  // max_staleness), "deadline" or "other".
  static std::string CauseLabel(const std::string& reason);

 private:
  // The series of one job's rounds ("" = without a job label).
  struct RoundSeries {
    prometheus::Counter* committed;
    prometheus::Counter* failed;
    prometheus::Counter* participants;
    prometheus::Counter* stragglers;
    prometheus::Counter* examples;
    prometheus::Counter* uplink_bytes;
    prometheus::Counter* downlink_bytes;
    prometheus::Histogram* seconds;
    prometheus::Gauge* last_round;
    prometheus::Gauge* last_participants;
    prometheus::Gauge* last_accuracy;
    prometheus::Gauge* predictor_mape;
  };
  // `job`'s round series, made on first use.
  RoundSeries& SeriesOf(const std::string& job) ABSL_LOCKS_EXCLUDED(mu_);
  // `labels` plus {job} when `job` is not empty.
  static std::map<std::string, std::string> WithJob(std::map<std::string, std::string> labels,
                                                    const std::string& job);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* rounds_committed_;
  prometheus::Family<prometheus::Counter>* rounds_failed_;
  prometheus::Family<prometheus::Counter>* participants_total_;
  prometheus::Family<prometheus::Counter>* stragglers_total_;
  prometheus::Family<prometheus::Counter>* examples_total_;
  prometheus::Family<prometheus::Counter>* uplink_bytes_;
  prometheus::Family<prometheus::Counter>* downlink_bytes_;
  prometheus::Family<prometheus::Histogram>* round_seconds_;
  prometheus::Family<prometheus::Gauge>* last_round_;
  prometheus::Family<prometheus::Gauge>* last_participants_;
  prometheus::Family<prometheus::Gauge>* last_accuracy_;
  prometheus::Family<prometheus::Gauge>* predictor_mape_;
  prometheus::Gauge* clients_registered_;
  prometheus::Gauge* clients_online_;
  prometheus::Family<prometheus::Counter>* task_failures_;
  prometheus::Family<prometheus::Counter>* updates_rejected_;
  prometheus::Family<prometheus::Counter>* rpcs_;
  prometheus::Family<prometheus::Counter>* bytes_in_;
  prometheus::Family<prometheus::Counter>* bytes_out_;
  prometheus::Family<prometheus::Gauge>* job_waiting_;
  prometheus::Family<prometheus::Gauge>* job_max_wait_;
  prometheus::Family<prometheus::Counter>* job_starved_;
  // SetJobWait's last starvation count per job (the counter only grows).
  absl::flat_hash_map<std::string, int64_t> starved_seen_ ABSL_GUARDED_BY(mu_);
  // Label lookups are cached: prometheus-cpp's Family::Add hashes the label set under its lock.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, prometheus::Counter*> by_label_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<RoundSeries>> by_job_ ABSL_GUARDED_BY(mu_);
  prometheus::Counter* Cached(prometheus::Family<prometheus::Counter>* family,
                              const std::string& key,
                              const std::map<std::string, std::string>& labels);
};

}  // namespace fedsched::ops
