// The server's book of client profiles: what it has measured about every registered device
// (docs/ALGORITHMS.md §1).
//
// Time: every method takes the current time as `now_s`, seconds on the caller's clock (unix
// seconds in the server, virtual seconds in the simulator). Profiles store it as
// round(now_s * 1000) in their *_unix_ms fields.
#ifndef FEDSCHED_SERVER_PROFILE_PROFILE_BOOK_H_
#define FEDSCHED_SERVER_PROFILE_PROFILE_BOOK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/huge_page_allocator.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/coordinator.pb.h"
#include "fedsched/v1/records.pb.h"
#include "server/profile/round_time.h"

namespace fedsched::profile {

// Dense index of a client in a ProfileBook: 0, 1, 2, ... in registration (or import) order.
// Stable for the client's lifetime in the book; the slot of a retired client (Retire) is given
// to the next new identity. The persistent name of a client is its client_id.
using ClientIndex = uint32_t;

// Prefix of ClientProfile.cert_fingerprint for an identity admitted on first use
// (SecurityConfig.allow_trust_on_first_use): "tofu:" + hex SHA-256 of the issued credential.
// Certificates bind their bare hex fingerprint, enrolment secrets "cred:" + hex SHA-256.
inline constexpr char kFirstUseBindingPrefix[] = "tofu:";

struct ProfileBookOptions {
  // The largest ProfileBookOptions::reserve_clients honoured (larger values reserve this many).
  static constexpr int64_t kMaxReservedClients = 16'000'000;

  // A client is online while now_s - last heartbeat <= this, seconds. Default: 6
  // (heartbeat_interval_ms 2000 x missed_heartbeats 3). Must be > 0.
  double heartbeat_timeout_s = 6.0;
  // Weight of the newest measurement in the EWMAs of compute ms/sample, kbit/s and cache hit
  // ratio. The first measurement replaces the registration figure. Default: 0.3. In (0, 1].
  double ewma_alpha = 0.3;
  // Weight of the newest sample in the availability EWMA. Default: 0.1. In (0, 1].
  double availability_alpha = 0.1;
  // Priors of last resort, for a client with no measurement and no self-reported figure when no
  // other client was measured yet: training ms per sample, and kbit/s in each direction.
  // Defaults: 10 ms, 10000 kbit/s. Must be > 0.
  double default_compute_ms_per_sample = 10.0;
  double default_kbps = 10000.0;
  // Failure penalty (docs/guides/SECURITY.md "Identities and admission"): after this many counted
  // failures in a row (TaskFailure::kDropped or kMissedDeadline, no success in between) a client is
  // in a cooldown of failure_cooldown_s x 2^(failures - failure_cooldown_after) seconds from its
  // last failure, at most 64 x failure_cooldown_s. 0 = no penalty. Defaults: 3 and 60 s
  // (security.failure_cooldown_after / failure_cooldown_s). failure_cooldown_s must be >= 0.
  int32_t failure_cooldown_after = 3;
  double failure_cooldown_s = 60.0;
  // Clients to make room for at creation (the server: security.max_identities): the per-client
  // arrays are allocated once at that capacity, at most kMaxReservedClients, instead of doubling
  // as clients register, which holds the old and the new copy at once (at a million clients
  // the half-size copies are about 200 MiB). Unregistered room is address space only: its pages are
  // touched as clients register. 0 = none (grow as needed). Must be >= 0.
  int64_t reserve_clients = 0;

