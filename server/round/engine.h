// The round engine: the one implementation of a federated round's lifecycle, shared by the
// coordination server (server/service, wall clock) and the simulator (sim/engine, virtual
// clock). docs/ARCHITECTURE.md "The round engine" describes the contract; docs/ALGORITHMS.md §2
// (over-commitment, closing, deadlines) and §6 (FedBuff) the rules it follows.
//
// Pure: no gRPC, no threads, no clock, no disk. Time is passed in as seconds on the caller's
// clock (`now_s`: unix seconds in the server, virtual seconds in the simulator); every
// duration is seconds. Closing a round returns a value (ClosedRound) for the caller to persist;
// the engine never writes anything itself.
//
// Call order, per round (synchronous mode):
//   1. Register / Heartbeat devices as they appear (Presence says who is reachable).
//   2. Advance(now_s): plans a round once min_online_clients are reachable -> new tasks
//      (TakeNewTasks); fails tasks whose client is no longer reachable; closes the round when
//      K updates are in (first-K) or at its deadline, or once no task is left in flight
//      -> ClosedRound (committed with >= min_updates updates, else failed and re-planned).
//   3. Per task: PinModel (when the client fetches it), then CheckUpdate + FoldUpdates for its
//      update, or FailTask; call Advance after each batch of events.
//   4. Per committed ClosedRound: the caller evaluates and persists it, then calls Publish;
//      the next synchronous round is planned only after Publish (its tasks need the new model).
// FedBuff (aggregation.async_fedbuff, Nguyen et al. AISTATS 2022 section 3): a round is a model
// version that closes as soon as K updates are folded; tasks stay in flight across versions and
// are weighed by staleness; new tasks go to idle clients at every close, pinned to the latest
// published model when their client fetches it.
#ifndef FEDSCHED_SERVER_ROUND_ENGINE_H_
#define FEDSCHED_SERVER_ROUND_ENGINE_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/aggregation/aggregator.h"
#include "server/fit/memory_predictor.h"
#include "server/forecast/availability_forecast.h"
#include "server/planner/planner.h"
#include "server/privacy/round_privacy.h"
#include "server/profile/profile_book.h"
#include "server/round/closing_rule.h"
#include "server/round/collapse_guard.h"
#include "server/round/influence.h"
#include "server/round/model_versions.h"
#include "server/round/planning_gate.h"
#include "server/round/replan_backoff.h"
#include "server/round/round_config.h"
#include "server/round/round_influence.h"
#include "server/round/secagg_round.h"
#include "server/round/shadow_chain.h"
#include "server/store/round_commit.h"

