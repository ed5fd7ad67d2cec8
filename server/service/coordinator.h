// The round state machine of the coordination server, free of gRPC: the service layer
// (grpc_service.h) turns RPCs into calls here, and a ticker drives time-based transitions.
#ifndef FEDSCHED_SERVER_SERVICE_COORDINATOR_H_
#define FEDSCHED_SERVER_SERVICE_COORDINATOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/aggregation/checks.h"
#include "server/round/checkin_pacer.h"
#include "server/round/engine.h"
#include "server/round/gate_report.h"
#include "server/round/gated_presence.h"
#include "server/round/planning_gate.h"
#include "server/service/device_service.h"
#include "server/service/heartbeat_inbox.h"
#include "server/service/identity_admission.h"
#include "server/service/pace_steering.h"
#include "server/service/parse_targets.h"
#include "server/store/store.h"

namespace fedsched {

// Test-set metrics of a global model.
struct EvalMetrics {
  double accuracy = 0.0;  // fraction in [0, 1]
  double loss = 0.0;      // mean cross-entropy
};

// Evaluates a global model (e.g. on the 10,000 Fashion-MNIST test images). Optional.
using Evaluator = std::function<absl::StatusOr<EvalMetrics>(const v1::Model&)>;

// A serialized global model as downloads serve it.
using ModelBlob = round::ModelBlob;

struct CoordinatorOptions {
  // A config already passed through ResolveServerConfig.
  v1::ServerConfig config;
  // Durable state; not owned, must outlive the coordinator. Required.
  Store* store = nullptr;
  // The model to start from when the store is fresh (ignored on resume).
  v1::Model initial_model;
  // The model's memory features for resource fit (round::EngineOptions::model_features).
  fit::ModelFeatures model_features;
  // Optional test-set evaluation after each committed round.
  Evaluator evaluator;
  // Called (with no lock held) after each round is durably committed, e.g. to print and write
  // metrics.csv, from the thread that ran the commit (see "Commits" below). Rounds arrive in
  // order, one call at a time.
  std::function<void(const v1::RoundRecord&)> on_round_committed;
  // Optional, for operations metrics: a round attempt failed (called with no lock held, from
  // the commit thread) / a task failed with this reason (called under the coordinator's lock:
  // must be cheap and must not call back into the coordinator).
  std::function<void(const v1::RoundRecord&)> on_round_failed;
  std::function<void(const std::string& reason)> on_task_failed;
  // Optional, for operations metrics: an upload was refused, `reason` its
  // round::RejectReasonName ("norm_median", ...). Called under the coordinator's lock, like
  // on_task_failed.
  std::function<void(const std::string& reason)> on_update_rejected;
  // The wall clock, for the commits' follow-up planning and GetStatus. Default: absl::Now.
  // Tests pass a fake clock.
  std::function<absl::Time()> clock;
  // Task ids "t<round>-<n>" (the engine's deterministic default) instead of unguessable ones.
  // For tests that compare runs only: never in a server. Default: false.
  bool deterministic_task_ids = false;
  // Optional forecast of who stays online, for the planner (e.g. a learned availability
  // pattern; the simulator passes its trace). Not owned; null = every candidate is assumed to
  // stay online.
  const planner::AvailabilityOracle* availability = nullptr;
  // The enrolment key (config.security.enrolment_key_path's contents). Empty: only client
  // certificates prove identities, or (config.security.allow_trust_on_first_use) credentials
  // are issued at first registration (docs/guides/SECURITY.md).
  std::string enrolment_key;
  // The job this coordinator runs when a job host runs several (docs/guides/JOBS.md): its logs then
  // say "job <name> round N ...", and GetStatusOf answers requests naming it. Default: empty
  // (one run; the logs say "round N ...").
  std::string job_name;
  // The job's view of a fleet shared with other jobs (docs/guides/JOBS.md "Matching devices to
  // jobs"): a device without a task of this coordinator is reachable only when
  // planning_gate->MayPlan says so, and every engine advance is reported with Settle. Not
  // owned; must outlive the coordinator. Default: null (the fleet is this run's alone).
  round::PlanningGate* planning_gate = nullptr;
  // The job's target test accuracy (JobSpec.target_accuracy; round::EngineOptions::
  // target_accuracy), which the job's facts report to the device-to-job matcher. 0 = none.
  double target_accuracy = 0;
};

// The coordinator: the server's side of the round engine (server/round, docs/ARCHITECTURE.md
// "The round engine" and "An upload's path"). It owns sessions (tokens, certificate binding),
// upload ingest (metric checks, digests, parsing into recycled models, flat combining) and the
// commits; the round itself (planning, tasks, closing, FedBuff, folds) is the engine's. Its parts
// with a responsibility of their own are classes it owns: IdentityAdmission and
// RegistrationRateLimit (identity_admission.h), HeartbeatInbox (heartbeat_inbox.h),
// PaceSteering (pace_steering.h) and ParseTargetPool (parse_targets.h).
//
// Thread-safe: every public method may be called concurrently (one internal mutex around the
// engine; SubmitUpdate hashes and parses outside it, and uploads that wait for it are folded
// together, see SubmitUpdate). Time is always passed in (`now`), so tests drive it with a fake
// clock; the commits' follow-up uses options.clock.
//
// Commits: a round the engine closes is queued, and the thread that closed it (Tick's, or the
// upload's that filled a FedBuff buffer) then evaluates it, commits it to the store, serialises
// and publishes the new model with the engine lock RELEASED, so other uploads and polls go on
// meanwhile. Commits run one at a time in round order (a thread that finds another committing
// leaves its round to that thread). A synchronous round is planned once the previous one is
// published. A store commit that still fails after retries makes health() non-OK: the server
// stops (a restart resumes at the last durable round).
//
// Legal order per client: Register -> PollTask -> ModelForTask -> SubmitUpdate | ReportFailure.
// Errors common to the session methods: UNAUTHENTICATED for an unknown client id or a token
// that does not match its current session (after a server restart clients re-register).
// It is the DeviceService of a server of one run; a job host (server/fleet/job_host.h) runs
// one per job and routes device calls to it.
class Coordinator : public DeviceService {
 public:
  // Opens the run: resumes at the round after the last committed one, or initialises the store
  // with `options.initial_model`. Errors: INVALID_ARGUMENT (missing store), whatever the store or
  // the aggregator return (e.g. DATA_LOSS on a corrupt store).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Coordinator>> Create(
      CoordinatorOptions options);
  ~Coordinator() override;
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // With ServerConfig.checkpoint_every_rounds > 1: makes the rounds committed since the last
  // checkpoint durable now (one store commit of the latest model, with their records, receipts
  // and profiles). Called on a clean shutdown; a no-op when everything is durable. Errors: the
  // store's (the rounds then stay pending). Call without holding other coordinator locks.
  [[nodiscard]] absl::Status WriteCheckpoint() ABSL_LOCKS_EXCLUDED(mu_, commit_mu_);