  // heartbeat_timeout_s = heartbeat_interval_ms x missed_heartbeats / 1000 (defaults 2000, 3);
  // the failure penalty from config.security (0 = default, negative failure_cooldown_after =
  // off); reserve_clients = security.max_identities; everything else at its default. Errors:
  // INVALID_ARGUMENT for negative config fields.
  [[nodiscard]] static absl::StatusOr<ProfileBookOptions> FromServerConfig(
      const v1::ServerConfig& config);
};

// The system fields of a client profile, which jobs sharing a device fleet share
// (docs/guides/JOBS.md "Shared system profile"): compute_ms_per_sample, upload_kbps, download_kbps,
// availability and measured_tasks are copied from `from` into `*to`; nothing else is touched.
void CopySystemFields(const v1::ClientProfile& from, v1::ClientProfile* to);

// Server-side timing of one completed task.
struct TaskTiming {
  // Seconds from the task being planned to its update being accepted. Must be > 0.
  double completion_s = 0;
  // Seconds the upload stream took and its bytes, as measured by the server; 0 = unknown
  // (the upload bandwidth is then not updated).
  double upload_s = 0;
  int64_t upload_bytes = 0;
};

enum class TaskFailure {
  // The client reported a failure, disconnected or went offline: counts against availability.
  kDropped,
  // The task was not done when its round closed: its elapsed time is a lower bound on the
  // client's completion time (ClientProfile.censored_duration_s).
  kStraggler,
  // As kStraggler, but the round waited for it until its deadline (it was not merely slower
  // than the first K): also counts towards the failure penalty, like kDropped.
  kMissedDeadline,
};

// A compact, read-only mirror of the figures the planner reads for every candidate each round
// (kept beside the protos so that scanning 100,000 clients stays in cache). Derived from the
// ClientProfile after every change, plus the non-persisted `busy` flag.
struct ClientState {
  double compute_ms_per_sample = 0;  // measured EWMA, training ms/sample; 0 = not measured
  double download_kbps = 0;          // measured EWMA, kbit/s; 0 = not measured
  double upload_kbps = 0;            // measured EWMA, kbit/s; 0 = not measured
  double cache_hit_ratio = 0;        // EWMA in [0, 1]
  double statistical_utility = 0;    // from the last success; see has_utility
  double io_seconds_per_sample = 0;  // last measured I/O seconds / samples; see measured
  double censored_duration_s = 0;    // straggler lower bound, seconds; 0 = none
  double last_failure_s = 0;         // seconds: last counted failure; see consecutive_failures
  int64_t consecutive_failures = 0;  // counted failures since the last success
  double last_heartbeat_s = 0;       // seconds: last heartbeat, registration or upload
  double benchmark_ms = 0;           // DeviceProfile.compute_ms_per_sample; 0 = none
  double bandwidth_hint_kbps = 0;    // DeviceProfile.bandwidth_hint_kbps; 0 = none
  int64_t num_samples = 0;
  int64_t sample_bytes = 0;
  int64_t storage_budget_bytes = 0;
  int64_t memory_budget_bytes = 0;  // DeviceProfile.memory_budget_bytes; <= 0 = none declared
  int64_t last_selected_round = 0;  // 0 = never selected
  uint32_t device_model = 0;        // interned DeviceProfile.device_model
  bool has_utility = false;         // successes > 0
  // Admitted on first use (cert_fingerprint starts with kFirstUseBindingPrefix): neither an
  // enrolment secret nor a certificate vouches for it. See ProfileBook::IsUnproven.
  bool first_use = false;
  bool measured = false;  // measured_tasks > 0
  bool busy = false;      // has a task in flight (OnTaskAssigned, not yet resolved)
  // Pace steering: told not to check in before this time, seconds; 0 = not away (SetAwayUntil).
  double away_until_s = 0;
  bool retired = false;  // forgotten by Retire: no identity, never online
};

// Holds one v1::ClientProfile per client plus the device-model priors used to estimate clients
// that were never measured.
//
// Priors ("prior by device model, then global"): for a client whose compute speed was never
// measured, expected ms/sample = its self-reported benchmark x the geometric mean of
// measured / benchmark over measured clients of its device model (else over all measured
// clients; else 1); without a benchmark, the geometric mean of measured ms/sample over its
// device model, else over all clients, else default_compute_ms_per_sample. Bandwidths likewise
// with bandwidth_hint_kbps and default_kbps. The sums behind the priors are kept in fixed
// point, so the priors are bit-identical whether built incrementally or by Import().
//
// Not thread-safe: the owner serialises all calls (the service holds one mutex over the book
// and the planner). Copying is disabled.
class ProfileBook {
 public:
  // Errors: INVALID_ARGUMENT naming the offending option.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ProfileBook>> Create(
      const ProfileBookOptions& options);

  ProfileBook(const ProfileBook&) = delete;
  ProfileBook& operator=(const ProfileBook&) = delete;