namespace fedsched::round {

using profile::ClientIndex;

// Seconds on the caller's clock as whole milliseconds (rounded to nearest), the unit of the
// records' and receipts' *_unix_ms fields.
inline int64_t ToMillis(double seconds) {
  return static_cast<int64_t>(std::llround(seconds * 1000.0));
}

// Who can be given a task right now. The server answers from heartbeats and live sessions, the
// simulator from its availability trace. Called only from inside engine calls.
class Presence {
 public:
  virtual ~Presence() = default;
  // True iff client `index` is reachable at now_s (online, and able to fetch a task).
  virtual bool IsReachable(ClientIndex index, double now_s) const = 0;
  // Appends every reachable client at now_s to `out` (cleared first), in any order: the engine
  // sorts them, so that both callers hand the planner the same candidate list.
  virtual void CollectReachable(double now_s, std::vector<ClientIndex>* out) const = 0;
};

// One task: a participant's work in one round (version, under FedBuff).
struct Task {
  std::string task_id;
  std::string client_id;
  ClientIndex index = 0;
  int64_t round = 0;
  int32_t local_steps = 0;
  // Minibatch size, samples: training.batch_size, or lower to fit the device's memory budget
  // (planner::PlannedTask::batch_size; docs/ALGORITHMS.md §8).
  int32_t batch_size = 0;
  double issued_s = 0;     // when it was planned, caller's seconds
  double predicted_s = 0;  // planner's predicted completion, seconds after issued_s
  double deadline_s = 0;   // absolute deadline of its round, caller's seconds
  // Distributed differential privacy (PrivacyConfig MODE_DISTRIBUTED): the clip norm and the
  // standard deviation of the Gaussian noise the client applies to its update (v1::Task's
  // dp_clip_norm, dp_noise_stddev); 0 otherwise.
  double dp_clip_norm = 0;
  double dp_noise_stddev = 0;
  // PyramidFL update dropout (planner::PlannedTask::update_dropout; v1::Task.update_dropout).
  double update_dropout = 0;
  // The compressor the client runs on its update (v1::Task.upload_compression): the planner's
  // choice for it (SelectionReason.compression, compression.adaptive), else
  // compression.uplink; FLOAT32 / unset = a float32 update (compress::IsUncompressed).
  v1::UpdateCompression upload_compression;
  // Standard deviation of the Gaussian noise the client adds to its statistical-utility report
  // (v1::Task.utility_noise_stddev; Oort, Lai et al., OSDI 2021; docs/guides/PRIVACY.md), examples
  // x loss: selection.utility_noise_factor x the median reported utility when the round was planned
  // (profile::UtilityNoiseStddev); 0 = exact report.
  double utility_noise_stddev = 0;
  v1::CachePlan cache_plan;
  // Secure aggregation (ServerConfig.secure_aggregation): the task's part in its round's
  // protocol (v1::Task.secagg: parameters and cohort index); empty when off.
  v1::SecAggTask secagg;
  // The task is a member of its round's secure-aggregation cohort.
  bool in_secagg() const { return secagg.has_params(); }
  // The model version the client trains on: set by PinModel (the first fetch), or the
  // published version when it is folded unpinned. -1 until pinned.
  int64_t base_version = -1;
  // What the task's download serves: the pinned model's bytes, or with downlink compression the
  // delta chain from the model the client holds (download_from_version >= 0). Null in the
  // simulator unless downlink compression is on.
  std::shared_ptr<const ModelBlob> blob;
  // Downlink compression (CompressionConfig.downlink; shadow_chain.h): the version the download's
  // delta chain starts from, or -1 for the whole model; the download's serialized size, bytes
  // (set by PinModel, also in the simulator); and, for a chain, the model it rebuilds (the
  // shadow's blob: v1::DownlinkDelta's size and digest).
  int64_t download_from_version = -1;
  int64_t download_bytes = 0;
  std::shared_ptr<const ModelBlob> download_result;
  bool uploaded = false;
  bool failed = false;
  std::string failure_reason;  // why it failed (FailTask's `why`), when failed
  // A failed task whose slot was given to another client (at most one replacement per task).
  bool replaced = false;
  // Neither uploaded nor failed: its client is still working on it.
  bool in_flight() const { return !uploaded && !failed; }
};

// Why an upload was refused (docs/guides/SECURITY.md "Screens that cannot be starved"): the reason
// of RoundRecord.rejected_by_reason, of the server's fedsched_updates_rejected_total{reason} and of
// its log lines.
enum class RejectReason {
  kSession,     // no valid session: the sender is not known
  kTask,        // not an open task of the sender: unknown, another client's, already accepted
                // or failed, or for another round
  kLate,        // its round has closed or is full (a first-K straggler), or its
                // secure-aggregation step has passed
  kExamples,    // claims more examples than its task planned
  kMetrics,     // metrics negative, absurd or non-finite
  kPayload,     // size or digest does not match, does not parse, or the wrong kind of payload
  kValidation,  // wrong tensors or shapes, a non-finite value (ValidateUpdate, the aggregator)
  kNormBound,   // L2 norm above security.max_update_norm
  kNormMedian,  // L2 norm above the median screen's threshold (UpdateNormScreen)
  kSignature,   // a secure-aggregation key advertisement not signed as its member's client with
                // the key bound to its identity (SecAggRound::Advertise)
};
// Every RejectReason, in declaration order.
inline constexpr RejectReason kAllRejectReasons[] = {
    RejectReason::kSession,    RejectReason::kTask,      RejectReason::kLate,
    RejectReason::kExamples,   RejectReason::kMetrics,   RejectReason::kPayload,
    RejectReason::kValidation, RejectReason::kNormBound, RejectReason::kNormMedian,
    RejectReason::kSignature};
// "session", "task", "late", "examples", "metrics", "payload", "validation", "norm_bound",
// "norm_median", "signature".
absl::string_view RejectReasonName(RejectReason reason);
// True when the update itself was refused (examples, metrics, payload, validation, norms), not
// its timing or its session: RoundEngine::RefuseUpdate then fails its task.
bool RefusalFailsTask(RejectReason reason);

// An upload the engine counted as refused (RoundEngine::RefuseUpdate), for the caller's log and
// metrics.
struct RefusalNote {
  RejectReason reason = RejectReason::kValidation;
  std::string client_id;     // "" when the sender is not known
  std::string task_id;       // as claimed ("" when unknown)
  int64_t round = 0;         // the task's round, else the current round
  std::string why;           // the error message the sender got
  bool task_failed = false;  // the refusal failed the sender's task
};

// What an update claims about itself, checked before its payload is read or folded.
struct UpdateClaim {
  ClientIndex index = 0;  // the authenticated sender
  std::string task_id;
  int64_t round = 0;         // the round the update names
  int64_t num_examples = 0;  // samples trained, > 0 (validated by the caller's metrics check)
};

// An update ready to fold: a claim that passed CheckUpdate, its parsed delta and its facts.
struct Update {
  UpdateClaim claim;
  const v1::Model* delta = nullptr;  // trained - downloaded, the global model's shapes; not owned
  // Secure aggregation instead of `delta` (exactly one of delta, masked, compressed is set): the
  // client's masked input (docs/guides/SECURE_AGGREGATION.md); not owned.
  const v1::SecAggMaskedInput* masked = nullptr;
  // Update compression instead of `delta` (CompressionConfig; the task's upload_compression): the
  // compressed delta, folded without a float32 copy when the aggregation rule averages
  // (docs/ARCHITECTURE.md "Compressed updates"); not owned. Its kind must be the task's: a
  // compressed update for a task whose upload_compression is float32, or a float32 one for a
  // compressed task, is refused (RejectReason::kPayload).
  const v1::CompressedModel* compressed = nullptr;
  v1::UpdateMetrics metrics;  // as uploaded (num_examples == claim.num_examples)
  double now_s = 0;           // arrival time, caller's seconds
  double upload_seconds = 0;  // measured (server) or modelled (simulator) upload time
  int64_t upload_bytes = 0;   // bytes uploaded (the payload), for the bandwidth estimate
  // Bytes the participant downloaded for its task (the model or model delta as sent), when the
  // caller knows them; 0 = the size of the model its task pinned (RoundRecord.downlink_bytes).
  int64_t download_bytes = 0;
  std::string sha256;         // of the payload as received (receipt); may be empty
  // The payload as received, for the audit trail (ServerConfig.audit_updates); may be empty, in
  // which case the delta is serialized instead.
  absl::Span<const std::string_view> payload_pieces;
  // Aggregator::TensorSumSquares(*delta) when the caller computed it (the server's norm screen),
  // else empty; clipping then reads the delta once less. Not owned.
  absl::Span<const double> tensor_sum_squares;
};

// A round (version) that closed: what the caller evaluates, persists and reports.
struct ClosedRound {
  bool committed = false;
  double closed_at_s = 0;  // when it closed, caller's seconds
  // outcome COMMITTED or FAILED; times are ms of the caller's clock. test_accuracy/test_loss
  // are left for the caller (who evaluates).
  v1::RoundRecord record;
  // Committed rounds only: the new global model (version record.round()), receipts, changed
  // profiles, planner and optimiser state, audited updates. `commit.model` is shared with the
  // engine (read-only).
  RoundCommit commit;
  std::string failure_reason;  // failed rounds only
};

// A task the engine failed (its client became unreachable, reported failure, or fell more than
// max_staleness versions behind), for the caller's log.
struct TaskFailureNote {
  std::string task_id;
  std::string client_id;
  int64_t round = 0;
  std::string reason;
};

struct EngineOptions {
  // A config resolved by ResolveRoundConfig (server/round/round_config.h).
  v1::ServerConfig config;
  // The global model at `version` (the initial model, or the last committed one on resume).
  v1::Model model;
  // Committed rounds so far (0 = fresh run).
  int64_t version = 0;
  // Restored state (empty on a fresh run): client profiles, planner state, optimiser state.
  std::vector<v1::ClientProfile> profiles;
  std::string planner_state;
  std::string optimizer_state;
  // Who is reachable. Not owned, required, must outlive the engine.
  const Presence* presence = nullptr;
  // Optional availability forecast for the planner (the simulator's trace). Not owned. When
  // null and config.selection.learned_availability is set, the engine learns one from
  // registrations and heartbeats (learned_availability()).
  const planner::AvailabilityOracle* availability = nullptr;
  // Task ids. Default: "t<round>-<n>" (deterministic); the server passes unguessable ids.
  std::function<std::string()> new_task_id;
  // The model's memory features for resource fit (docs/ALGORITHMS.md §8): the caller knows the
  // architecture's activation floats per sample (models::ActivationFloatsPerSample); parameters
  // 0 = counted from `model`; optimizer_floats_per_parameter 0 = 1 when training.proximal_mu >
  // 0 (FedProx keeps the global model), else 0.
  fit::ModelFeatures model_features;
  // The collapse guard's reference restored from the store (RunMeta.collapse_guard); nullopt on
  // a fresh run (the caller evaluates the initial model: SetInitialEvaluation).
  std::optional<v1::CollapseGuardReference> guard_reference;
  // Seeds of the differential-privacy noise (PrivacyConfig), one call per noised round. The
  // server draws them from OpenSSL's RAND_bytes (an adversary who knew the seed could subtract
  // the noise); default: derived from config.seed and the round (deterministic, for the
  // simulator and tests).
  std::function<uint64_t()> noise_seed;
  // Secure aggregation: 32 random bytes per round for the communication graph's relabelling
  // (SecAgg+, Bell et al., CCS 2020, section 3.1). The server draws them from RAND_bytes;
  // default: derived from config.seed and the round (simulator, tests).
  std::function<std::string()> secagg_graph_seed;
  // The job's target test accuracy, a fraction in [0, 1] (JobSpec.target_accuracy,
  // SimConfig.target_accuracy), reported in MatchFacts; the caller stops the run when it is
  // reached. 0 = none.
  double target_accuracy = 0;
  // The job's planning gate when several jobs share the fleet (docs/guides/JOBS.md "Scheduling
  // devices across jobs"): each planned task's SelectionReason.match_reason is its OfferReason. Not
  // owned; must outlive the engine. Null = the fleet is the run's alone (no match reasons).
  const PlanningGate* planning_gate = nullptr;
  // Whether each committed round's RoundCommit carries the planner state and the changed client
  // profiles, what the server persists with the round. The simulator, which persists neither,
  // turns it off: FedCaSe's state names every client that ever completed a task (over 100,000
  // client ids a round at a million clients). Selections are the same either way.
  // Default: true.
  bool persist_commits = true;
};

// Not thread-safe: the owner serialises every call (the server under its coordinator lock).
// Deterministic for a given config (seed), input sequence and task id source.
class RoundEngine {
 public:
  // Errors: INVALID_ARGUMENT (no presence, empty model, bad restored state: names it), and those
  // of ProfileBook / Planner / Aggregator creation.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RoundEngine>> Create(EngineOptions options);
  RoundEngine(const RoundEngine&) = delete;
  RoundEngine& operator=(const RoundEngine&) = delete;
  ~RoundEngine();

