// fedsched's discrete-event simulator: replays device availability (and, by default, capacity)
// traces over a virtual clock and drives the server's round engine (server/round::RoundEngine,
// docs/ARCHITECTURE.md "The round engine") with it, so that planning, first-K / deadline
// closing, min_updates, stragglers, failed and re-planned rounds, FedBuff versions and
// staleness, and aggregation are the very code the coordination server runs
// (docs/ALGORITHMS.md §2 and §6). The simulator adds only what a fleet of devices would do:
// who is online (the availability trace: round::Presence and the planner's oracle), how long
// each task takes (TaskDurations), and the training itself (Learner). It never reads or waits
// on the wall clock.
//
// Exact call sequence into the engine (a test replaying a scenario through the server's
// coordinator can mirror it):
//   Create:  RoundEngine::Create({config.server(), learner.initial_model(), presence, oracle});
//            for every client k with NumSamples(k) > 0, in increasing k:
//            Register(SimIdentity(k), SimDeviceProfile(device k), t0); then
//            Publish(0, engine.model(), blob) (blob: null, or a placeholder of ModelBytes()
//            bytes when that differs from the model's serialized size, i.e. in no-train mode,
//            so that the planner predicts transfers of the modelled size).
//   Per event, in (virtual time, insertion) order; t = the event's time:
//     availability change: the client's presence flips; going offline with a task in flight
//            (TaskOf) -> FailTask(index, task_id, t, "device went offline").
//     task failure (the device goes offline before it would finish): FailTask likewise, if
//            the task is still in flight.
//     task completion: FoldUpdates({update}) with claim {index, task_id, round, examples},
//            the learner's delta (or, when the task's upload_compression compresses, its
//            CompressModel as Update::compressed; simulator_compress.cc),
//            SimUpdateMetrics(work, timing, ModelBytes()), now_s = t, upload_seconds =
//            timing.upload_s, upload_bytes = the upload's bytes (ModelBytes() uncompressed),
//            download_bytes = ModelBytes(). Every completion
//            is folded, also a straggler's or a closed round's (the engine refuses it; the
//            update is dropped); an INVALID_ARGUMENT verdict (a malformed update) is an error.
//     round deadline (scheduled at each round's open time + record.deadline_s, which is the
//            engine's deadline, Task::deadline_s), start, and wake-up (scheduled at
//            next_plan_s() while the engine backs off re-planning a round that failed
//            repeatedly): nothing but the Advance below.
//   After the last event at time t (a batch of same-time events):
//     loop { closed = Advance(t); per ClosedRound in order: if committed,
//            Publish(round, commit.model, blob), then Learner::EndRound evaluates, the RoundRow
//            is emitted; } until Advance closes nothing (a synchronous round is planned only
//            after Publish). Then TakeNewTasks(); PinModel(index, task_id) for each; the
//            learner trains them all from published_model(); each task's completion (or
//            failure, if its device goes offline first) is scheduled at t + its duration; a
//            deadline event is scheduled for a round that opened; idle online clients with a
//            PrefetchPlan warm their caches (Learner::Prefetch). (The engine may also hand out
//            tasks mid-round, replacing failed ones: they are started the same way.)
// Secure aggregation (server.secure_aggregation.enabled; simulator_secagg.cc): a task of a
// secure-aggregation round (Task::in_secagg()) is trained at once as above, but its device
// first runs the key steps: SecAggStep(advertise) at issue + round_trip_s (+ the message's
// transfer); after each Advance every waiting device calls SecAggStep(empty) and, given the
// key directory, sends SecAggStep(share_keys) one round trip (+ transfers) later; given the
// routed shares, its download / train / upload starts, and its completion folds
// Update::masked (SecAggClient::MaskInput of the flattened delta) instead of the delta; given
// the unmask request, it sends SecAggStep(unmask) one round trip (+ transfers) later. A device
// offline at a send, or whose task failed, sends nothing more. A wake-up (an Advance) is
// scheduled at secagg_deadline_s().
// Clients whose Learner::NumSamples is 0 (possible under strong Dirichlet skew) never register
// nor come online. Availability is tracked lazily: each client has at most one pending
// availability event (its next change), so 100,000 clients cost 100,000 heap entries.
#ifndef FEDSCHED_SIM_ENGINE_SIMULATOR_H_
#define FEDSCHED_SIM_ENGINE_SIMULATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/compress/error_feedback.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/sim.pb.h"
#include "secagg/client.h"
#include "server/forecast/availability_forecast.h"
#include "server/round/checkin_pacer.h"
#include "server/round/engine.h"
#include "server/round/gate_report.h"
#include "server/round/gated_presence.h"
#include "server/round/planning_gate.h"
#include "sim/engine/device_budgets.h"
#include "sim/engine/device_model.h"
#include "sim/engine/device_occupancy.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/learner.h"
#include "sim/engine/sim_client.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim {

