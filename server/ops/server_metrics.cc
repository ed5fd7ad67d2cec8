#include "server/ops/server_metrics.h"

#include <exception>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"

namespace fedsched::ops {
namespace {

// Round durations from tens of milliseconds (small models on loopback) to the default 120 s
// deadline and beyond.
const prometheus::Histogram::BucketBoundaries& RoundBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return *kBuckets;
}

prometheus::Family<prometheus::Counter>* CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>* GaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Gauge* NewGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return &GaugeFamily(registry, name, help)->Add({});
}

}  // namespace

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  rounds_committed_ = CounterFamily(r, "fedsched_rounds_committed_total",
                                    "Rounds (FedBuff: model versions) committed durably.");
  rounds_failed_ = CounterFamily(r, "fedsched_rounds_failed_total",
                                 "Round attempts that failed and were re-planned.");
  participants_total_ =
      CounterFamily(r, "fedsched_participants_total", "Updates accepted into committed rounds.");
  stragglers_total_ = CounterFamily(r, "fedsched_stragglers_total",
                                    "Participants that missed their round's closing.");
  updates_rejected_ = &prometheus::BuildCounter()
                           .Name("fedsched_updates_rejected_total")
                           .Help(
                               "Uploads refused, by reason (docs/guides/SECURITY.md \"Screens that "
                               "cannot be starved\"): session, task, late, examples, metrics, "
                               "payload, validation, norm_bound, norm_median.")
                           .Register(r);
  examples_total_ = CounterFamily(r, "fedsched_examples_total",
                                  "Training examples behind the committed updates.");
  uplink_bytes_ = CounterFamily(r, "fedsched_uplink_bytes_total",
                                "Bytes the committed rounds' accepted updates uploaded, as sent "
                                "(compressed or not; docs/guides/COMPRESSION.md).");
  downlink_bytes_ = CounterFamily(r, "fedsched_downlink_bytes_total",
                                  "Bytes the committed rounds' participants downloaded for their "
                                  "tasks (the model or model delta as sent).");
  round_seconds_ = &prometheus::BuildHistogram()
                        .Name("fedsched_round_duration_seconds")
                        .Help("Wall time from a round's planning to its commit.")
                        .Register(r);
  last_round_ = GaugeFamily(r, "fedsched_committed_round", "Last committed round.");
  last_participants_ = GaugeFamily(r, "fedsched_round_participants",
                                   "Updates accepted in the last committed round.");
  last_accuracy_ = GaugeFamily(r, "fedsched_test_accuracy",
                               "Test accuracy of the last evaluated committed model, [0, 1].");
  predictor_mape_ = GaugeFamily(r, "fedsched_predictor_mape",
                                "Mean absolute percentage error of the planner's completion-time "
                                "prediction in the last committed round (0.2 = 20 %).");
  clients_registered_ = NewGauge(r, "fedsched_clients_registered", "Registered clients.");
  clients_online_ =
      NewGauge(r, "fedsched_clients_online", "Clients heard from within the heartbeat timeout.");
  task_failures_ = &prometheus::BuildCounter()
                        .Name("fedsched_task_failures_total")
                        .Help("Failed tasks by cause.")
                        .Register(r);
  rpcs_ = &prometheus::BuildCounter()
               .Name("fedsched_rpcs_total")
               .Help("Finished RPCs by method and gRPC status code.")
               .Register(r);
  bytes_in_ = &prometheus::BuildCounter()
                   .Name("fedsched_received_bytes_total")
                   .Help("Protobuf-encoded bytes of messages received, by method.")
                   .Register(r);
  bytes_out_ = &prometheus::BuildCounter()
                    .Name("fedsched_sent_bytes_total")
                    .Help("Protobuf-encoded bytes of messages sent, by method.")
                    .Register(r);
  job_waiting_ = GaugeFamily(r, "fedsched_job_waiting_seconds",
                             "Seconds the job's current demand for devices has waited unmet.");
  job_max_wait_ = GaugeFamily(r, "fedsched_job_max_wait_seconds",
                              "Longest wait of the job's demand for devices so far, seconds.");
  job_starved_ = CounterFamily(r, "fedsched_job_starvations_total",
                               "Waits of the job's demand that passed jobs.starvation_bound_s "
                               "while a device it could use went to no job or to a job that "
                               "had waited less.");
}

ServerMetrics::~ServerMetrics() = default;

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Serve(
    const std::string& listen_address) {
  auto metrics = std::make_unique<ServerMetrics>();
  // prometheus-cpp (CivetWeb underneath) reports a bind failure by throwing: keep it inside.
  try {
    // CivetWeb gives each connection a thread until its request is read: with its defaults (2
    // threads, 30 s to read a request) two idle half-open connections starved every scrape.
    // Reads now give up after kRequestTimeoutMs and kServingThreads serve at once, so a handful
    // of idle or slow connections delay a scrape by at most one timeout.
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen_address, "num_threads", std::to_string(kServingThreads),
        "request_timeout_ms", std::to_string(kRequestTimeoutMs), "enable_keep_alive", "no"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen_address, ": ", e.what()));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  return metrics;
}

void ServerMetrics::SetJobWait(const std::string& job, double waiting_s, double max_wait_s,
                               int64_t starved) {
  const std::map<std::string, std::string> labels = WithJob({}, job);
  job_waiting_->Add(labels).Set(waiting_s);
  job_max_wait_->Add(labels).Set(max_wait_s);
  prometheus::Counter& counter = job_starved_->Add(labels);
  absl::MutexLock lock(&mu_);
  int64_t& seen = starved_seen_[job];
  if (starved > seen) {
    counter.Increment(static_cast<double>(starved - seen));
    seen = starved;
  }
}