  // Registers a device (or re-registers a known identity, which keeps its client id, its profile
  // and its task in flight, so that a restarted client resumes its work). Errors:
  // INVALID_ARGUMENT as ProfileBook::OnRegister.
  [[nodiscard]] absl::StatusOr<profile::ProfileBook::Registration> Register(
      const std::string& identity, const v1::DeviceProfile& device, double now_s);
  // The client is alive (any RPC). Errors: NOT_FOUND for an unknown index.
  [[nodiscard]] absl::Status Heartbeat(ClientIndex index, double now_s);
  // Identity expiry (docs/guides/SECURITY.md "Identities and admission"): forgets every client that
  // never had an update accepted, has no task the engine remembers, and was last heard from more
  // than `ttl_s` seconds before now_s (ProfileBook::CollectUnseen, ProfileBook::Retire). Returns
  // their client ids, for the caller to drop their sessions and stored profiles. The server
  // calls it (security.unseen_identity_ttl_s); the simulator does not (its devices register
  // once and may be offline for hours). O(clients + tasks).
  std::vector<std::string> RetireUnseen(double now_s, double ttl_s);

  // Time-driven transitions (see the file comment). Returns the rounds that closed, in order
  // (under FedBuff possibly more than one). Call after every batch of events and periodically.
  std::vector<ClosedRound> Advance(double now_s);

  // Tasks planned since the last call (by Advance), in planning order.
  std::vector<const Task*> TakeNewTasks();
  // Tasks failed since the last call, in order.
  std::vector<TaskFailureNote> TakeTaskFailures();