  struct Registration {
    ClientIndex index = 0;
    bool is_new = false;  // false: the identity was known; it kept its client id and profile
  };
  // Registers a device, or re-registers a known identity: the profile, client id and
  // measurements are kept, the device figures are replaced by `device`, and the client is
  // online and not busy at once (a task it had in flight is forgotten, so that a re-registering
  // client is never left unschedulable). New clients get client id "c<n>", or `client_id`
  // when given (a job's book keys its devices by the client ids the fleet's admitting
  // coordinator gave them, docs/guides/JOBS.md); an identity known under another client id then
  // takes `client_id`, keeping its profile. Errors: INVALID_ARGUMENT for an empty identity, a
  // negative / non-finite device figure, or a `client_id` that names another identity.
  [[nodiscard]] absl::StatusOr<Registration> OnRegister(std::string_view identity,
                                                        const v1::DeviceProfile& device,
                                                        double now_s,
                                                        std::string_view client_id = {});

  // Records a heartbeat at now_s. Heartbeats do not mark the profile dirty (see TakeDirty).
  // Errors: NOT_FOUND for an unknown index.
  [[nodiscard]] absl::Status OnHeartbeat(ClientIndex index, double now_s);

  // True iff the client heartbeated (or registered, or uploaded) within heartbeat_timeout_s and
  // is not away (SetAwayUntil). Precondition: index < size().
  bool IsOnline(ClientIndex index, double now_s) const;

  // Pace steering (Bonawitz et al., SysML 2019, section 2.3; docs/ALGORITHMS.md "Pace
  // steering"): the client's check-in ended without a task and it was told to come back at
  // until_s (seconds on the caller's clock). Until then it is away: not online (it would not
  // hear of a task, so it is no candidate), but available (the availability EWMA counts it as
  // up) and never "unseen" (CollectUnseen). until_s = 0: back (it checked in again). Not
  // persisted (a restart forgets appointments; the devices come back and poll). Errors:
  // NOT_FOUND for an unknown or retired index; INVALID_ARGUMENT for a negative or non-finite
  // until_s.
  [[nodiscard]] absl::Status SetAwayUntil(ClientIndex index, double until_s);
  // True iff the client is away at now_s (now_s < its away-until time).
  bool IsAway(ClientIndex index, double now_s) const { return now_s < states_[index].away_until_s; }
  // True iff the client is online, or away with a check-in due no more than
  // heartbeat_timeout_s ago (late by more: it left). Precondition: index < size().
  bool IsAvailable(ClientIndex index, double now_s) const;
  // Clients away at now_s. O(size()).
  int64_t CountAway(double now_s) const;
  // Clients available at now_s (IsAvailable): the population pace steering spreads. O(size()).
  int64_t CountAvailable(double now_s) const;
  // Of those, the never-proven ones (IsUnproven). O(size()).
  int64_t CountAvailableUnproven(double now_s) const;
  // Appends every client that is online and not busy at now_s to `out` (cleared first), in
  // index order: the service's candidate list for Planner::PlanRound. O(size()).
  void CollectSelectable(double now_s, std::vector<ClientIndex>* out) const;
  // Number of clients online at now_s. O(size()).
  int64_t CountOnline(double now_s) const;
  // Folds "available at now_s" (IsAvailable) into every client's availability EWMA
  // (availability_alpha). Meant to be called once per round. Does not mark profiles dirty.
  // O(size()).
  void SampleAvailability(double now_s);

  // The planner gave the client a task in `round`: sets last_selected_round and busy.
  // Errors: NOT_FOUND for an unknown index; INVALID_ARGUMENT for round < 1.
  [[nodiscard]] absl::Status OnTaskAssigned(ClientIndex index, int64_t round, double now_s);

  // A task completed and its update was accepted. Updates, from `metrics` and `timing`:
  //   compute ms/sample EWMA  <- (train_seconds - io_seconds) * 1000 / num_examples
  //                              (train_seconds is taken to include io_seconds; if io_seconds
  //                              exceeds it, train_seconds is used whole),
  //   download kbit/s EWMA    <- download_bytes * 8 / 1000 / download_seconds (when both > 0),
  //   upload kbit/s EWMA      <- upload_bytes * 8 / 1000 / upload_s (when both > 0),
  //   cache hit ratio EWMA    <- hits / (hits + misses) (when > 0),
  //   statistical utility, last duration (completion_s), last I/O seconds and samples trained,
  //   successes, measured_tasks, availability (a 1 sample), last heartbeat; clears the
  //   straggler bound and busy.
  // Errors: NOT_FOUND for an unknown index; INVALID_ARGUMENT (and no change) when
  // num_examples <= 0, a seconds / bytes / count figure is negative or non-finite, or
  // completion_s <= 0.
  [[nodiscard]] absl::Status OnTaskSucceeded(ClientIndex index, const v1::UpdateMetrics& metrics,
                                             const TaskTiming& timing, double now_s);