int ServerMetrics::port() const {
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::map<std::string, std::string> ServerMetrics::WithJob(std::map<std::string, std::string> labels,
                                                          const std::string& job) {
  if (!job.empty()) labels.emplace("job", job);
  return labels;
}

ServerMetrics::RoundSeries& ServerMetrics::SeriesOf(const std::string& job) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<RoundSeries>& series = by_job_[job];
  if (series == nullptr) {
    const std::map<std::string, std::string> labels = WithJob({}, job);
    series = std::make_unique<RoundSeries>(RoundSeries{
        .committed = &rounds_committed_->Add(labels),
        .failed = &rounds_failed_->Add(labels),
        .participants = &participants_total_->Add(labels),
        .stragglers = &stragglers_total_->Add(labels),
        .examples = &examples_total_->Add(labels),
        .uplink_bytes = &uplink_bytes_->Add(labels),
        .downlink_bytes = &downlink_bytes_->Add(labels),
        .seconds = &round_seconds_->Add(labels, RoundBuckets()),
        .last_round = &last_round_->Add(labels),
        .last_participants = &last_participants_->Add(labels),
        .last_accuracy = &last_accuracy_->Add(labels),
        .predictor_mape = &predictor_mape_->Add(labels),
    });
  }
  return *series;
}

void ServerMetrics::OnRoundCommitted(const v1::RoundRecord& record, const std::string& job) {
  RoundSeries& series = SeriesOf(job);
  series.committed->Increment();
  series.participants->Increment(record.updates_accepted());
  series.stragglers->Increment(record.stragglers_size());
  series.examples->Increment(static_cast<double>(record.total_examples()));
  series.uplink_bytes->Increment(static_cast<double>(record.uplink_bytes()));
  series.downlink_bytes->Increment(static_cast<double>(record.downlink_bytes()));
  if (record.end_unix_ms() >= record.start_unix_ms() && record.start_unix_ms() > 0) {
    series.seconds->Observe((record.end_unix_ms() - record.start_unix_ms()) / 1000.0);
  }
  series.last_round->Set(static_cast<double>(record.round()));
  series.last_participants->Set(record.updates_accepted());
  // A positive loss marks an evaluated model (see the server's per-round line).
  if (record.test_loss() > 0) series.last_accuracy->Set(record.test_accuracy());
  series.predictor_mape->Set(record.predictor_mape());
}

void ServerMetrics::OnRoundFailed(const std::string& job) { SeriesOf(job).failed->Increment(); }

void ServerMetrics::DeclareJob(const std::string& job) {
  SeriesOf(job);
  for (const char* cause : kTaskFailureCauses) {
    Cached(task_failures_, absl::StrCat("task|", cause, "|", job),
           WithJob({{"cause", cause}}, job));
  }
}

std::string ServerMetrics::CauseLabel(const std::string& reason) {
  // The round engine's and the coordinator's reasons (server/round/lifecycle.cc, ReportFailure).
  if (absl::StartsWith(reason, "client reported")) return "reported";
  if (absl::StartsWith(reason, "update refused")) return "refused";
  if (absl::StrContains(reason, "heartbeat")) return "missed_heartbeats";
  if (absl::StrContains(reason, "max_staleness")) return "stale";
  if (absl::StrContains(reason, "deadline")) return "deadline";
  return "other";
}

void ServerMetrics::OnTaskFailed(const std::string& reason, const std::string& job) {
  const std::string cause = CauseLabel(reason);
  Cached(task_failures_, absl::StrCat("task|", cause, "|", job), WithJob({{"cause", cause}}, job))
      ->Increment();
}

void ServerMetrics::DeclareRejectReason(const std::string& reason, const std::string& job) {
  Cached(updates_rejected_, absl::StrCat("rejected|", reason, "|", job),
         WithJob({{"reason", reason}}, job));
}

void ServerMetrics::OnUpdateRejected(const std::string& reason, const std::string& job) {
  Cached(updates_rejected_, absl::StrCat("rejected|", reason, "|", job),
         WithJob({{"reason", reason}}, job))
      ->Increment();
}

void ServerMetrics::SetClients(int64_t registered, int64_t online) {
  clients_registered_->Set(static_cast<double>(registered));
  clients_online_->Set(static_cast<double>(online));
}

void ServerMetrics::OnRpcFinished(const std::string& method, int code) {
  Cached(rpcs_, absl::StrCat("rpc|", method, "|", code),
         {{"method", method}, {"code", std::to_string(code)}})
      ->Increment();
}

void ServerMetrics::DeclareRpcMethod(const std::string& method) {
  Cached(rpcs_, absl::StrCat("rpc|", method, "|0"), {{"method", method}, {"code", "0"}});
  // The interceptor counts bytes of fedsched's own services only (rpc_metrics.cc).
  if (absl::StartsWith(method, "/fedsched.")) {
    BytesIn(method);
    BytesOut(method);
  }
}

prometheus::Counter* ServerMetrics::BytesIn(const std::string& method) {
  return Cached(bytes_in_, "in|" + method, {{"method", method}});
}

prometheus::Counter* ServerMetrics::BytesOut(const std::string& method) {
  return Cached(bytes_out_, "out|" + method, {{"method", method}});
}

prometheus::Counter* ServerMetrics::Cached(prometheus::Family<prometheus::Counter>* family,
                                           const std::string& key,
                                           const std::map<std::string, std::string>& labels) {
  absl::MutexLock lock(&mu_);
  prometheus::Counter*& counter = by_label_[key];
  if (counter == nullptr) counter = &family->Add(labels);
  return counter;
}

std::string ServerMetrics::TextExposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace fedsched::ops