  // The client's task in flight, or null.
  const Task* TaskOf(ClientIndex index) const;
  // The participants this run asks for now (round::PlanningGate::Settle's demand,
  // docs/guides/JOBS.md "Matching devices to jobs"): synchronous rounds, while no round is open,
  // max(ceil(K x over-commitment), min_online_clients), and 0 while a round runs; under FedBuff,
  // while fewer than ceil(K x over-commitment) tasks are in flight, the free slots (at least
  // the reachable clients still missing to min_online_clients), else 0. 0 once finished(), and
  // while the last Advance found the run backing off after repeated failures (next_plan_s()),
  // so that it holds no devices it cannot use.
  int64_t PlanningDemand() const;
  // Sets `out` (cleared first) to the client ids holding a task of this engine in flight, each
  // once, in any order.
  void ClientsInFlight(std::vector<std::string>* out) const;
  // The task `task_id` if it is still open (in flight, uploaded or failed in the current round,
  // or in flight from an earlier FedBuff version), else null.
  const Task* FindTask(const std::string& task_id) const;
  // The round `task_id` belonged to if it was a task of a closed round still remembered.
  std::optional<int64_t> ClosedTaskRound(const std::string& task_id) const;

  // Pins the latest published model to the task (the first call wins) and returns it. With
  // downlink compression, `held` (the model the client says it holds; null = none) decides
  // whether the download is a delta chain from it (ShadowChain::PlanDownload; Task::blob is then
  // the chain, and download_bytes its size).
  // Errors: NOT_FOUND (unknown task), PERMISSION_DENIED (another client's task),
  // FAILED_PRECONDITION (failed task, or closed round).
  [[nodiscard]] absl::StatusOr<const Task*> PinModel(ClientIndex index, const std::string& task_id,
                                                     const v1::HeldModel* held = nullptr);

  // The checks of an update that need the round's state: task known (NOT_FOUND; the caller may
  // then look up receipts for ALREADY_EXISTS), a closed round's task (FAILED_PRECONDITION "late
  // update"), this client's (PERMISSION_DENIED), not uploaded (ALREADY_EXISTS) or failed
  // (FAILED_PRECONDITION), the round it names (FAILED_PRECONDITION), examples at most the
  // task's local_steps x batch_size (INVALID_ARGUMENT), room under first-K closing
  // (FAILED_PRECONDITION "straggler"), no overflow of the round's example count. `pending` is
  // the number of updates checked but not yet folded, and `pending_examples` their examples
  // (both count against the first-K cap and the overflow check). Under
  // aggregation.stale_updates a straggler's task of an earlier committed round is checked by
  // CheckLateUpdate instead (its round, its examples, max_rounds_late, max_held). `reason`, when
  // given, is set to the RejectReason of an error (kTask, kLate or kExamples; meaningless when
  // OK).
  [[nodiscard]] absl::Status CheckUpdate(const UpdateClaim& claim, int32_t pending = 0,
                                         int64_t pending_examples = 0,
                                         RejectReason* reason = nullptr) const;

  // Folds updates that passed CheckUpdate with one Aggregator::AccumulateBatch call, in order.
  // Returns one verdict per update: OK (accepted: receipt, audit copy, planner feedback) or the
  // aggregator's INVALID_ARGUMENT (non-finite value, wrong shape: nothing changed for it).
  // Re-checks each claim first (a verdict can be a CheckUpdate error). Every refused update goes
  // through RefuseUpdate (counted; a refused update's task fails). A straggler's late update
  // (aggregation.stale_updates) is not folded here but held for the next Close (HoldLateUpdate,
  // docs/ALGORITHMS.md §6.3). Does not close the round: call Advance.
  std::vector<absl::Status> FoldUpdates(absl::Span<const Update> updates);

  // Hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical aggregation"): folds an
  // aggregator's partial sum of several updates, all or nothing. `entries` are the updates'
  // claims and facts without deltas (Update::delta null); `weighted_sum` is
  // sum_k n_k c_k d_k over them (Aggregator::TakePartialSum) and `total_examples` sum_k n_k.
  // Each entry is checked as CheckUpdate does, except that under first-K the partial sum is
  // taken whole when the round had room for at least one more update (so a round may close with
  // more than K updates), then the sum is folded with Aggregator::AccumulatePartial and every
  // entry gets its receipt and planner feedback as if folded alone. Does not close the round:
  // call Advance. Bounded influence (influence.h): the sum's L2 norm must be at most
  // UpdateNormBound(config) x total_examples (each entry's examples are within its task's plan
  // by CheckUpdate), and each entry's examples count as its weight toward the round's
  // max_client_weight_share (the raised denominator at Close). Errors: the first entry's
  // CheckUpdate error (naming its task), a repeated task, INVALID_ARGUMENT when total_examples
  // is not the entries' sum, when the norm exceeds the bound (naming both), or under FedBuff or
  // audit_updates (they need each delta), and the aggregator's errors; nothing changes then.
  [[nodiscard]] absl::Status FoldPartial(absl::Span<const Update> entries,
                                         const v1::Model& weighted_sum, int64_t total_examples);

  // The client gave up its task, or the caller knows it is lost (the simulator: the device went
  // offline). Errors: NOT_FOUND (no open task of this client with that id). No-op for a task
  // that is not in flight.
  [[nodiscard]] absl::Status FailTask(ClientIndex index, const std::string& task_id, double now_s,
                                      const std::string& why);
  // As FailTask, for a task that failed out of memory on its device (docs/ALGORITHMS.md §8):
  // counted in the round record's oom_failures, and `peak_bytes` (what the task needed, as the
  // device accounted it; 0 = unknown) trains the planner's memory predictor.
  [[nodiscard]] absl::Status FailTaskOutOfMemory(ClientIndex index, const std::string& task_id,
                                                 double now_s, int64_t peak_bytes);

  // The caller has persisted version `version` (or the initial model, version 0), whose global
  // model is `model` (ClosedRound::commit.model, or model() for version 0), and serves it as
  // `blob` (null in the simulator). Later pins get it; a synchronous round is planned only once
  // the last committed version is published. With downlink compression the shadow chain moves
  // to `version` here (ShadowChain::Advance; a failed step restarts the chain at `model`, and
  // devices then download it whole), and downloads serve the shadow instead of `blob`.
  // Errors: FAILED_PRECONDITION for a version not in
  // (published_version(), version()]; INVALID_ARGUMENT for a null model.
  [[nodiscard]] absl::Status Publish(int64_t version, std::shared_ptr<const v1::Model> model,
                                     std::shared_ptr<const ModelBlob> blob);