  // Registers a device (or re-registers it: the same identity keeps its client id and profile
  // and is selectable again at once). Starts a new session. Errors: INVALID_ARGUMENT for an
  // empty identity, negative device figures or num_samples above security.max_num_samples;
  // UNAUTHENTICATED when request.credential is not the identity's enrolment secret (with an
  // enrolment key) or there is neither a key nor a certificate, unless
  // security.allow_trust_on_first_use; PERMISSION_DENIED when the identity is bound to another
  // credential or certificate; RESOURCE_EXHAUSTED for a new identity beyond
  // security.max_identities, or an unprovisioned one beyond max_unproven_identity_fraction of
  // it. With trust on first use, a registration without an enrolment secret or certificate is
  // issued a random credential (response.credential) that every later registration must
  // present, and an enrolment secret takes over an identity held on first use.
  // `cert_fingerprint` is the SHA-256 of the client's TLS certificate under mutual TLS ("" when
  // TLS is off): the first certificate seen for an identity is bound to it, and a later
  // registration of that identity with another (or no) certificate is PERMISSION_DENIED.
  // `peer_address` is the caller's network address without the port (PeerAddress in
  // grpc_service.h; "" = unknown): at most security.max_new_identities_per_peer_per_minute new
  // identities per address and security.max_new_identities_per_minute from all peers in any
  // minute, RESOURCE_EXHAUSTED beyond (re-registrations of known identities are not limited).
  // An identity the operator revoked (Store::LoadRevocations, read at start) is
  // PERMISSION_DENIED whatever it presents, before any other check; it never gets a session, so
  // it is never reachable and never planned.
  // An identity that never had an update accepted and is not heard from for
  // security.unseen_identity_ttl_s is forgotten by Tick (its session ends, its stored profile is
  // deleted); registering it again makes a new client.
  [[nodiscard]] absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Time now, const std::string& cert_fingerprint,
      const std::string& peer_address) override;
  // As above, from an unknown peer address (and without a certificate unless given).
  [[nodiscard]] absl::StatusOr<v1::RegisterResponse> Register(
      const v1::RegisterRequest& request, absl::Time now,
      const std::string& cert_fingerprint = "") {
    return Register(request, now, cert_fingerprint, /*peer_address=*/"");
  }

  // Registers a device that another coordinator of the same fleet (the job host's admitting
  // one, docs/guides/JOBS.md) has admitted: no credential, certificate, revocation or rate-limit
  // check, and the admitting coordinator's `client_id` and `session_token`, so that a device
  // has one client id and one session token for every job. The profile is keyed by
  // `client_id` (a re-registration of the same identity keeps its profile; an identity known
  // here under an older client id takes the new one), the request's signing key is bound to
  // it (replacing another: the admitting coordinator checked it), and the device figures are
  // validated as Register does. Starts a new session with `session_token`. Returns what
  // Register would (client id, token, heartbeat interval, transport; never a credential).
  // Errors: INVALID_ARGUMENT for an empty or over-long identity, an empty client id or session
  // token, bad device figures (as Register), a signing key that is not 32 bytes, or a client id
  // that names another identity here.
  [[nodiscard]] absl::StatusOr<v1::RegisterResponse> RegisterAdmitted(
      const v1::RegisterRequest& request, const std::string& client_id,
      const std::string& session_token, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Marks the client online. Returns the current round (as of the last time the engine
  // advanced). Never waits for the coordinator's lock: the session is checked
  // against a copy of the tokens under a small lock of its own, and the heartbeat is recorded
  // like transfer progress (NoteActivity), folded in at once when the lock is free, else at the
  // next Tick. A heartbeat therefore never queues behind an update being folded, a round being
  // planned or a commit's bookkeeping. Errors: UNAUTHENTICATED (no such session).
  [[nodiscard]] absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request,
                                                                absl::Time now) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // The client's task for the current round, or retry_after_ms (also before the first round is
  // planned), or finished once num_rounds have committed. Counts as a heartbeat.
  [[nodiscard]] absl::StatusOr<v1::PollTaskResponse> PollTask(const v1::PollTaskRequest& request,
                                                              absl::Time now) override;

  // The serialized model for `task_id`: the task's download (a delta chain when PollTask
  // announced one, Task.downlink_delta), or with `whole_model` the whole model the chain
  // rebuilds. Errors: NOT_FOUND (unknown task), PERMISSION_DENIED (another client's task),
  // FAILED_PRECONDITION (the task's round has closed).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const ModelBlob>> ModelForTask(
      const std::string& client_id, const std::string& token, const std::string& task_id,
      bool whole_model, absl::Time now) override;

  // Validates and folds in an update (a serialized v1::Model delta = trained - downloaded).
  // Checks, in order: session; task exists (NOT_FOUND), belongs to this client
  // (PERMISSION_DENIED), is for the current, open round (FAILED_PRECONDITION "late update"), not
  // already uploaded (ALREADY_EXISTS); under first-K closing, the round does not already have
  // its K updates (FAILED_PRECONDITION: a straggler); header.round matches; num_examples is at
  // most the task's local_steps x batch_size and the metrics are finite and in range;
  // num_examples > 0; declared size and SHA-256 match the payload; payload parses; shapes equal
  // the global model's and every value is finite (INVALID_ARGUMENT naming the tensor); the norm
  // screens (UpdateNormScreen, INVALID_ARGUMENT naming the norm and the bound). Every refusal is
  // counted with its reason (RoundEngine::RefuseUpdate: the round record, on_update_rejected,
  // the log); a refusal of the update itself (examples, metrics, payload, validation, norms)
  // fails its task, which is not handed out again. A rejected update changes nothing else.
  // Hashing and parsing happen before the coordinator's lock is taken.
  // `upload_seconds` is how long the upload stream took, as measured by the service (0 = not
  // measured); it feeds the client's upload bandwidth.
  //
  // Concurrency (flat combining): a parsed update joins a queue, and whichever submitting thread
  // next takes the coordinator's lock checks every queued update in queue order (the order in
  // which their parsing finished) and folds the accepted ones with one
  // Aggregator::AccumulateBatch call (a few passes over the running sum instead of one per
  // update; RoundRecord.aggregation_calls counts the calls). Verdicts, the committed model (bit
  // for bit), receipts, accept order and all bookkeeping are exactly those of processing the
  // queued updates one at a time in queue order: a check that depends on earlier updates of the
  // group (the same task twice, the first-K cap, the example count) is answered after folding
  // those. Memory: nothing is copied; each thread's parsed delta is held until its group has
  // been folded, then recycled. A call returns only after its own update has been decided.
  //
  // FedBuff (aggregation.async_fedbuff): tasks of earlier versions stay valid; an update is
  // folded with staleness = committed versions since its model was downloaded (weight
  // 1 / sqrt(1 + staleness), FAILED_PRECONDITION past max_staleness), and the update that fills
  // the buffer (K) commits the version before this call returns (on_round_committed is called
  // from this thread, after the lock is released) and opens the next one.
  [[nodiscard]] absl::Status SubmitUpdate(const v1::UploadHeader& header,
                                          const std::string& payload, absl::Time now,
                                          double upload_seconds = 0);

  // The checks of SubmitUpdate that need no payload, for an upload whose header has arrived and
  // whose payload has not: metrics, session, task (exists, this client's, not uploaded or
  // failed, for the current round), claimed examples, and under first-K closing room for one more
  // update. Same errors as SubmitUpdate. The upload service calls it on the header, so that a
  // straggler or a late upload is refused before it sends its model. OK does not promise
  // acceptance: the round moves on while the payload streams, and SubmitUpdate checks again.
  // A refusal is counted as SubmitUpdate's are (RoundEngine::RefuseUpdate; absurd metrics or
  // examples fail the task) at `now`.
  [[nodiscard]] absl::Status CheckUploadHeader(const v1::UploadHeader& header,
                                               absl::Time now) override ABSL_LOCKS_EXCLUDED(mu_);

  // Counts an upload stream the upload service refused before its payload reached
  // SubmitUpdate (frames out of order, sizes or counts that disagree with its header, a payload
  // over max_update_bytes) as a `payload` refusal in the open round's record, metrics and log
  // (RoundEngine::RefuseUpdate without a claim: no task is touched, since a broken stream says
  // nothing certain about whose task it was). Returns `status`. Takes the lock: not from a gRPC
  // callback thread.
  [[nodiscard]] absl::Status RefuseUploadStream(absl::Status status, absl::Time now) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // As above, with the payload in pieces (e.g. the chunks of an upload stream, see
  // UploadAssembler) whose concatenation is the serialized delta; nothing is concatenated.
  // `payload_parsed`, when set, is called (on this thread, before the verdict) once the pieces
  // are no longer read: after parsing, unless audit_updates stores them or secure aggregation
  // is on (then never). The caller may free them then, e.g. to admit the next upload (peak RSS).
  [[nodiscard]] absl::Status SubmitUpdate(const v1::UploadHeader& header,
                                          absl::Span<const std::string_view> payload_pieces,
                                          absl::Time now, double upload_seconds,
                                          absl::AnyInvocable<void()> payload_parsed) override;
  // As above, with nothing to call once the pieces are parsed.
  [[nodiscard]] absl::Status SubmitUpdate(const v1::UploadHeader& header,
                                          absl::Span<const std::string_view> payload_pieces,
                                          absl::Time now, double upload_seconds = 0) {
    return SubmitUpdate(header, payload_pieces, now, upload_seconds, nullptr);
  }

  // Hierarchical aggregation (docs/ARCHITECTURE.md "Hierarchical aggregation"; root role only):
  // folds an aggregator's partial sum of its devices' updates for one round, all or nothing.
  // Every entry's session is checked (UNAUTHENTICATED naming the client) and its metrics as
  // SubmitUpdate's; then RoundEngine::FoldPartial (its errors). The sum must parse as a Model
  // (INVALID_ARGUMENT). A first-K round the sum fills closes and commits before this returns.
  // Errors also: FAILED_PRECONDITION when this server is not a root (hierarchy.role).
  [[nodiscard]] absl::Status SubmitPartialSum(const v1::PartialSum& partial,
                                              absl::Time now) override ABSL_LOCKS_EXCLUDED(mu_);

  // Secure aggregation (docs/guides/SECURE_AGGREGATION.md "Over the wire"): one SecAggStep RPC, the
  // step message of a participant and what it is owed next (round::RoundEngine::SecAggStep).
  // The step that the last member's message completes closes at once, and an unmask response
  // that completes the round commits it before this returns. Errors: UNAUTHENTICATED (session)
  // and those of RoundEngine::SecAggStep.
  [[nodiscard]] absl::StatusOr<v1::SecAggStepResponse> SecAggStep(
      const v1::SecAggStepRequest& request, absl::Time now) override ABSL_LOCKS_EXCLUDED(mu_);

  // The client gives up its task (e.g. out of battery). The round goes on without it.
  [[nodiscard]] absl::Status ReportFailure(const v1::ReportFailureRequest& request,
                                           absl::Time now) override;

  // Operator view: counts, the last `recent_rounds` round records (<= 0: 5) and one
  // ClientSummary per live client; with include_clients false, only for the clients secure
  // aggregation excludes (ClientProfile.secagg_excluded), so that a fleet of a million devices
  // costs a status call O(clients) time but not O(clients) bytes. The list is cut, in client
  // order, to 7/8 of the transport's max_message_bytes (about 80,000 clients at its 16 MiB
  // default); the excluded clients come past the cut too. clients_size() < registered_clients
  // tells a cut list.
  v1::GetStatusResponse GetStatus(int recent_rounds, bool include_clients = true) const;
  // GetStatus(request.recent_rounds, !request.omit_clients) when request.job is "" or this
  // coordinator's job_name. Errors: NOT_FOUND "no job named X" for another job.
  [[nodiscard]] absl::StatusOr<v1::GetStatusResponse> GetStatusOf(
      const v1::GetStatusRequest& request) const override;

  // Time-driven transitions: marks clients offline after missed heartbeats (failing their tasks),
  // plans a round when enough clients are online, and closes the current round when K updates
  // are in or its deadline has passed (committing it if it has min_updates, else failing and
  // re-planning it). Call periodically (the server ticks every 50 ms).
  void Tick(absl::Time now);
  // Jobs sharing a fleet: reports what this job holds and asks for, and when due what it knows,
  // to its planning gate without advancing the engine (round::ReportToGate), so that the
  // ledger's next Rematch sees every job as it is now; the job host calls it for every job
  // before each Rematch, as the simulator does (docs/guides/JOBS.md "Scheduling devices across
  // jobs"). No-op without a gate.
  void ReportToGate(absl::Time now);

  // Progress on a transfer stream of `client_id` (a download chunk written, an upload chunk
  // read): counts as a heartbeat at the next Tick, so a client busy moving a big model is never
  // failed for missed heartbeats. Cheap: takes only a small lock of its own, never the
  // coordinator's. Call only for a client whose session was checked.
  void NoteActivity(const std::string& client_id, absl::Time now) override;

  // Pace steering (config.pacing; Bonawitz et al., SysML 2019, section 2.3; docs/ALGORITHMS.md
  // "Pace steering"): the retry_after_ms for `client_id`'s idle poll that is being answered
  // now, without a task. While the available population is no larger than the pool the pacer
  // wants, returns `unpaced_ms` and changes nothing. Otherwise returns a delay drawn by
  // round::CheckInPacer (seconds to minutes, spread so check-ins do not come in waves) and marks
  // the client away until then (ProfileBook::SetAwayUntil: no candidate, still available) until
  // its next poll. A client with a task, or without a session, gets `unpaced_ms`.
  // Thread-safe; takes the coordinator's lock.
  int64_t PaceIdleRetryMs(const std::string& client_id, absl::Time now, int64_t unpaced_ms) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Pace steering: how many long polls the service should hold at once. While the population
  // is paced, the pool (round::PacerOptions::pool): a device that checks in while that many are
  // held is answered at once and sent away (PaceIdleRetryMs), so a storm of check-ins (a fleet
  // registering at once) does not pile up held polls and heartbeats. Otherwise unlimited
  // (INT64_MAX). Lock-free (updated once a second by Tick).
  int64_t CheckInHoldLimit() const override { return hold_limit_.load(std::memory_order_relaxed); }
  // The longest hold of a long poll (HeldPollsOptions::max_wait), which the pacer's cycle is
  // built on. Default: 5 s. Must be > 0 (else ignored). Called by the service at start.
  void SetCheckInHold(absl::Duration hold) override ABSL_LOCKS_EXCLUDED(mu_);

  // Sets the function called (with the coordinator's lock held: it must only signal, e.g.
  // HeldPolls::Wake) when a poll's answer may have changed: tasks were planned, a round was
  // published, the run finished. Null = none. The service sets it (long polls).
  void SetTaskListener(std::function<void()> listener) override ABSL_LOCKS_EXCLUDED(mu_);

  // True once num_rounds rounds have committed durably.
  bool finished() const;
  // Clients with a session in this server's life, heard from (heartbeat, poll, transfer,
  // registration) within `heard_within` before `now`, that have not yet been answered "finished"
  // by PollTask. The server keeps serving after the run ends until this is 0 (or a cap passes),
  // so that a client busy training, backing off or briefly starved of CPU when the last round
  // commits still learns the run is over instead of retrying a vanished server forever
  // (docs/reports/RELIABILITY.md §4). `heard_within` is deliberately longer than the heartbeat
  // timeout: a client that missed a few heartbeats under load is still coming back.
  int ClientsAwaitingFinish(absl::Time now, absl::Duration heard_within) const;
  // Registered clients and those heard from within the heartbeat timeout at `now` (cheap: no
  // per-client output, unlike GetStatus).
  struct ClientCounts {
    int64_t registered = 0;
    int64_t online = 0;
  };
  ClientCounts CountClients(absl::Time now) const;
  // The last durably committed round (0 = initial model).
  int64_t committed_round() const;
  // OK unless a commit failed for good (the server must stop; its store holds every round
  // committed before).
  [[nodiscard]] absl::Status health() const;
  // The largest accepted upload payload, bytes (for early rejection of absurd declared sizes).
  int64_t max_update_bytes() const override;
  // The serialized global model's size in bytes (as of Open; the architecture never changes).
  int64_t model_bytes() const { return model_bytes_; }
  // Bounds the updates parsed at once (each into a model-sized parse target) to
  // max(1, bytes / model_bytes()), as the receive gate bounds the uploads receiving at once
  // (fedsched-server passes the gate's budget): an upload received while another is still
  // parsed or folded waits for its parse target instead of allocating a second one
  // (server peak RSS). bytes <= 0: no bound (the default). Call before serving.
  void SetParseTargetBudget(int64_t bytes);

  // Shared system profile (docs/guides/JOBS.md): for each of `client_ids` known here (unknown ones
  // are left out), a ClientProfile holding only its client_id and system fields
  // (compute_ms_per_sample, upload_kbps, download_kbps, availability, measured_tasks).
  std::vector<v1::ClientProfile> SystemProfiles(absl::Span<const std::string> client_ids) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Copies those system fields of each profile into the profile of the same client id here
  // (ProfileBook::AdoptSystemFields; persisted with the next commit); unknown client ids and
  // profiles with bad figures (logged) are ignored. What is per job (statistical utility,
  // experience, cache plans, selection history) stays.
  void AdoptSystemProfiles(absl::Span<const v1::ClientProfile> profiles) ABSL_LOCKS_EXCLUDED(mu_);
  // True once differential privacy's budget is spent (privacy.target_epsilon): the run has
  // finished for that reason (finished() once its last round is durable).
  bool privacy_budget_exhausted() const ABSL_LOCKS_EXCLUDED(mu_);

  // The identities the operator revoked (fedsched-enroll --revoke_identity), as read from the
  // store at start, sorted. Revocations change only while the server is stopped.
  std::vector<std::string> revoked_identities() const;

 private:
  class SessionPresence;
  struct ClientState {
    std::string session_token;
    // Polled at least once in this session. While pace steering is on, only such devices are
    // candidates (checked in): a device whose registration answer is still on its way in a
    // storm of check-ins cannot hear of a task (docs/ALGORITHMS.md §2.6).
    bool checked_in = false;
  };

  explicit Coordinator(CoordinatorOptions options);
  [[nodiscard]] absl::Status Open();
  // Open's two starts: a fresh store is initialised with options_.initial_model (and the
  // collapse guard's reference from its evaluation); a stored run is loaded (model, profiles,
  // planner and optimiser state, guard reference) after checking that the configured model has
  // the stored one's architecture. Both fill `*engine`. Errors: INVALID_ARGUMENT (fresh store
  // without an initial model), FAILED_PRECONDITION (another architecture), the store's.
  [[nodiscard]] absl::Status InitializeStore(round::EngineOptions* engine);
  [[nodiscard]] absl::Status LoadStoredRun(const v1::RunMeta& meta, round::EngineOptions* engine);
  // Unguessable task ids and unpredictable seeds of the differential-privacy noise and the
  // secure-aggregation graph (OpenSSL's RAND_bytes), instead of the engine's seeded defaults.
  void UseSecureRandomness(round::EngineOptions* engine);
  absl::Time Now() const { return options_.clock(); }
  // The client's index in the profile book. Errors: UNAUTHENTICATED (no such session).
  [[nodiscard]] absl::StatusOr<profile::ClientIndex> CheckSession(const std::string& client_id,
                                                                  const std::string& token) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The signing key a registration presents (RegisterRequest.signing_public_key) against the
  // key `bound` to its identity (ClientProfile.signing_public_key, "" when none): none or 32
  // bytes (else INVALID_ARGUMENT), and not another than the bound one (PERMISSION_DENIED naming
  // the operator's recovery, fedsched-enroll --reset_identity). No lock needed.
  [[nodiscard]] static absl::Status CheckSigningKey(const v1::RegisterRequest& request,
                                                    absl::string_view bound);
  // A registration's identity: 1..256 bytes (else INVALID_ARGUMENT). No lock needed.
  [[nodiscard]] static absl::Status CheckIdentityName(const std::string& identity);
  // A registration's device figures: none negative or non-finite, num_samples within
  // security.max_num_samples (else INVALID_ARGUMENT saying which). No lock needed.
  [[nodiscard]] absl::Status CheckDeviceFigures(const v1::DeviceProfile& device) const;
  // Starts the session `session_token` of the registered client `index` (persisting its
  // profile) and returns the registration's answer (no credential).
  v1::RegisterResponse StartSessionLocked(profile::ClientIndex index, std::string session_token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Identity expiry (security.unseen_identity_ttl_s, docs/guides/SECURITY.md "Identities and
  // admission"): at most every min(10 s, ttl / 10), forgets the identities
  // RoundEngine::RetireUnseen retires, ends their sessions and deletes their stored profiles.
  void ExpireUnseenLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends `client_id`'s session (its token and session state): its next RPC is UNAUTHENTICATED
  // and it is unreachable until it registers again. No-op for an unknown id.
  void EndSessionLocked(const std::string& client_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Advances the engine and queues the rounds it closed for commit; logs plans and waits.
  void AdvanceLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports what this job holds to the planning gate (PlanningGate::Settle), if there is one,
  // and what it knows when due (round::ReportToGate: Describe).
  void SettleGateLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogNewTasks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LogTaskFailures() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports the engine's refusals (RoundEngine::TakeRefusals): on_update_rejected, and a warning
  // per reason at most every 10 s (the others at debug level, counted in the next warning).
  void LogRefusals(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts an upload refused outside the engine's checks (metrics, payload, norm screens) with
  // `reason` (RoundEngine::RefuseUpdate: its task fails when the sender's session and claim
  // check out), and returns `status`.
  [[nodiscard]] absl::Status RefuseUpload(const v1::UploadHeader& header,
                                          round::RejectReason reason, absl::Status status,
                                          absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // RefuseUpload's part under the lock.
  void RefuseUploadLocked(const v1::UploadHeader& header, round::RejectReason reason,
                          const absl::Status& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the queued commits in order unless another thread is running them (coordinator_commit.cc).
  void DrainCommits() ABSL_LOCKS_EXCLUDED(mu_, commit_mu_);
  // Evaluates, persists and publishes one closed round (no lock held but commit_mu_).
  void RunCommit(round::ClosedRound closed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // RunCommit's steps. EvaluateCommitted: the test evaluation of round `round`'s `model` into
  // `record` when the evaluator is due (every eval.every_n_rounds); false when not evaluated
  // (none due, or it failed: logged). StoreCommit: merges the rounds pending since the last
  // checkpoint into `commit` and writes it when it is due (checkpoint_every_rounds, or the
  // run's last round), retrying; true when written, false when left pending; errors: the
  // store's after the last attempt. PublishCommitted: publishes the committed model as `blob`,
  // marks it durable, plans the next round as of the close and wakes held polls.
  bool EvaluateCommitted(int64_t round, const v1::Model& model, v1::RoundRecord* record) const;
  [[nodiscard]] absl::StatusOr<bool> StoreCommit(RoundCommit& commit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  void PublishCommitted(const round::ClosedRound& closed, const v1::RoundRecord& record,
                        std::shared_ptr<const ModelBlob> blob, bool durable)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The collapse guard of a committed round (`evaluated`: its record holds a test evaluation):
  // true to publish it; false when the engine took it back (recorded as a failed round, the
  // previous model stays) or could not (health() becomes DATA_LOSS).
  bool PassesCollapseGuard(const round::ClosedRound& closed, bool evaluated)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // The collapse guard's reference from the test evaluation of `model` (the initial model, or
  // the resumed one of a store that kept none): nullopt without an evaluator, or when it fails
  // or gives an accuracy outside [0, 1] or a non-finite loss (logged).
  std::optional<v1::CollapseGuardReference> EvaluateReference(const v1::Model& model) const;
  std::string NewId(const char* prefix);
  // 64 bits from OpenSSL's RAND_bytes: the seed of a round's differential-privacy noise.
  static uint64_t SecureSeed();
  // An upload waiting to be checked and folded: lives on its submitting thread's stack, which
  // keeps `header`, `delta` and the payload alive until the update is `done`.
  struct PendingUpdate {
    const v1::UploadHeader* header = nullptr;
    const v1::Model* delta = nullptr;
    const v1::SecAggMaskedInput* masked = nullptr;  // instead of delta, under secure aggregation
    // Instead of delta, for an upload with UploadHeader.compressed (update compression).
    const v1::CompressedModel* compressed = nullptr;
    absl::Span<const std::string_view> payload_pieces;
    absl::Span<const double> tensor_sum_squares;  // of delta, from the norm screen's pass
    absl::Time now;
    double upload_seconds = 0;
    PendingUpdate* next = nullptr;  // queue link, under queue_mu_
    absl::Status status;            // the verdict; written before `done`, both under mu_
    bool done = false;
    // The sender counts in the median screen's reference (set under mu_ with the verdict; see
    // DecideUpdates for what "proven" means).
    bool proven = false;
  };
  // The part of SubmitUpdate under the lock, for a checksummed and parsed `delta`: queues it,
  // then either finds it decided by another thread or decides every queued update itself.
  // `self` carries the update (delta or masked input), its pieces, time and upload seconds.
  // `drain_commits`: commit the rounds it closed before returning (else the caller must call
  // DrainCommits).
  [[nodiscard]] absl::Status ApplyUpdate(const v1::UploadHeader& header, PendingUpdate& self,
                                         bool drain_commits = true)
      ABSL_LOCKS_EXCLUDED(mu_, queue_mu_);
  // SubmitUpdate's path for a compressed update (UploadHeader.compressed; docs/ARCHITECTURE.md
  // "Compressed updates"): parsed as a CompressedModel (else kPayload), matched against the
  // model and norm-screened on its decompressed values, a tensor at a time (else kValidation or
  // the screen's reason), then folded compressed. `payload_parsed` as SubmitUpdate's.
  [[nodiscard]] absl::Status SubmitCompressedUpdate(
      const v1::UploadHeader& header, absl::Span<const std::string_view> payload_pieces,
      absl::Time now, double upload_seconds, absl::AnyInvocable<void()> payload_parsed)
      ABSL_LOCKS_EXCLUDED(mu_, queue_mu_);
  // SubmitUpdate's path for a masked input (secure aggregation): parsed, never norm-screened
  // (a masked vector's norm says nothing), then folded like an update.
  [[nodiscard]] absl::Status SubmitMaskedInput(const v1::UploadHeader& header,
                                               absl::Span<const std::string_view> payload_pieces,
                                               absl::Time now, double upload_seconds)
      ABSL_LOCKS_EXCLUDED(mu_, queue_mu_);
  // Decides the queued updates from `head` on (following `next`), in order, setting each one's
  // status (not `done`).
  void DecideUpdates(PendingUpdate* head) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Folds `batch` (updates of `owners`, in order) with one engine call, sets their statuses,
  // advances the engine, and clears both.
  void FoldBatch(std::vector<round::Update>* batch, std::vector<PendingUpdate*>* owners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The engine's check of a session-checked update, with an already-accepted task answered from
  // the receipts. `pending` / `pending_examples` as RoundEngine::CheckUpdate.
  [[nodiscard]] absl::Status CheckClaim(const round::UpdateClaim& claim, int32_t pending,
                                        int64_t pending_examples,
                                        round::RejectReason* reason = nullptr) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CoordinatorOptions options_;
  const v1::ServerConfig& config_;
  // "job <job_name> " before the run's log lines, or "" (CoordinatorOptions.job_name).
  const std::string log_prefix_;
  // Norm screening of updates before they are folded (security.max_update_norm, ...).
  std::unique_ptr<UpdateNormScreen> norm_screen_;

  mutable absl::Mutex mu_;
  std::unique_ptr<SessionPresence> presence_;
  // presence_ through options_.planning_gate: what the engine sees.
  std::unique_ptr<round::GatedPresence> gated_presence_;
  // SettleGateLocked's list of clients in flight (kept to reuse its memory).
  std::vector<std::string> in_flight_scratch_ ABSL_GUARDED_BY(mu_);
  // When SettleGateLocked next describes the job to its gate (round::DescribePacer).
  round::DescribePacer describe_pacer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<round::RoundEngine> engine_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, ClientState> sessions_ ABSL_GUARDED_BY(mu_);
  // Proofs, revocations and room of identities. Set once by Open, before any request;
  // immutable afterwards, so used without a lock.
  std::unique_ptr<IdentityAdmission> admission_;
  // Clients that PollTask has answered "finished".
  absl::flat_hash_set<profile::ClientIndex> told_finished_ ABSL_GUARDED_BY(mu_);
  // The rate of new identities per peer and overall.
  RegistrationRateLimit rate_limit_ ABSL_GUARDED_BY(mu_);
  absl::Time last_expiry_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Session tokens for Heartbeat, which checks a session without mu_ (written by Register and
  // identity expiry under mu_), and NoteActivity's latest time per client, folded into the
  // engine's heartbeats by ApplyActivityLocked. Thread-safe, with locks of its own.
  HeartbeatInbox inbox_;
  void ApplyActivityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // engine_->current_round() as of the last AdvanceLocked, for Heartbeat's answer.
  std::atomic<int64_t> current_round_{1};
  // Durable (committed and published) version, also readable without mu_ by the committer.
  int64_t durable_round_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_wait_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // LogRefusals' rate limit, per reason: the last warning and the refusals since.
  struct RefusalLogState {
    absl::Time last_warn = absl::InfinitePast();
    int64_t suppressed = 0;
  };
  absl::flat_hash_map<std::string, RefusalLogState> refusal_log_ ABSL_GUARDED_BY(mu_);
  // Pace steering (coordinator_pacing.cc): the population it spreads, its delays, and its
  // hold limit as of the last recount (CheckInHoldLimit, read without mu_).
  PaceSteering pacing_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> hold_limit_{INT64_MAX};
  void UpdatePacingLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status health_ ABSL_GUARDED_BY(mu_);
  std::function<void()> task_listener_ ABSL_GUARDED_BY(mu_);  // SetTaskListener

  // Closed rounds waiting to be committed, oldest first (taken with mu_ held or not).
  absl::Mutex jobs_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::deque<round::ClosedRound> jobs_ ABSL_GUARDED_BY(jobs_mu_);
  // Held by the thread running commits.
  absl::Mutex commit_mu_;
  // Rounds committed in memory since the last durable checkpoint, merged into one store commit
  // (checkpoint_every_rounds > 1; docs/DECISIONS.md "Model persistence").
  std::optional<RoundCommit> pending_checkpoint_ ABSL_GUARDED_BY(commit_mu_);

  // Parsed uploads waiting for mu_, oldest first (ApplyUpdate). Taken while holding mu_.
  absl::Mutex queue_mu_ ABSL_ACQUIRED_AFTER(mu_);
  PendingUpdate* queue_head_ ABSL_GUARDED_BY(queue_mu_) = nullptr;
  PendingUpdate* queue_tail_ ABSL_GUARDED_BY(queue_mu_) = nullptr;

  int64_t model_bytes_ = 0;  // serialized global model size (set by Open)
  // The models uploads are parsed into (set by Open, then used without mu_; thread-safe).
  std::unique_ptr<ParseTargetPool> parse_targets_;
  // The global model's names and shapes without values (set by Open, then read without mu_):
  // what a compressed update is matched against before its norm is screened.
  v1::Model model_shapes_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_COORDINATOR_H_