// What secure aggregation cost a round (docs/guides/SIMULATION.md "Secure aggregation"; all 0 when
// it is off). Bytes are the messages as serialized (the protobuf message itself, not the RPC's
// envelope).
struct SecAggCounts {
  // Protocol messages client -> server the engine took: advertisements, shared keys and unmask
  // answers (the masked inputs are counted apart).
  int64_t bytes_up = 0;
  // Protocol messages server -> client the devices fetched: key directories, routed shares and
  // unmask requests.
  int64_t bytes_down = 0;
  // Masked inputs uploaded (also those refused as late), as charged to the upload time.
  int64_t masked_bytes = 0;
  // Round trips charged: one per protocol message the engine took (three per device that
  // advertises, shares keys and answers the unmask request).
  int32_t round_trips = 0;
  // Unmask answers the engine took.
  int32_t unmask_answers = 0;
};

// Where a simulated device is in secure aggregation's steps (Simulator, simulator_secagg.cc).
enum class SecAggStage {
  kAdvertise,      // its advertisement is on the way (a kSecAggSend event)
  kDirectory,      // waiting for the key directory
  kShareKeys,      // its shares are on the way
  kRouted,         // waiting for the routed shares
  kTraining,       // downloading, training, uploading (the task's end event is scheduled)
  kUnmaskRequest,  // uploaded; waiting for the unmask request
  kUnmask,         // its unmask answer is on the way
};

// One closed round (a row of the per-round CSV). Under FedBuff a round is a model version.
struct RoundRow {
  int64_t round = 0;
  bool committed = false;
  double start_s = 0;  // virtual seconds since the simulation start: the round opened
  double end_s = 0;    // virtual seconds since the simulation start: the round closed
  ModelQuality quality;
  int32_t online = 0;          // online clients when the round opened
  int32_t selected = 0;        // tasks planned for it (record.cohort)
  int32_t participants = 0;    // updates accepted (record.updates_accepted)
  int32_t stragglers = 0;      // in flight at a synchronous commit (record.stragglers)
  int32_t failed = 0;          // tasks whose device went offline while the round was open
  double cache_hit_ratio = 0;  // hits / reads over accepted updates (record)
  double predictor_mape = 0;   // the planner's MAPE over accepted updates (record)
  double mean_duration_s = 0;  // mean modelled duration of the accepted updates, seconds
  // FedBuff only (0 under synchronous aggregation), as the server's metrics.csv (record):
  double staleness_mean = 0;  // mean staleness of the buffered updates, in model versions
  int64_t staleness_max = 0;  // largest staleness among them, in model versions
  int32_t dropped_stale = 0;  // tasks dropped as more than aggregation.max_staleness behind
  // Resource fit (docs/guides/RESOURCE_FIT.md), from the record: tasks failed out of memory,
  // candidates passed over as "does not fit", the memory predictor's MAPE.
  int32_t oom_failures = 0;
  int32_t passed_over = 0;
  double memory_mape = 0;
  // Differential privacy (docs/guides/PRIVACY.md): epsilon spent after the round (0 when off), and
  // the record's CSV cells (privacy::CsvCells, the server's metrics.csv columns).
  double dp_epsilon = 0;
  std::string dp_csv;
  SecAggCounts secagg;  // secure aggregation's messages and round trips
  // Bytes on the devices' links (RoundRecord.uplink_bytes / downlink_bytes): the accepted
  // updates' payloads as uploaded (compressed: docs/ALGORITHMS.md §13), and the models their
  // tasks downloaded, as charged.
  int64_t uplink_bytes = 0;
  int64_t downlink_bytes = 0;
  // Staleness-aware aggregation (RoundRecord.stale_updates_folded / stale_weight_mean).
  int32_t stale_folded = 0;
  double stale_weight_mean = 0;
};