  // Secure aggregation (docs/guides/SECURE_AGGREGATION.md "Over the wire"): applies the step
  // message of `request` (advertise, share keys or unmask; none = only asking) from client `index`
  // for its task, then returns what the client is owed next: its next step's input, `done`, or
  // retry_after_ms. The masked input itself arrives through FoldUpdates (Update::masked).
  // A task of a round that has closed gets `done`. Errors: NOT_FOUND (unknown task),
  // PERMISSION_DENIED (another client's task, or a message naming another sender),
  // FAILED_PRECONDITION (the task is not in a secure-aggregation round, the step is not open,
  // or the client was dropped at an earlier step), the protocol's INVALID_ARGUMENT; a refused
  // step message fails the task (the client counts as dropped). Call Advance afterwards: the
  // last member's message closes a step.
  [[nodiscard]] absl::StatusOr<v1::SecAggStepResponse> SecAggStep(
      ClientIndex index, const v1::SecAggStepRequest& request, double now_s);
  // The open secure-aggregation round, or null (off, no round open, or FedBuff).
  const SecAggRound* secagg() const { return secagg_.get(); }
  // When Advance must next be called for a secure-aggregation step to close on time (caller's
  // seconds; +infinity when none is open). The simulator schedules a wake-up for it.
  double secagg_deadline_s() const;

  // An upload refused, by the engine's checks or before them (the caller's session, metric,
  // payload and norm checks), the one place refusals are counted: in the open round's record
  // (updates_rejected, rejected_by_reason; nothing while no round is open) and in the notes
  // TakeRefusals returns. When the update itself was refused (RefusalFailsTask) and `claim`
  // (null when the sender is unknown) names an in-flight task of its sender outside secure
  // aggregation, the task fails with `why` (TaskFailureNote reason "update refused (<reason>):
  // <why>"): its client is not asked for it again, counts a failure (ProfileBook failure
  // penalty), and is not tasked again in this round (RetaskFailedSlots gives the slot to
  // another client). Under secure aggregation the protocol's own dropout handling applies.
  // Returns true when the task failed (call Advance: the round may close or re-task the slot).
  bool RefuseUpdate(const UpdateClaim* claim, RejectReason reason, double now_s,
                    absl::string_view why);
  // Refusals since the last call, in order (at most the newest 4096).
  std::vector<RefusalNote> TakeRefusals();

  // Collapse guard (docs/guides/SECURITY.md "Updates"): the verdict on the test-set evaluation of
  // the model the last Advance committed (`accuracy` a fraction in [0, 1], `loss` the mean
  // cross-entropy). OK, and the accuracy joins the best of the run so far; or
  // FAILED_PRECONDITION naming the rule: a non-finite accuracy or loss, or an accuracy more than
  // security.max_accuracy_drop (default kDefaultMaxAccuracyDrop) below the reference's best
  // accuracy (the initial model's, then the best accepted since; guard_reference()). Without a
  // reference (no initial evaluation) the first accepted accuracy starts it. On an error call
  // RevertClose.
  [[nodiscard]] absl::Status ScreenEvaluation(double accuracy, double loss);
  // The collapse guard's reference from before round 1: the test evaluation of the initial
  // model (version 0), to be called before the first round is published. Sets the initial and
  // best accuracy unless a reference exists already (restored, or set before: then a no-op).
  // Errors: INVALID_ARGUMENT for an accuracy outside [0, 1] or a non-finite loss.
  [[nodiscard]] absl::Status SetInitialEvaluation(double accuracy, double loss);
  // The reference to persist with each commit (RunMeta.collapse_guard), nullopt while none.
  std::optional<v1::CollapseGuardReference> guard_reference() const;
  // Takes back the last committed round before it is published (synchronous rounds only): the
  // model, version and optimiser state from before it come back, and the round counts as a
  // failed attempt (re-planned, with the backoff of repeated failures). The updates it folded
  // are dropped. Returns it as a failed round (outcome FAILED, failure_reason `why`).
  // Errors: FAILED_PRECONDITION under FedBuff, or when the latest version is already published
  // or was not closed by this engine.
  [[nodiscard]] absl::StatusOr<ClosedRound> RevertClose(double now_s, const std::string& why);

  // Test-set metrics of a committed model: accuracy a fraction in [0, 1], loss the mean
  // cross-entropy (nats).
  struct Evaluation {
    double accuracy = 0;
    double loss = 0;
  };
  // The collapse guard of a committed round before it is published, the one decision the
  // server and the simulator share (docs/guides/SECURITY.md "Updates"): `closed` is the committed
  // ClosedRound the last Advance returned and `evaluation` its test evaluation (nullopt when it
  // was not evaluated; the caller evaluates). The model must be finite (ValidateModel) and the
  // evaluation pass ScreenEvaluation. Returns nullopt when the round may be published;
  // otherwise the round was taken back (RevertClose: the previous model stays) and is returned
  // as a failed round. Errors: FAILED_PRECONDITION when the round must not be published but
  // cannot be taken back (FedBuff, already published), naming both reasons.
  [[nodiscard]] absl::StatusOr<std::optional<ClosedRound>> GuardCommitted(
      const ClosedRound& closed, std::optional<Evaluation> evaluation);

