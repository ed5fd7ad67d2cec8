// fedsched's discrete-event simulator: replays device capacity and availability traces over a
// virtual clock and drives a ParticipantSelector (the server's planner) and a Learner (real or
// modelled training) through synchronous rounds. It never reads or waits on the wall clock for
// anything it simulates.
//
// A round (FedScale / Oort, research.md section 2; design.md "A round"):
//   1. When at least min_online_clients are online (else wait, in virtual time, for
//      availability events), select ceil(K * overcommit) online clients.
//   2. Each task's duration = download + compute + I/O + upload (sim/engine/device_model.h, from
//      the client's capacity row and the Learner's cache hits/misses). If the client's
//      availability ends before that, the task fails when it goes offline.
//   3. FIRST_K: the round closes at the K-th arrival (the rest are stragglers); DEADLINE: at the
//      deadline. Either way it closes at round_deadline_s, or once every task has ended. It
//      commits with >= min_updates updates, else fails and is retried (same round number).
// Clients whose Learner::NumSamples is 0 (possible under strong Dirichlet skew) never come
// online. Availability is tracked lazily: each client has at most one pending availability event
// (its next change), so 100,000 clients cost 100,000 heap entries, not every window of the trace.
#ifndef FEDSCHED_SIM_ENGINE_SIMULATOR_H_
#define FEDSCHED_SIM_ENGINE_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "sim/engine/adapters.h"
#include "sim/engine/device_model.h"
#include "sim/engine/event_queue.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// One closed round (a row of the per-round CSV).
struct RoundRow {
  int64_t round = 0;
  bool committed = false;
  double start_s = 0;  // virtual seconds since the simulation start
  double end_s = 0;    // virtual seconds since the simulation start
  ModelQuality quality;
  int32_t online = 0;          // online clients at round start
  int32_t selected = 0;        // tasks issued
  int32_t participants = 0;    // updates accepted
  int32_t stragglers = 0;      // still running at close (work discarded)
  int32_t failed = 0;          // went offline mid-task
  double cache_hit_ratio = 0;  // hits / reads over accepted updates
  double predictor_mape = 0;   // mean |predicted - actual| / actual over accepted updates
  double mean_duration_s = 0;  // mean duration of accepted updates
};

// Receives rows as rounds close (the CSV writer, the progress line, tests).
class RoundSink {
 public:
  virtual ~RoundSink() = default;
  virtual void OnRound(const RoundRow& row) = 0;
};

// Totals of a run.
struct RunSummary {
  int64_t rounds_committed = 0;
  int64_t rounds_failed = 0;
  double virtual_s = 0;  // virtual seconds simulated
  uint64_t events = 0;   // events popped
  double final_accuracy = 0;
  double time_to_target_s = -1;  // virtual seconds to reach target_accuracy; -1 if never
  std::string stop_reason;
};

class Simulator {
 public:
  struct Options {
    int32_t num_clients = 1000;
    int32_t clients_per_round = 50;  // K
    double overcommit = 1.3;         // tasks = ceil(K * overcommit)
    int64_t num_rounds = 100;        // committed rounds
    double target_accuracy = 0;      // stop when reached; 0 = never
    double max_virtual_s = 0;        // stop after this many virtual seconds; 0 = no limit
    int32_t min_updates = 0;         // 0 = max(1, K / 2)
    double round_deadline_s = 3600;  // hard cap on a round, seconds
    v1::RoundClosing closing = v1::ROUND_CLOSING_FIRST_K;
    int32_t min_online_clients = 0;  // 0 = K
    int32_t batch_size = 32;
    int32_t local_steps = 1;  // default workload per task
    double start_time_s = 0;  // position in the availability trace at start
  };

  // `capacity`, `availability`, `selector`, `learner` are not owned and must outlive the
  // simulator. Errors: INVALID_ARGUMENT for non-positive counts, overcommit < 1, a
  // non-positive deadline, or min_updates > K.
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(const Options& options,
                                                           const CapacityTrace* capacity,
                                                           const AvailabilityTrace* availability,
                                                           ParticipantSelector* selector,
                                                           Learner* learner);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs until num_rounds rounds committed, target_accuracy was reached, max_virtual_s passed,
  // or no client can ever come online again (stop_reason says which). Call once.
  // Errors: whatever the selector or learner return; INTERNAL if the event order breaks.
  absl::StatusOr<RunSummary> Run(RoundSink* sink);

  // Clients online right now (for tests).
  int32_t online_count() const { return static_cast<int32_t>(online_.size()); }

 private:
  struct Task {
    int32_t client = -1;
    double start_s = 0;
    double predicted_s = 0;
    TaskTiming timing;
    TaskWork work;
    bool running = true;
  };

  Simulator(const Options& options, const CapacityTrace* capacity,
            const AvailabilityTrace* availability, ParticipantSelector* selector, Learner* learner);
  absl::Status Init();
  void SetOnline(int32_t client, bool online);
  absl::Status ScheduleAvailability(int32_t client, double now);
  absl::Status MaybeStartRound(double now);
  absl::Status StartRound(double now);
  absl::Status OnTaskComplete(const Event& e);
  absl::Status OnTaskFail(const Event& e);
  absl::Status CloseRound(double now);
  bool Done(double now);
  TaskReport MakeReport(const Task& t, TaskOutcome outcome, double end_s) const;

  Options options_;
  const CapacityTrace* capacity_;
  const AvailabilityTrace* availability_;
  ParticipantSelector* selector_;
  Learner* learner_;
  RoundSink* sink_ = nullptr;

  EventQueue queue_;
  std::vector<int32_t> online_;      // online clients, unordered
  std::vector<int32_t> online_pos_;  // index in online_, or -1

  // Current round.
  int64_t round_ = 1;    // round number being run (1-based)
  int64_t attempt_ = 0;  // increments per started round; tags events
  bool round_open_ = false;
  bool waiting_ = false;        // waiting for enough clients to come online
  bool start_pending_ = false;  // a kRoundStart event is queued
  std::vector<Task> tasks_;
  int32_t running_ = 0;
  std::vector<int32_t> accepted_;  // task indexes in arrival order
  int32_t failed_ = 0;
  RoundRow row_;
  double last_failed_close_ = -1;

  RunSummary summary_;
  bool stop_ = false;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_SIMULATOR_H_