// Receives rounds as they close (the CSV writer, the progress line, tests).
class RoundSink {
 public:
  virtual ~RoundSink() = default;
  virtual void OnRound(const RoundRow& row) = 0;
  // The engine's record of the same round (test_accuracy / test_loss filled from the
  // learner's evaluation) and, if it committed, the new global model (else null). Default:
  // ignored.
  virtual void OnRecord(const v1::RoundRecord& record, const v1::Model* model) {}
  // No round is open because only `online` clients are online and server.min_online_clients
  // (`needed`) are required; called after every batch of events while that lasts (a display
  // rate-limits it). `virtual_s`: seconds since the simulation start. Default: ignored.
  virtual void OnWaiting(double virtual_s, int32_t online, int32_t needed) {}
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
  // Resource fit: tasks started on devices, and of those failed out of memory.
  int64_t tasks_started = 0;
  int64_t oom_failures = 0;
  // Virtual seconds since the simulation start when the first round opened; -1 if none did.
  double first_round_s = -1;
};

// One job's place in a fleet shared by several jobs (sim/engine/job_simulation.h).
struct JobSeat {
  int32_t job = 0;  // the job's index in the trace (DeviceOccupancy's key)
  // Virtual seconds after traces.start_time_s at which the job arrives: its clients register,
  // version 0 is published and its first round may be planned then.
  double arrival_s = 0;
  // The fleet ledger's gate of the job (jobs::FleetLedger::Gate): the engine plans only the
  // devices it offers. Not owned; required.
  round::PlanningGate* gate = nullptr;
  // Shared by every job of the fleet. Not owned; required.
  DeviceOccupancy* occupancy = nullptr;
};

// What a Simulator is made of. Pointers are not owned and must outlive the simulator.
struct SimulatorParts {
  // Resolved (ResolveSimConfig, sim/engine/setup.h): num_clients, target_accuracy,
  // max_virtual_hours, traces.start_time_s and the round settings in `server` are read.
  v1::SimConfig config;
  // Each client's device (computation ms/sample and sample KB for its registration; also the
  // task durations unless `durations` is given). Required.
  const CapacityTrace* capacity = nullptr;
  // Who is online when; also the planner's availability oracle under config
  // availability_forecast TRACE (the default). Required.
  const AvailabilityTrace* availability = nullptr;
  // Trains (or models) tasks and evaluates committed models. Required.
  Learner* learner = nullptr;
  // Task durations. Default (null): CapacityDurations over `capacity`.
  TaskDurations* durations = nullptr;
  // Set when the simulator runs one job of a job trace over a fleet shared with other jobs
  // (sim/engine/job_simulation.h); unset (the default): the run has the fleet to itself, as
  // always.
  std::optional<JobSeat> job;
};

// Not thread-safe; Run is called once.
class Simulator {
 public:
  // Creates the round engine, registers every client with data and publishes version 0 (see
  // the file comment). Errors: INVALID_ARGUMENT for a missing part, num_clients <= 0, or a
  // config the engine refuses (RoundEngine::Create, naming the field); those of Register.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Simulator>> Create(SimulatorParts parts);
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;
  ~Simulator();