  // The planner's cache plan for a client expected in the next round (prefetch), or null.
  const v1::CachePlan* PrefetchPlan(ClientIndex index) const;
  // What this job knows of itself and of the devices in its profile book at `now_s` (caller's
  // seconds), for the device-to-job matcher (PlanningGate::Describe; docs/guides/JOBS.md
  // "Scheduling devices across jobs"): K, round deadline, rounds committed and remaining
  // (num_rounds - committed, -1 when num_rounds is 0), the last accepted evaluation's accuracy
  // (GuardCommitted; 0 before one) and EngineOptions::target_accuracy; per live (not retired)
  // client, sorted by client_id: predicted_round_s, the planner's completion-time prediction
  // for this job's task (planner::CandidateEvaluator::Evaluate, the t_s Oort's speed penalty
  // and FedCaSe's deadline fit use, at the job's batch, local steps and published model size);
  // utility, its last reported statistical utility for this job (0 = never reported);
  // availability, the availability oracle's (EngineOptions::availability, else the learned
  // forecast) probability that it is online through now_s + round_deadline_s (through its
  // predicted finish without a deadline; 1 without an oracle); fits, whether some batch fits
  // its declared memory budget (resource fit, docs/guides/RESOURCE_FIT.md; true with fit checks
  // off). Pure (changes nothing, draws nothing). O(clients log clients).
  JobFacts MatchFacts(double now_s) const;
  // Why the last Advance planned nothing (OK when it planned, or had nothing to do), e.g.
  // FAILED_PRECONDITION "waiting for min_online_clients: 3 of 10 reachable".
  const absl::Status& last_plan_status() const { return last_plan_status_; }
  // Reachable clients counted at the last planning attempt.
  int64_t reachable_at_last_plan() const { return reachable_; }

  // Committed rounds (the latest version). Published version <= this.
  int64_t version() const { return versions_->version(); }
  int64_t published_version() const { return versions_->published_version(); }
  // The latest committed global model (the caller must not keep it across calls that commit).
  const std::shared_ptr<const v1::Model>& model() const { return versions_->model(); }
  // The published model (the one new tasks train on).
  const std::shared_ptr<const v1::Model>& published_model() const {
    return versions_->published_model();
  }
  const std::shared_ptr<const ModelBlob>& published_blob() const {
    return versions_->published_blob();
  }
  // The model devices download and train from: the shadow of the published version with
  // downlink compression (shadow_chain.h), else the published model.
  const std::shared_ptr<const v1::Model>& download_model() const {
    return downlink_ != nullptr ? downlink_->shadow() : versions_->published_model();
  }
  // The downlink's shadow chain, or null (downlink not compressed, or nothing published yet).
  const ShadowChain* downlink() const { return downlink_.get(); }
  // True once num_rounds rounds have committed (num_rounds > 0), or the privacy budget is spent
  // (privacy_budget_exhausted()).
  bool finished() const;
  // Differential privacy (PrivacyConfig target_epsilon): one more round would spend more than
  // the budget, so no further round is planned (the run is finished).
  bool privacy_budget_exhausted() const { return budget_exhausted_; }
  // The run's DP state, or null when privacy.mode is NONE.
  const privacy::RoundPrivacy* privacy() const { return privacy_.get(); }
  // A round is open (tasks planned, not yet closed).
  bool running() const { return running_; }
  // The open round's record so far (valid while running()).
  const v1::RoundRecord& current_record() const { return record_; }
  // The round number being planned or run: version() + 1.
  int64_t current_round() const { return version() + 1; }
  // Consecutive failed attempts of the current round.
  int attempts_failed() const { return backoff_.failures(); }
  // After config.replan_backoff_after_failures consecutive failures of a round, the engine
  // plans it again no earlier than this (caller's seconds; 1 s after the N-th failure, doubling
  // per further failure, at most config.replan_backoff_max_s). 0 when not backing off.
  // While it waits, last_plan_status() is FAILED_PRECONDITION "backing off: ..." with the
  // last failure's need vs have.
  double next_plan_s() const { return backoff_.next_plan_s(); }
  // FedBuff staleness of `task`: committed versions since its base model (0 when synchronous).
  int64_t Staleness(const Task& task) const;

  const v1::ServerConfig& config() const { return config_; }
  const profile::ProfileBook& book() const { return *book_; }
  profile::ProfileBook& mutable_book() { return *book_; }
  const planner::Planner& planner() const { return *planner_; }
  // The availability forecast learned from registrations and heartbeats (selection
  // .learned_availability, docs/ALGORITHMS.md §2.2.1): the planner's oracle; null when off or
  // when EngineOptions::availability is given.
  const forecast::AvailabilityForecast* learned_availability() const {
    return learned_availability_.get();
  }
  const Aggregator& aggregator() const { return *aggregator_; }

 private:
  explicit RoundEngine(EngineOptions options);
  [[nodiscard]] absl::Status Init();
  // Downlink compression (engine_downlink.cc): moves the shadow chain to a published version
  // (made at the first call), and sets a task's download at its first pin.
  void PublishDownlink(int64_t version, const v1::Model& model);
  void PinDownload(Task& task, const v1::HeldModel* held);
  // Plans the next round (synchronous) or refills the free slots (FedBuff).
  void Plan(double now_s);
  // selection.learned_availability: ends the sessions of clients silent for longer than the
  // heartbeat timeout (AvailabilityForecast::ExpireUnseen). OK when off.
  [[nodiscard]] absl::Status ExpireLearnedSessions(double now_s);
  void OpenRecord(double now_s, double deadline_s);
  // Closes the open round: commits it, or fails it for re-planning.
  ClosedRound Close(double now_s);
  ClosedRound Fail(double now_s, const std::string& why);
  void FailTaskState(Task& task, double now_s, const std::string& why, int64_t oom_peak_bytes = -1);
  // Counts a failed attempt of the current round (backoff_, the backoff of repeated failures)
  // and fills `out` as its failed ClosedRound with record_.
  void NoteFailedAttempt(double now_s, const std::string& why, ClosedRound* out);
  // Synchronous rounds: gives the slot of each failed task to an idle reachable client (one
  // planner call with max_participants = 1, excluding every client already in the round),
  // within the round's deadline. Returns the number of new tasks.
  int RetaskFailedSlots(double now_s);
  // Appends a planned task of the open round (deadline: the round's) and returns it.
  Task& AddTask(planner::PlannedTask& planned, double now_s);
  // `weight`: what the update weighs in the round's sum (bounded influence, influence_).
  void RecordAccepted(const Update& update, Task& task, int64_t weight);
  // RecordAccepted's audit-trail entry (ServerConfig.audit_updates).
  void AuditAccepted(const Update& update, const Task& task, int64_t weight);
  // Bounded influence (influence.h): the weight cap of the open synchronous round from its
  // tasks' planned examples (influence_), and at Close the raised denominator and the record's
  // max_weight_share / weight_denominator. Errors: the aggregator's.
  void UpdateWeightCap();
  [[nodiscard]] absl::Status BoundRoundInfluence();
  // Whether updates weigh their examples in this run (not under DP, not the robust rules).
  bool ExampleWeighted() const;
  // Forgets tasks that are neither in flight nor of the open round (remembering their ids).
  void RetireTasks(double now_s, bool keep_in_flight);