  // A task failed: failures + 1, busy cleared. kDropped folds a 0 into availability;
  // kStraggler and kMissedDeadline raise censored_duration_s to `elapsed_s` (seconds since the
  // task was planned; ignored when not > 0); kDropped and kMissedDeadline also count towards
  // the failure penalty (consecutive_failures + 1, last_failure_unix_ms = now). A success
  // resets the count. Errors: NOT_FOUND for an unknown index.
  [[nodiscard]] absl::Status OnTaskFailed(ClientIndex index, TaskFailure failure, double elapsed_s,
                                          double now_s);

  // True while the client sits out its failure cooldown at now_s (see ProfileBookOptions:
  // failure_cooldown_after counted failures in a row, cooldown doubling per further failure;
  // a client that never had an update accepted sits out after its first counted failure).
  // The round engine leaves such clients out of planning while enough others are reachable
  // (docs/guides/SECURITY.md "Identities and admission"). Precondition: index < size().
  bool InFailureCooldown(ClientIndex index, double now_s) const;

  // Secure aggregation (docs/guides/SECURE_AGGREGATION.md "A malicious member"): keeps the client
  // out of later secure-aggregation cohorts, with `why` (ClientProfile.secagg_excluded, persisted;
  // the first reason stays). Such an identity is never expired by CollectUnseen. Errors:
  // NOT_FOUND.
  [[nodiscard]] absl::Status ExcludeFromSecAgg(ClientIndex index, std::string why, double now_s);
  // Whether ExcludeFromSecAgg was called for the client (false for an unknown index).
  bool SecAggExcluded(ClientIndex index) const;

  // Shared system profile (docs/guides/JOBS.md): replaces the client's system fields by `system`'s
  // (compute_ms_per_sample, upload_kbps, download_kbps, availability, measured_tasks, as
  // another job's book measured them) and updates the expectations and priors derived from
  // them, as a measurement would. Everything else (utility, cache ratio, failures, selection
  // history, heartbeats) stays. Errors: NOT_FOUND for an unknown or retired index;
  // INVALID_ARGUMENT (no change) for a negative or non-finite figure or availability above 1.
  [[nodiscard]] absl::Status AdoptSystemFields(ClientIndex index, const v1::ClientProfile& system);

  // Binds what proved the client's identity (ClientProfile.cert_fingerprint: a TLS
  // certificate's SHA-256, or a credential's binding; kFirstUseBindingPrefix marks one admitted
  // on first use). Errors: NOT_FOUND.
  [[nodiscard]] absl::Status SetCertFingerprint(ClientIndex index, std::string fingerprint);
  // Binds the client's Ed25519 public key for signed secure-aggregation advertisements
  // (ClientProfile.signing_public_key; the caller checks who may bind or replace it). Errors:
  // NOT_FOUND.
  [[nodiscard]] absl::Status SetSigningPublicKey(ClientIndex index, std::string public_key);

  // Never-proven (docs/guides/SECURITY.md "Identities and admission"): admitted on first use (no
  // enrolment secret, no certificate) and never had an update accepted. Only these are held to a
  // share of a cohort and of the identity table. Precondition: index < size().
  bool IsUnproven(ClientIndex index) const {
    return states_[index].first_use && !states_[index].has_utility;
  }
  // Live never-proven clients. O(1): kept as profiles change.
  int64_t CountUnproven() const { return num_unproven_; }
  // Every live client with a counted failure since its last success (consecutive_failures > 0),
  // in no particular order: a superset of the clients InFailureCooldown may be true for, kept as
  // profiles change, so that the round engine checks these instead of every candidate.
  const absl::flat_hash_set<ClientIndex>& failing() const { return failing_; }