  // Runs until server.num_rounds rounds committed, target_accuracy was reached, or
  // max_virtual_hours passed (stop_reason says which). `sink` may be null. Errors:
  // FAILED_PRECONDITION, before anything runs, when the availability trace shows that no round
  // can ever start (fewer than server.min_online_clients of the clients with data are ever
  // online at once, AvailabilityTrace::PeakOnline; none at all), or later when nothing can
  // happen any more (no pending event: nobody can come online again and nobody trains); the
  // learner's and the duration source's; INVALID_ARGUMENT for
  // a timing that is negative or not finite, or an update the engine refuses as malformed;
  // INTERNAL if the engine refuses a pin or a publish the simulator made, or the event order
  // breaks.
  [[nodiscard]] absl::StatusOr<RunSummary> Run(RoundSink* sink);

  // Stepwise driving, for several simulators over one virtual clock (sim/engine/
  // job_simulation.h) instead of Run. Call order: Begin once; then per virtual instant t (in
  // increasing order), HandleEventsAt(t) if NextEventS() is t, then AdvanceAt(t) once or more;
  // stop when stopped(). Begin's errors are Run's before anything runs (FAILED_PRECONDITION).
  [[nodiscard]] absl::Status Begin(RoundSink* sink);
  // The virtual time of the next pending event (traces clock, seconds), if any.
  std::optional<double> NextEventS() const;
  // Handles every pending event at `now` (NextEventS()). Errors: Run's.
  [[nodiscard]] absl::Status HandleEventsAt(double now);
  // Advances the engine at `now` as Run does after a batch of events: closes, plans and starts
  // tasks. Errors: Run's.
  [[nodiscard]] absl::Status AdvanceAt(double now);
  // Ends the run at `now` with `reason` (the caller's limit), unless it has stopped already.
  void Halt(double now, std::string reason);
  // Jobs: reports the job's in-flight clients and demand to its gate (PlanningGate::Settle)
  // and, when due, what it knows (round::ReportToGate: Describe, the server's rule);
  // Step calls it after each Advance, the job simulation also before the ledger's Rematch.
  // No-op without a JobSeat.
  void SettleGate(double now);
  // The run has stopped (summary().stop_reason says why).
  bool stopped() const { return stop_; }
  // The totals so far (final once stopped()).
  RunSummary summary() const;

  // Clients online right now.
  int32_t online_count() const { return static_cast<int32_t>(online_.size()); }
  // The engine (for tests: its book, planner, records).
  const round::RoundEngine& engine() const { return *engine_; }
  // Modelled pace steering (docs/ALGORITHMS.md §2.6), on only when the config sets
  // server.pacing (without disable): true iff engine client `index` is inside its check-in
  // window at now_s (virtual seconds), or holds a task, or the online population is no larger
  // than the pacer's pool; always true when pace steering is not modelled. Only checked-in
  // online clients are candidates.
  bool CheckedIn(round::ClientIndex index, double now_s) const;