  // Staleness-aware aggregation (AggregationConfig.stale_updates; docs/ALGORITHMS.md §6.3;
  // late_updates.cc). A straggler of a committed synchronous round that may still upload.
  struct LateTask {
    std::string task_id;
    int64_t round = 0;             // the round it was planned for
    int64_t planned_examples = 0;  // local_steps x batch_size
  };
  // A straggler's update accepted late, held for the next Close: the clipped delta, flat in
  // the model's layout order.
  struct HeldUpdate {
    std::vector<float> delta;
    int64_t num_examples = 0;
    int64_t round = 0;  // the round its task was planned for
    std::string task_id;
  };
  bool StaleUpdatesOn() const { return config_.aggregation().stale_updates().enable(); }
  // The straggler task `claim` names, when stale updates are on and it is this client's.
  const LateTask* FindLateTask(const UpdateClaim& claim) const;
  // CheckUpdate for a straggler's task: the round it names, its examples within the plan, at
  // most max_rounds_late rounds late, room among the held updates.
  [[nodiscard]] absl::Status CheckLateUpdate(const UpdateClaim& claim, const LateTask& late,
                                             RejectReason* why) const;
  // Copies (decodes, checks, clips) a straggler's update that passed CheckLateUpdate and holds
  // it for the next Close; its task can upload no more. Errors: the payload's, naming why.
  [[nodiscard]] absl::Status HoldLateUpdate(const Update& update, RejectReason* why);
  // Commit: the round's stragglers become late tasks (a client's newest replaces its older).
  void NoteLateTasks();
  // Close of a round with fresh updates: folds the held updates with REFL's weights against the
  // fresh mean and records them. Errors: the aggregator's.
  [[nodiscard]] absl::Status FoldHeldUpdates();
  // The closing rule's commit decision for the open round (closing_, record_, deadline_s_).
  bool ShouldClose(double now_s, int outstanding) const;
  // The reachable clients at now_s into scratch_, sorted by index, each once (both callers hand
  // the planner the same list); CollectCandidates also leaves out those kept out of secure
  // aggregation when it is on.
  void CollectReachable(double now_s);
  void CollectCandidates(double now_s);
  // Fills the committed record's means (train loss, cache hit ratio, client evaluation) and
  // marks the synchronous round's stragglers.
  void SummarizeRecord();
  // A planner request for `round` over scratch_ (the sorted candidates), at most
  // `max_participants` tasks (0 = the planner's slot count).
  planner::PlanRequest MakePlanRequest(int64_t round, double now_s, int32_t max_participants) const;
  // Failure penalty (docs/guides/SECURITY.md "Identities and admission"): drops the candidates in
  // scratch_ that sit out a failure cooldown (ProfileBook::InFailureCooldown) when at least `need`
  // others remain; otherwise keeps them all, so a round is never starved by the penalty.
  void LeaveOutFailingClients(double now_s, size_t need);
  // Bounded share of never-proven clients (ProfileBook::IsUnproven; docs/guides/SECURITY.md
  // "Admission control"): keeps in scratch_ at most ceil(security.max_unproven_task_fraction x
  // `slots`) - `tasked` never-proven candidates (`tasked`: never-proven clients already holding
  // a task of the round), chosen by a seeded hash of (round, client) so that the turn rotates.
  // A no-op when fewer than `need` proven or provisioned candidates remain: then never-proven
  // clients may fill the round (bootstrapping a demo whose devices are all admitted on first
  // use). Pure: the same inputs leave the same candidates.
  void LimitUnprovenClients(int64_t round, size_t slots, size_t tasked, size_t need);
  std::string NextTaskId();
  // Appends candidates passed over as "does not fit" to the open round's record, each client
  // once per round.
  void NotePassedOver(std::vector<v1::SelectionReason>& passed_over);
  // Differential privacy: creates privacy_ (when on) and takes its state out of the restored
  // optimiser state (null on a fresh run); the noise on the sum and the fixed
  // denominator just before the aggregator's Finalize; then the accounting into record_ (all
  // no-ops with DP off). Errors: the aggregator's or the accountant's.
  [[nodiscard]] absl::Status InitPrivacy(v1::Model* optimizer_state);
  uint64_t NextNoiseSeed();
  [[nodiscard]] absl::Status PerturbRoundSum(uint64_t seed);
  [[nodiscard]] absl::Status AccountRound(uint64_t seed);
  // The fold weight of an update (differential privacy: 1, uniform; else its examples, at most
  // the round's weight cap, influence_) and whether it counts as unclipped for adaptive
  // clipping.
  int64_t FoldWeight(const Update& update) const;
  void NoteUnclipped(const Update& update);
  // The aggregator's state plus the privacy state (RoundPrivacy::SaveState), as persisted.
  v1::Model SavedOptimizerState() const;
  // The planner's state plus, when selection.learned_availability is on, the learned forecast's
  // (PlannerState.forecast), as persisted with every commit.
  v1::PlannerState SavedPlannerState() const;
  // Init: restores options_.planner_state (non-empty) into the planner and, when the forecast
  // is on and the state has one, into learned_availability_. Errors: DATA_LOSS when it does not
  // parse; the planner's or the forecast's import errors, prefixed with what failed.
  [[nodiscard]] absl::Status RestorePlannerState();
  // Secure aggregation (secagg_engine.cc): opens the protocol over the round just planned;
  // drives its steps from Advance (a closed round when it commits or fails, else nullopt); folds
  // the masked inputs of FoldUpdates (verdicts for updates[positions]); folds the unmasked sum.
  void StartSecAgg(double now_s);
  std::optional<ClosedRound> AdvanceSecAgg(double now_s, int outstanding);
  ClosedRound FailSecAgg(double now_s, const absl::Status& why);
  void FoldMaskedInputs(absl::Span<const Update> updates, absl::Span<const size_t> positions,
                        std::vector<absl::Status>* verdicts);
  [[nodiscard]] absl::Status FoldUnmaskedSum(const SecAggRound::Result& result);
  // Fails the in-flight tasks of members the protocol dropped at a closed step.
  void FailDroppedMembers(double now_s);
  // When the masked inputs close: charges each member whose key shares a neighbour could not
  // authenticate (docs/guides/SECURE_AGGREGATION.md "A malicious member"): its task fails (the
  // failure penalty), its masked input, left out of the sum, leaves the round's record, and
  // with at least two accusers it is kept out of later secure-aggregation cohorts
  // (ProfileBook::ExcludeFromSecAgg, persisted).
  void ChargeUnauthenticated(double now_s);
  std::string NextGraphSeed() const;
  // EngineOptions::model_features with its defaults filled in.
  fit::ModelFeatures ResolveModelFeatures() const;

