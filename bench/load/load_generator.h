// The simulated fleet of fedsched-load-gen (bench/load/load_gen.cc): many
// lightweight clients in one process speaking the real protocol to a running fedsched-server,
// a monitor sampling GetStatus, and the end-of-run report (bench/load/load_report.h).
#ifndef FEDSCHED_BENCH_LOAD_LOAD_GENERATOR_H_
#define FEDSCHED_BENCH_LOAD_LOAD_GENERATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load/load_report.h"
#include "bench/load/load_stats.h"
#include "bench/load/load_transfer.h"
#include "fedsched/v1/coordinator.grpc.pb.h"

namespace fedsched::load {

// The run's settings (fedsched-load-gen's flags of the same names).
struct LoadOptions {
  // Server address (loopback); several, comma-separated (e.g. the aggregators of a hierarchy):
  // the channels, and so the clients, are spread over them in turn. GetStatus goes to the first.
  std::string server = "127.0.0.1:50051";
  int clients = 1000;  // simulated clients
  int rounds = 20;     // stop once the server has committed this many rounds
  int channels = 16;   // gRPC channels (TCP connections) shared by the clients; at least 1 used
  // Simulated local compute per task is drawn uniformly from [compute_ms_min, compute_ms_max], ms.
  int compute_ms_min = 100;
  int compute_ms_max = 1000;
  int server_pid = 0;   // for CPU seconds and peak RSS (/proc); <= 0: no server figures
  int timeout_s = 900;  // give up after this many seconds
  uint64_t seed = 1;    // seed of compute times and jitter
  std::string out;      // also write the report to this file (empty: stdout only)
  // PollTaskRequest.wait_ms: how long the server may hold an idle poll (long poll); 0 = answer at
  // once (poll every retry_after_ms).
  int poll_wait_ms = 5000;
  int status_interval_ms = 1000;  // GetStatus sampling period of the monitor, ms (at least 10)
  double register_ramp_s = 2.0;   // registrations are spread evenly over this many seconds
  int warmup_rounds = 1;          // rounds left out of the steady-state figures
  // > 0: also stop once the whole fleet has registered and this many rounds committed after the
  // steady state began (a registration ramp of unknown length in rounds); 0: `rounds` only.
  int steady_rounds = 0;
  std::string token_file;         // the server's operator token file, for GetStatus
  // Jobs or model architectures every client has a trainer for (RegisterRequest.trainers,
  // docs/guides/JOBS.md); empty: the config job only.
  std::vector<std::string> trainers;
};

struct SimClient;

// Runs the simulated clients against the server until it has committed `rounds` rounds, every
// client was told the run is over, or `timeout_s` passed. One scheduler thread starts timed
// actions; gRPC's callback threads complete them.
class LoadGenerator {
 public:
  // Creates the channels and the (unregistered) clients; nothing is sent yet.
  explicit LoadGenerator(LoadOptions options);
  ~LoadGenerator();

  // Runs the test, prints the report to stdout (and to `out`) and returns the exit code: 0 when
  // `rounds` rounds committed with no RPC error, every upload accepted and all clients
  // registered; 1 otherwise. Blocks for the whole run; call once.
  int Run();

 private:
  using Clock = std::chrono::steady_clock;
  struct MonitorState;

  // --- scheduling ---
  void At(Clock::time_point when, std::function<void()> fn);
  void After(double ms, std::function<void()> fn);
  void SchedulerLoop();
  double Uniform(double lo, double hi);

  // --- the protocol ---
  void Register(SimClient* c);
  void Heartbeat(SimClient* c);
  void Poll(SimClient* c);
  void Download(SimClient* c);
  void Upload(SimClient* c);
  void TaskDone(SimClient* c, const TaskRecord& record);
  // The payload (a delta of every value 1e-3) depends only on the model's shape, which sets its
  // serialized size: one payload serves every model of `model_bytes` bytes, so after the first
  // round each client uploads as soon as its own download is verified, as a device would, instead
  // of waiting for the one download that kept the bytes (a shape change, which FedAvg on one
  // architecture never makes, would get the uploads rejected: uploads_rejected, result FAIL).
  // True for the first download of a `model_bytes`-byte model while no payload of that size is
  // built: that download keeps the model's bytes (the others only verify them).
  bool ClaimModelBytes(int64_t model_bytes);
  void ReleaseClaim(int64_t model_bytes);
  // Uploads once the payload for `model_bytes` is built (polled every 2 ms); polls again if the
  // download that claimed the bytes failed.
  void AwaitPayload(SimClient* c, int64_t model_bytes);
  // Called when a download of `model_bytes` completes; returns the delta to upload.
  std::shared_ptr<const RoundPayload> PayloadFor(const std::string& model_bytes,
                                                 const std::string& sha);

  // --- the run (Run's steps) ---
  void StartRegistrations();
  // Samples GetStatus every status_interval_ms until the run ends (or times out).
  void Monitor(absl::Time start, MonitorState* m);
  // One GetStatus sample: updates `m` and prints a progress line to stderr.
  void SampleStatus(v1::Coordinator::Stub* status_stub, const std::string& operator_token,
                    absl::Time start, MonitorState* m);
  // Stops the clients, lets in-flight calls finish and joins the scheduler.
  void Stop(std::thread* scheduler);
  // The report's inputs read while the server still runs: the monitor's figures, /proc at the
  // end, RPC calls by method, the steady-state and whole-run seconds.
  ReportInputs FinalFigures(const MonitorState& m, absl::Time start);
  // Adds what is known once the clients stopped: task records, RPC counts and the verdict.
  void AddRunRecords(ReportInputs* in);

  bool stopping() const { return stopping_.load(); }

  struct Event {
    Clock::time_point when;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };

  const LoadOptions options_;
  v1::TransportConfig transport_;
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs_;
  std::vector<std::unique_ptr<SimClient>> clients_;
  Counters counters_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> registered_{0};
  std::atomic<int> finished_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> uploads_rejected_{0};
  std::atomic<int64_t> paced_waits_{0};
  std::atomic<bool> steady_reached_{false};  // stopped by steady_rounds
  // Steady-clock nanoseconds of the last successful registration (registration_s).
  std::atomic<int64_t> last_registered_ns_{0};
  Clock::time_point registrations_start_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0;
  bool scheduler_done_ = false;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;

  absl::Mutex payload_mu_;
  std::shared_ptr<const RoundPayload> payload_ ABSL_GUARDED_BY(payload_mu_);
  // A download keeps the bytes of a model of this size (0 = none).
  int64_t building_bytes_ ABSL_GUARDED_BY(payload_mu_) = 0;

  absl::Mutex records_mu_;
  std::vector<TaskRecord> records_ ABSL_GUARDED_BY(records_mu_);
};

}  // namespace fedsched::load

#endif  // FEDSCHED_BENCH_LOAD_LOAD_GENERATOR_H_