 private:
  // Distributed differential privacy (simulator_privacy.cc): the device's clip-and-noise step
  // (common/dp_noise.h, as the SDK) on `update` when its task carries a clip norm, into
  // `*noised` (which then owns update->delta); noise seeded from config.seed and `serial`. And
  // the noise on the utility report (NoiseUtilityReport, as the SDK) when the task carries a
  // utility_noise_stddev, seeded from config.seed, the round and the client.
  [[nodiscard]] absl::Status PrivatizeUpdate(int64_t serial, round::Update* update,
                                             std::unique_ptr<v1::Model>* noised) const;
  // The summary's stop reason when the privacy budget ended the run.
  std::string BudgetStopReason() const;
  // Secure aggregation (simulator_secagg.cc, docs/guides/SIMULATION.md "Secure aggregation"): one
  // simulated device's side of the protocol for one task (its SecAggClient, the message its next
  // send carries, the routed shares it masks with).
  struct SecAggDevice {
    explicit SecAggDevice(secagg::SecAggClient c) : client(std::move(c)) {}
    using Stage = SecAggStage;
    secagg::SecAggClient client;
    int32_t sim_client = -1;
    round::ClientIndex index = 0;
    Stage stage = Stage::kAdvertise;
    v1::SecAggStepRequest pending;  // task_id always; the message of the next send
    v1::SecAggRoutedShares routed;
    int64_t masked_bytes = 0;  // the masked input's size, as charged
  };
  // Starts the protocol for the task of `serial` (its SimTask filled, its timing that of a plain
  // upload), which the engine planned as `task` at `now`: the upload is re-timed for the masked
  // input and the advertisement is sent one round trip after `now`. Errors: INTERNAL when the
  // protocol refuses the engine's parameters.
  [[nodiscard]] absl::Status BeginSecAgg(int64_t serial, const round::Task& task, double now);
  // A device's protocol message is due (event kSecAggSend): sent unless the device is offline or
  // its task failed (then it drops at this step). Errors: INTERNAL when the engine refuses an
  // honest device's message as malformed.
  [[nodiscard]] absl::Status OnSecAggSend(int64_t serial, double now);
  // After an Advance at `now`: each waiting device takes the server's message that became
  // available (SecAggStep without a message) and schedules its answer, or starts training on the
  // routed shares; devices the round left behind are forgotten; a wake-up is scheduled at the
  // open step's deadline.
  [[nodiscard]] absl::Status PollSecAgg(double now);
  [[nodiscard]] absl::Status OfferNextStep(std::map<int64_t, SecAggDevice>::iterator it,
                                           double now);
  // Forgets a device (and, before it trains, its SimTask, which has no event scheduled).
  void DropSecAgg(std::map<int64_t, SecAggDevice>::iterator it);
  // At the completion of the task of `serial`: for a secure-aggregation task (`secagg`, its
  // SimTask's flag), masks update->delta (flattened, FedAvg-weighted, as the SDK) into `*masked`
  // and points `update` at it instead of the delta. Returns false when nothing is to be uploaded
  // (the device has left the protocol, or refuses to mask: its task is then failed); true for
  // a plain task, untouched. Errors: the engine's FailTask.
  [[nodiscard]] absl::StatusOr<bool> MaskUpdate(int64_t serial, bool secagg, double now,
                                                round::Update* update,
                                                std::optional<v1::SecAggMaskedInput>* masked);
  // Seconds to move `bytes` over simulated client `client`'s link (its capacity's bandwidth).
  double TransferSeconds(int32_t client, int64_t bytes) const;
  class OnlinePresence;
  // A task the simulated device is working on (until its completion or failure event).
  struct SimTask {
    std::string task_id;
    int32_t client = -1;
    round::ClientIndex index = 0;
    int64_t round = 0;
    TaskWork work;
    TaskTiming timing;
    std::shared_ptr<const v1::Model> delta;
    int64_t peak_bytes = 0;  // true peak memory (budgets enabled), else 0
    bool out_of_memory = false;
    bool secagg = false;  // its upload is a masked input (secagg_devices_ holds its protocol)
    int64_t download_bytes = 0;  // what its download was charged (DownloadBytesOf)
    // The compressor its update goes through (round::Task::upload_compression) and the bytes
    // its upload was charged (the model's size when uncompressed).
    v1::UpdateCompression compression;
    int64_t upload_bytes = 0;
  };