  EngineOptions options_;
  const v1::ServerConfig& config_;
  const bool async_;
  std::unique_ptr<profile::ProfileBook> book_;
  // selection.learned_availability: fed by Register and Heartbeat, swept at each plan.
  std::unique_ptr<forecast::AvailabilityForecast> learned_availability_;
  double heartbeat_timeout_s_ = 0;
  std::unique_ptr<planner::Planner> planner_;
  std::unique_ptr<Aggregator> aggregator_;

  const ClosingRule closing_;
  // Committed and published global models, FedBuff's versions (created by Init).
  std::unique_ptr<ModelVersions> versions_;
  // Downlink compression: the shadow chain, made at the first Publish (engine_downlink.cc).
  std::unique_ptr<ShadowChain> downlink_;

  bool running_ = false;
  int64_t round_ = 0;
  double deadline_s_ = 0;
  ReplanBackoff backoff_;  // of repeated failures of the current round (next_plan_s())
  int64_t task_serial_ = 0;
  std::map<std::string, Task> tasks_;
  absl::flat_hash_map<ClientIndex, std::string> task_of_;  // client -> in-flight task id
  std::vector<TaskFailureNote> failures_;
  std::vector<RefusalNote> refusals_;      // since the last TakeRefusals
  std::vector<std::string> new_task_ids_;  // planned since the last TakeNewTasks
  v1::RoundRecord record_;
  std::vector<v1::Receipt> receipts_;
  std::vector<v1::AuditedUpdate> audited_;
  double loss_sum_ = 0;
  // Client-side evaluation (EvalConfig.mode CLIENT): example-weighted sums of the reported
  // accuracy and loss, and the examples they cover.
  double eval_accuracy_sum_ = 0;
  double eval_loss_sum_ = 0;
  int64_t eval_examples_ = 0;
  int32_t dropped_stale_ = 0;  // FedBuff tasks dropped as too stale since the last OpenRecord
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  struct ClosedTask {
    int64_t round = 0;
    bool straggler = false;  // still in flight when its round closed
    bool accepted = false;   // its update is in the committed round
  };
  absl::flat_hash_map<std::string, ClosedTask> closed_tasks_;
  absl::flat_hash_map<ClientIndex, LateTask> late_tasks_;  // stale_updates: may still upload
  std::vector<HeldUpdate> held_updates_;                   // stale_updates: for the next Close
  absl::flat_hash_set<std::string> stragglers_;   // scratch of Close
  absl::flat_hash_set<std::string> passed_over_;  // client ids in record_.passed_over
  std::vector<ClientIndex> scratch_;
  absl::flat_hash_map<ClientIndex, v1::CachePlan> prefetch_;
  absl::Status last_plan_status_;
  // The last Plan found the run backing off (PlanningDemand).
  bool backing_off_ = false;
  int64_t reachable_ = 0;
  // Collapse guard: the optimiser state before the last Close (synchronous rounds), so that
  // RevertClose can restore it, and the guard's reference (created by Init).
  v1::Model state_before_close_;
  std::optional<CollapseGuard> guard_;
  // Bounded influence: the open synchronous round's weight cap and largest folded weight.
  RoundInfluence influence_;
  // Differential privacy (null when off), the accepted updates of the open round whose norm was
  // <= the clip norm, and the cached budget verdict.
  std::unique_ptr<privacy::RoundPrivacy> privacy_;
  int64_t dp_unclipped_ = 0;
  bool budget_exhausted_ = false;
  // Secure aggregation: the open round's protocol (null when off or between rounds), why it
  // could not start (the round then fails at the next Advance), and its cohort's task ids.
  std::unique_ptr<SecAggRound> secagg_;
  absl::Status secagg_status_;
  std::vector<std::string> secagg_cohort_;
  // Secure aggregation: the profile feedback of each accepted masked input, held until the round
  // unmasks, so that a member counts as successful only once its input is in a committed sum.
  struct PendingSuccess {
    std::string task_id;
    ClientIndex index = 0;
    int64_t round = 0;
    v1::UpdateMetrics metrics;
    profile::TaskTiming timing;
    double now_s = 0;
    int64_t num_examples = 0;
  };
  std::vector<PendingSuccess> secagg_pending_;
  // Task::utility_noise_stddev of the tasks planned since the last Plan (0 when off).
  double utility_noise_stddev_ = 0;
  // The test accuracy of the last committed round whose evaluation GuardCommitted accepted (0
  // before one), for MatchFacts.
  double last_accuracy_ = 0;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_ENGINE_H_