  // Identity expiry (docs/guides/SECURITY.md "Identities and admission"): appends to `out` (cleared
  // first), in index order, every live client that never had an update accepted (successes == 0),
  // has no task in flight (not busy) and was last heard from (registration, heartbeat, upload) more
  // than `ttl_s` seconds before now_s. O(size()).
  void CollectUnseen(double now_s, double ttl_s, std::vector<ClientIndex>* out) const;
  // Forgets a client: its identity and client id are no longer known (a later registration of
  // the identity is a new client with a new client id), its measurements leave the priors, it
  // is never online or returned by TakeDirty, and its slot (index) goes to the next new
  // identity. Errors: NOT_FOUND (unknown or already retired index); FAILED_PRECONDITION (it has
  // a task in flight).
  [[nodiscard]] absl::Status Retire(ClientIndex index);

  // Slots, live or retired: every index < size() is valid for the accessors below (a retired
  // slot has an empty profile and state().retired).
  int64_t size() const { return static_cast<int64_t>(profiles_.size()); }
  // Live (registered, not retired) clients.
  int64_t live_size() const { return size() - static_cast<int64_t>(free_slots_.size()); }
  std::optional<ClientIndex> FindByClientId(std::string_view client_id) const;
  std::optional<ClientIndex> FindByIdentity(std::string_view identity) const;
  // Precondition for the accessors below: index < size().
  const v1::ClientProfile& profile(ClientIndex index) const { return profiles_[index]; }
  const ClientState& state(ClientIndex index) const { return states_[index]; }
  // The DeviceProfile.device_model interned as ClientState::device_model `id` (an id some
  // state holds): profile(i).device().device_model() == device_model_name(state(i).device_model).
  const std::string& device_model_name(uint32_t id) const { return device_model_names_[id]; }

  // Expected training ms per sample, download and upload kbit/s: the measured EWMA, else the
  // prior described at the class comment. Always > 0.
  inline double ExpectedComputeMs(ClientIndex index) const;
  inline double ExpectedDownloadKbps(ClientIndex index) const;
  inline double ExpectedUploadKbps(ClientIndex index) const;
  // Expected storage I/O seconds per trained sample: last measured I/O seconds / samples once
  // measured, else FedCaSe's analytic term for the cache hit ratio and sample size.
  inline double ExpectedIoSecondsPerSample(ClientIndex index) const;
  // Everything RoundTimePredictor needs for a task of `samples_to_train` samples that downloads
  // `download_bytes` and uploads `upload_bytes` (its update, as compressed) bytes.
  inline RoundTimeInputs Inputs(ClientIndex index, int64_t download_bytes, int64_t upload_bytes,
                                int64_t samples_to_train) const;

  // Persistence. The service writes profile(i) for every i returned here with the round's
  // commit. Appends the indices whose profile changed since the last call (registration,
  // assignment, task outcome, certificate) to `out` (cleared first) and resets the set.
  void TakeDirty(std::vector<ClientIndex>* out);
  // Loads persisted profiles into an empty book; indices follow the span's order. Busy flags
  // start cleared; a stored last_heartbeat_unix_ms counts as a heartbeat (zero it before
  // import to require clients to heartbeat again). Errors: FAILED_PRECONDITION if the book is
  // not empty; INVALID_ARGUMENT for an empty or duplicate client id or identity (no change).
  [[nodiscard]] absl::Status Import(absl::Span<const v1::ClientProfile> profiles);

 private:
  // Running mean of log values in fixed point (exact, order-independent sums).
  struct LogMean {
    int64_t n = 0;
    int64_t sum_fx = 0;
    double geo_mean = 0;  // exp(mean), valid when n > 0
    void Add(int64_t fx);
    void Remove(int64_t fx);
  };
  struct Prior {
    LogMean compute_ms, compute_ratio, down_kbps, down_ratio, up_kbps, up_ratio;
  };
  // What one client currently adds to its device model's and the global priors.
  struct Contribution {
    int64_t compute_ms = 0, compute_ratio = 0, down_kbps = 0, down_ratio = 0, up_kbps = 0,
            up_ratio = 0;
    uint8_t mask = 0;  // which of the six are present
  };