  explicit Simulator(SimulatorParts parts);
  // PyramidFL update dropout (simulator_dropout.cc, docs/ALGORITHMS.md §10): the device drops
  // each tensor of its update with probability `p` (seeded from config.seed, the round and the
  // client), so the dropped tensors of t.delta become zeros and t.timing.upload_s shrinks by the
  // dropped values' share; with a stand-in model (no-train mode) the upload shrinks by the
  // expected share p. No-op for p <= 0.
  void ApplyUpdateDropout(SimTask& t, double p) const;
  // The bytes the device of `pinned` (null: unknown) downloads for its task: the learner's model
  // size, scaled with downlink compression by the share of the whole shadow model its pinned
  // download is (a delta chain, round::Task::download_bytes; simulator_downlink.cc).
  int64_t DownloadBytesOf(const round::Task* pinned) const;
  // Update compression (simulator_compress.cc, docs/ALGORITHMS.md §13): the bytes an update
  // compressed with `c` uploads: the model's size when uncompressed; CompressedUpdateBytes of
  // the real update `delta`; for a stand-in model (no-train mode, or `delta` null) the modelled
  // size scaled by the format's bytes per element.
  int64_t UploadBytesOf(const v1::UpdateCompression& c, const v1::Model* delta) const;
  // At the completion of task `t` (after DP's clip and noise): compresses update->delta with
  // t.compression as the device does (compress::CompressModel; Rng seeded by
  // SimCompressionSeed; the client's ErrorFeedback when the spec asks for it) into `*payload`
  // and points update->compressed at it instead of the delta (upload_bytes = its size). No-op
  // when uncompressed. Errors: INVALID_ARGUMENT from the compressor.
  [[nodiscard]] absl::Status CompressUpload(const SimTask& t, round::Update* update,
                                            std::unique_ptr<v1::CompressedModel>* payload);
  [[nodiscard]] absl::Status Init();
  // The round engine over the presence (through the job's gate under a JobSeat), with the
  // initial model's evaluation as the collapse guard's reference.
  [[nodiscard]] absl::Status CreateEngine();
  // Moves `client` on or off the online list at `now`; under the learned forecast, tells it the
  // transition as it happens. Errors: those of the forecast's Observe calls.
  [[nodiscard]] absl::Status SetOnline(int32_t client, bool online, double now);
  // The planner's oracle per config availability_forecast: the trace's, the learned forecast
  // (created here) or none. Errors: INVALID_ARGUMENT for an unknown value.
  [[nodiscard]] absl::StatusOr<const planner::AvailabilityOracle*> MakeOracle();
  [[nodiscard]] absl::Status ScheduleAvailability(int32_t client, double now);
  // Jobs: the simulated device of `client` starts (ends) a task of this job. No-op without a
  // JobSeat.
  [[nodiscard]] absl::Status NoteTaskStart(int32_t client);
  void NoteTaskEnd(int32_t client);
  // Jobs: engine client `index`'s device holds no other job's task. Always true without a
  // JobSeat.
  bool Free(round::ClientIndex index) const;

  // Jobs: the client registers, comes online and is first planned from this virtual time on.
  double StartTime() const { return t0_ + (parts_.job ? parts_.job->arrival_s : 0.0); }
  [[nodiscard]] absl::Status CheckCanStart() const;
  void NoteWaiting(double now);
  [[nodiscard]] absl::Status HandleEvent(const Event& e, bool* advance);
  [[nodiscard]] absl::Status OnAvailabilityChange(int32_t client, double now);
  [[nodiscard]] absl::Status OnTaskComplete(int64_t serial, double now);
  [[nodiscard]] absl::Status FailIfInFlight(round::ClientIndex index, const std::string& task_id,
                                            double now);
  // Advances the engine at `now` until nothing closes; then starts the new tasks.
  [[nodiscard]] absl::Status Step(double now);
  [[nodiscard]] absl::Status FinishRound(const round::ClosedRound& closed, double now);
  // FinishRound's CSV row; takes the round's secure-aggregation counts.
  RoundRow MakeRow(const round::ClosedRound& closed, const ModelQuality& quality, double now);
  [[nodiscard]] absl::Status NoteOpened(double now);
  [[nodiscard]] absl::Status ScheduleWake(double now);

  [[nodiscard]] absl::Status StartNewTasks(double now);
  [[nodiscard]] absl::Status ScheduleTask(const TrainTask& task, TrainedTask trained,
                                          round::ClientIndex index, double now);
  // Schedules the end of the task of `serial`, whose download starts at `start`: its completion,
  // or its failure when the device goes offline first.
  [[nodiscard]] absl::Status PushTaskEnd(int64_t serial, double start);
  [[nodiscard]] absl::Status Prefetch();
  [[nodiscard]] absl::Status ResolveModelFeatures();
  // Budgets on: the true peak of `task` and, when it exceeds its device's budget, an
  // out-of-memory failure scheduled after its download (returns true: not to be trained).
  [[nodiscard]] absl::StatusOr<bool> FailsOutOfMemory(const TrainTask& task,
                                                      round::ClientIndex index, double now,
                                                      int64_t* peak_bytes);
  bool Done(double now);

  SimulatorParts parts_;
  const v1::SimConfig& config_;
  const double t0_;  // traces.start_time_s: virtual time of the start, seconds
  std::unique_ptr<TaskDurations> default_durations_;
  TaskDurations* durations_ = nullptr;
  RoundSink* sink_ = nullptr;

  std::vector<int32_t> client_of_;  // engine index -> simulated client
  std::vector<int64_t> index_of_;   // simulated client -> engine index, or -1 (no data)
  std::unique_ptr<OnlinePresence> presence_;
  // Jobs: presence_ seen through the job's planning gate (the engine's Presence); else null.
  std::unique_ptr<round::GatedPresence> gated_;
  std::vector<std::string> in_flight_;  // SettleGate's buffer
  // Jobs: when SettleGate next describes the job to its gate (as the server's coordinator).
  round::DescribePacer describe_pacer_;
  // Pace steering's pacer, when the config sets server.pacing (docs/guides/SIMULATION.md); else
  // null.
  std::unique_ptr<round::CheckInPacer> pacer_;
  // The live server's long-poll bound: how long a device stays checked in, seconds.
  static constexpr double kCheckInHoldS = 5.0;
  std::unique_ptr<TraceAvailabilityOracle> oracle_;
  // availability_forecast LEARNED: the forecast fed by SetOnline (the planner's oracle); else
  // null.
  std::unique_ptr<forecast::AvailabilityForecast> learned_;
  std::unique_ptr<round::RoundEngine> engine_;
  std::shared_ptr<const round::ModelBlob> blob_;  // null unless no-train (see file comment)
  // Downlink compression (CompressionConfig.downlink): the version of the shadow model each
  // client downloaded last, which it announces at its next pin (round::ShadowChain).
  absl::flat_hash_map<round::ClientIndex, int64_t> held_version_;
  // Resource fit (sim.proto DeviceBudgetConfig): each simulated client's budgets, and the
  // model's memory features the planner and the true peaks use.
  std::unique_ptr<DeviceBudgets> budgets_;
  std::vector<DeviceBudget> device_budget_;
  fit::ModelFeatures model_features_;
  int64_t peak_serial_ = 0;

  EventQueue queue_;
  std::vector<int32_t> online_;      // online clients, unordered
  std::vector<int32_t> online_pos_;  // index in online_, or -1
  // Bit i set: the client of engine index i is online (the online list by index, so that the
  // engine's candidates are collected in index order without a sort or a scan of every client).
  std::vector<uint64_t> online_bits_;

  absl::flat_hash_map<int64_t, SimTask> tasks_;  // by serial (event payload)
  // Error feedback of each simulated client whose compression asks for it, in memory only.
  absl::flat_hash_map<int32_t, compress::ErrorFeedback> error_feedback_;
  double wake_s_ = -1;  // the pending wake-up for the engine's re-plan backoff
  // Secure aggregation: the devices running the protocol, by task serial (ordered, so that
  // same-time events are pushed in a deterministic order); the pending wake-up for a step
  // deadline; the open round's counts.
  std::map<int64_t, SecAggDevice> secagg_devices_;
  double secagg_wake_s_ = -1;
  SecAggCounts secagg_counts_;
  int64_t next_serial_ = 0;

  // The open round (FedBuff: version), as last seen after an Advance.
  bool open_ = false;
  int64_t open_round_ = 0;
  int open_attempt_ = 0;
  int64_t open_serial_ = 0;  // tags its deadline event
  double open_s_ = 0;
  int32_t online_at_open_ = 0;
  double last_dp_epsilon_ = 0;  // epsilon after the last committed round (privacy on)
  int32_t failed_ = 0;
  int32_t accepted_ = 0;
  double accepted_duration_s_ = 0;

  RunSummary summary_;
  bool stop_ = false;
};

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_ENGINE_SIMULATOR_H_