  explicit ProfileBook(const ProfileBookOptions& options);
  uint32_t InternDeviceModel(const std::string& model);
  // Recomputes states_[index] and the prior contribution from profiles_[index].
  void Refresh(ClientIndex index);
  void MarkDirty(ClientIndex index);
  std::string NextClientId();
  void ApplyContribution(const Contribution& c, uint32_t model, int sign);
  // Brings failing_ and num_unproven_ up to date with states_[index] (after any change to it).
  void UpdateWatch(ClientIndex index);
  static double ExpectedFigure(double measured, double self_reported, const LogMean& model_value,
                               const LogMean& model_ratio, const LogMean& global_value,
                               const LogMean& global_ratio, double fallback) {
    if (measured > 0) return measured;
    if (self_reported > 0) {
      const double factor = model_ratio.n > 0    ? model_ratio.geo_mean
                            : global_ratio.n > 0 ? global_ratio.geo_mean
                                                 : 1.0;
      return self_reported * factor;
    }
    if (model_value.n > 0) return model_value.geo_mean;
    if (global_value.n > 0) return global_value.geo_mean;
    return fallback;
  }

  ProfileBookOptions options_;
  std::vector<v1::ClientProfile> profiles_;
  // Read at scattered indices for every candidate of every round: huge-page backed.
  std::vector<ClientState, HugePageAllocator<ClientState>> states_;
  std::vector<Contribution> contributions_;
  std::vector<uint8_t> dirty_flag_;
  std::vector<ClientIndex> dirty_;
  std::vector<ClientIndex> free_slots_;  // retired slots, reused last-in first-out
  absl::flat_hash_map<std::string, ClientIndex> by_client_id_;
  absl::flat_hash_map<std::string, ClientIndex> by_identity_;
  absl::flat_hash_map<std::string, uint32_t> device_model_ids_;
  std::vector<std::string> device_model_names_;  // by interned id
  std::vector<Prior> model_priors_;
  Prior global_prior_;
  // What UpdateWatch last counted for each client: kWatchFailing | kWatchUnproven.
  std::vector<uint8_t> watch_;
  absl::flat_hash_set<ClientIndex> failing_;
  int64_t num_unproven_ = 0;
  int64_t next_client_number_ = 1;
};

// Inline because the planner evaluates them for every candidate of every round.
inline double ProfileBook::ExpectedComputeMs(ClientIndex index) const {
  const ClientState& s = states_[index];
  const Prior& m = model_priors_[s.device_model];
  return ExpectedFigure(s.compute_ms_per_sample, s.benchmark_ms, m.compute_ms, m.compute_ratio,
                        global_prior_.compute_ms, global_prior_.compute_ratio,
                        options_.default_compute_ms_per_sample);
}

inline double ProfileBook::ExpectedDownloadKbps(ClientIndex index) const {
  const ClientState& s = states_[index];
  const Prior& m = model_priors_[s.device_model];
  return ExpectedFigure(s.download_kbps, s.bandwidth_hint_kbps, m.down_kbps, m.down_ratio,
                        global_prior_.down_kbps, global_prior_.down_ratio, options_.default_kbps);
}

inline double ProfileBook::ExpectedUploadKbps(ClientIndex index) const {
  const ClientState& s = states_[index];
  const Prior& m = model_priors_[s.device_model];
  return ExpectedFigure(s.upload_kbps, s.bandwidth_hint_kbps, m.up_kbps, m.up_ratio,
                        global_prior_.up_kbps, global_prior_.up_ratio, options_.default_kbps);
}

inline double ProfileBook::ExpectedIoSecondsPerSample(ClientIndex index) const {
  const ClientState& s = states_[index];
  if (s.measured) return s.io_seconds_per_sample;
  return FedCaseIoSecondsPerSample(s.cache_hit_ratio, s.sample_bytes);
}

inline RoundTimeInputs ProfileBook::Inputs(ClientIndex index, int64_t download_bytes,
                                           int64_t upload_bytes, int64_t samples_to_train) const {
  RoundTimeInputs in;
  in.compute_ms_per_sample = ExpectedComputeMs(index);
  in.download_kbps = ExpectedDownloadKbps(index);
  in.upload_kbps = ExpectedUploadKbps(index);
  in.download_bytes = download_bytes;
  in.upload_bytes = upload_bytes;
  in.samples_to_train = samples_to_train;
  in.io_seconds_per_sample = ExpectedIoSecondsPerSample(index);
  return in;
}

}  // namespace fedsched::profile

#endif  // FEDSCHED_SERVER_PROFILE_PROFILE_BOOK_H_
