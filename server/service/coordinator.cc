// Coordinator: sessions and the session RPCs over the round engine (docs/ARCHITECTURE.md "The
// round engine"). Upload ingest is in coordinator_updates.cc, commits in coordinator_commit.cc.
#include "server/service/coordinator.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "secagg/signing.h"
#include "server/aggregation/layout.h"
#include "server/service/credentials.h"

namespace fedsched {
namespace {

double ToSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// How often a server that waits for clients says so, seconds.
constexpr double kWaitLogIntervalS = 10;
// At most one warning per refusal reason per this many seconds (Coordinator::LogRefusals).
constexpr double kRefusalLogIntervalS = 10;

// Bytes of client summaries one status response may carry: 7/8 of the transport's resolved
// max_message_bytes (16 MiB when the config's cannot be resolved: the server would not have
// started with it).
int64_t StatusListBudgetBytes(const v1::ServerConfig& config) {
  absl::StatusOr<v1::TransportConfig> transport = ResolveTransport(config.transport());
  const int64_t max_bytes = transport.ok() ? transport->max_message_bytes() : int64_t{16} << 20;
  return max_bytes / 8 * 7;
}

absl::Status NoSessionError(const std::string& client_id) {
  return absl::UnauthenticatedError(
      absl::StrCat("no session for client '", client_id, "' with this token; register again"));
}

}  // namespace

// Reachable = heartbeated within the timeout and not away (ProfileBook) and holding a live
// session (after a restart, profiles come back before their devices re-register); while pace
// steering is on, also checked in (polled in this session, docs/ALGORITHMS.md §2.6). The
// engine sees it through the planning gate, if any (round::GatedPresence, docs/guides/JOBS.md).
class Coordinator::SessionPresence : public round::Presence {
 public:
  explicit SessionPresence(const Coordinator* owner) : owner_(owner) {}
  bool IsReachable(profile::ClientIndex index, double now_s) const override
      ABSL_NO_THREAD_SAFETY_ANALYSIS {  // engine calls run under owner_->mu_
    const profile::ProfileBook& book = owner_->engine_->book();
    if (!book.IsOnline(index, now_s)) return false;
    auto it = owner_->sessions_.find(book.profile(index).client_id());
    if (it == owner_->sessions_.end()) return false;
    // A task planned before pacing began stays with its device until it polls for it.
    return !owner_->pacing_.active() || it->second.checked_in ||
           owner_->engine_->TaskOf(index) != nullptr;
  }
  void CollectReachable(double now_s, std::vector<profile::ClientIndex>* out) const override
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    out->clear();
    const profile::ProfileBook& book = owner_->engine_->book();
    for (profile::ClientIndex i = 0; i < static_cast<profile::ClientIndex>(book.size()); ++i) {
      if (IsReachable(i, now_s)) out->push_back(i);
    }
  }

 private:
  const Coordinator* owner_;
};

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      config_(options_.config),
      log_prefix_(options_.job_name.empty() ? "" : absl::StrCat("job ", options_.job_name, " ")),
      rate_limit_(config_),
      pacing_(config_) {
  if (!options_.clock) options_.clock = [] { return absl::Now(); };
  norm_screen_ = std::make_unique<UpdateNormScreen>(UpdateNormScreen::OptionsFromConfig(config_));
}

Coordinator::~Coordinator() = default;

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorOptions options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("coordinator needs a store");
  auto coordinator = std::unique_ptr<Coordinator>(new Coordinator(std::move(options)));
  FEDSCHED_RETURN_IF_ERROR(coordinator->Open());
  return coordinator;
}

absl::Status Coordinator::Open() {
  absl::MutexLock lock(&mu_);
  Store& store = *options_.store;
  round::EngineOptions engine;
  engine.config = config_;
  absl::StatusOr<v1::RunMeta> meta = store.LoadMeta();
  if (absl::IsNotFound(meta.status())) {
    FEDSCHED_RETURN_IF_ERROR(InitializeStore(&engine));
  } else {
    if (!meta.ok()) return meta.status();
    FEDSCHED_RETURN_IF_ERROR(LoadStoredRun(*meta, &engine));
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<Revocation> revocations, store.LoadRevocations());
  admission_ = std::make_unique<IdentityAdmission>(config_, options_.enrolment_key, revocations);
  if (admission_->revoked_count() > 0) {
    std::vector<std::string> names = admission_->revoked_identities();
    const int64_t revoked = admission_->revoked_count();
    if (names.size() > 20) names.resize(20);  // a line, not a list of thousands
    FEDSCHED_LOG(info, "{} identities are revoked (fedsched-enroll --revoke_identity): {}{}",
                 revoked, absl::StrJoin(names, ", "), revoked > 20 ? ", ..." : "");
  }
  std::vector<int> tensor_sizes;
  model_shapes_.Clear();
  for (const v1::Tensor& tensor : engine.model.tensors()) {
    tensor_sizes.push_back(tensor.data_size());
    v1::Tensor* shape = model_shapes_.add_tensors();
    shape->set_name(tensor.name());
    *shape->mutable_shape() = tensor.shape();
  }
  parse_targets_ = std::make_unique<ParseTargetPool>(std::move(tensor_sizes));
  presence_ = std::make_unique<SessionPresence>(this);
  // A device without a task of this run is planned only when the gate offers it (MayPlan).
  gated_presence_ = std::make_unique<round::GatedPresence>(presence_.get(), options_.planning_gate);
  engine.presence = gated_presence_.get();
  engine.availability = options_.availability;
  engine.model_features = options_.model_features;
  engine.target_accuracy = options_.target_accuracy;
  engine.planning_gate = options_.planning_gate;
  if (!options_.deterministic_task_ids) UseSecureRandomness(&engine);
  // The engine holds the model from here on: a second copy would cost its size in RSS.
  options_.initial_model = v1::Model();
  FEDSCHED_ASSIGN_OR_RETURN(engine_, round::RoundEngine::Create(std::move(engine)));
  gated_presence_->set_engine(engine_.get());
  auto blob = std::make_shared<ModelBlob>();
  blob->bytes = engine_->model()->SerializeAsString();
  blob->sha256 = Sha256(blob->bytes);
  model_bytes_ = static_cast<int64_t>(blob->bytes.size());
  FEDSCHED_RETURN_IF_ERROR(engine_->Publish(engine_->version(), engine_->model(), blob));
  durable_round_ = engine_->version();
  current_round_.store(engine_->current_round(), std::memory_order_relaxed);
  return pacing_.SetHold(/*hold_s=*/5.0);
}

absl::Status Coordinator::InitializeStore(round::EngineOptions* engine) {
  if (options_.initial_model.tensors_size() == 0) {
    return absl::InvalidArgumentError("fresh store and no initial model");
  }
  v1::RunMeta fresh;
  fresh.set_config_text(ConfigToText(config_));
  fresh.set_created_unix_ms(absl::ToUnixMillis(Now()));
  // The collapse guard's reference is the initial model, from before round 1, and is stored
  // with it (docs/guides/SECURITY.md "Updates").
  engine->guard_reference = EvaluateReference(options_.initial_model);
  if (engine->guard_reference.has_value())
    *fresh.mutable_collapse_guard() = *engine->guard_reference;
  FEDSCHED_RETURN_IF_ERROR(options_.store->Initialize(options_.initial_model, fresh));
  engine->model = std::move(options_.initial_model);
  return absl::OkStatus();
}

absl::Status Coordinator::LoadStoredRun(const v1::RunMeta& meta, round::EngineOptions* engine) {
  Store& store = *options_.store;
  engine->version = meta.committed_round();
  FEDSCHED_ASSIGN_OR_RETURN(engine->model, store.LoadModel(engine->version));
  // The configured model must be the stored one's architecture: a different one would train
  // clients on shapes the stored model does not have.
  if (options_.initial_model.tensors_size() > 0) {
    FEDSCHED_ASSIGN_OR_RETURN(ModelLayout configured,
                              ModelLayout::FromModel(options_.initial_model));
    std::vector<int> index;
    if (absl::Status s = configured.Match(engine->model, &index); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the store holds a model (round ", engine->version,
                       ") that does not match the configured model: ", s.message(),
                       "; use the run's original model config, or a new store_path"));
    }
  }
  FEDSCHED_ASSIGN_OR_RETURN(engine->profiles, store.LoadProfiles());
  FEDSCHED_ASSIGN_OR_RETURN(engine->planner_state, store.LoadPlannerState());
  if (meta.optimizer_state_size() > 0) engine->optimizer_state = meta.optimizer_state(0);
  if (meta.has_collapse_guard()) {
    engine->guard_reference = meta.collapse_guard();
  } else {
    // A store written before the reference was kept: the resumed model starts it.
    engine->guard_reference = EvaluateReference(engine->model);
  }
  FEDSCHED_LOG(info, "{}resuming after committed round {} with {} known clients", log_prefix_,
               engine->version, engine->profiles.size());
  return absl::OkStatus();
}

void Coordinator::UseSecureRandomness(round::EngineOptions* engine) {
  engine->new_task_id = [this] { return NewId("t-"); };
  // Differential privacy: the noise must be unpredictable to anyone who could subtract it.
  engine->noise_seed = SecureSeed;
  // Secure aggregation: the graph's relabelling must not be steerable by a client.
  engine->secagg_graph_seed = [] {
    std::string seed;
    for (int i = 0; i < 4; ++i) {
      const uint64_t word = SecureSeed();
      seed.append(reinterpret_cast<const char*>(&word), sizeof(word));
    }
    return seed;
  };
}

std::optional<v1::CollapseGuardReference> Coordinator::EvaluateReference(
    const v1::Model& model) const {
  if (!options_.evaluator) return std::nullopt;
  absl::StatusOr<EvalMetrics> eval = options_.evaluator(model);
  if (eval.ok() && (!(eval->accuracy >= 0 && eval->accuracy <= 1) || !std::isfinite(eval->loss))) {
    eval = absl::FailedPreconditionError(absl::StrCat("accuracy ", eval->accuracy, ", loss ",
                                                      eval->loss, " is not a usable evaluation"));
  }
  if (!eval.ok()) {
    FEDSCHED_LOG(warn,
                 "evaluation of the starting model failed ({}): the collapse guard has no "
                 "reference until a round is evaluated",
                 eval.status().ToString());
    return std::nullopt;
  }
  v1::CollapseGuardReference reference;
  reference.set_initial_accuracy(eval->accuracy);
  reference.set_best_accuracy(eval->accuracy);
  FEDSCHED_LOG(info, "collapse guard: the starting model's test accuracy is {:.4f}",
               eval->accuracy);
  return reference;
}

uint64_t Coordinator::SecureSeed() {
  uint64_t seed = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed), sizeof(seed)) != 1) {
    // OpenSSL's generator is not seeded (it never fails on Linux with getrandom): fall back to
    // the OS-seeded generator of the task ids rather than a predictable value.
    static absl::BitGen* const kBitGen = new absl::BitGen();
    seed = absl::Uniform<uint64_t>(*kBitGen);
  }
  return seed;
}

std::string Coordinator::NewId(const char* prefix) {
  // Session tokens and task ids must be unguessable: drawn from the OS-seeded generator, not
  // from the seeded selection stream.
  static absl::BitGen* const kBitGen = new absl::BitGen();
  uint64_t hi = absl::Uniform<uint64_t>(*kBitGen);
  uint64_t lo = absl::Uniform<uint64_t>(*kBitGen);
  std::string raw(16, '\0');
  for (int i = 0; i < 8; ++i) {
    raw[i] = static_cast<char>(hi >> (8 * i));
    raw[8 + i] = static_cast<char>(lo >> (8 * i));
  }
  return absl::StrCat(prefix, ToHex(raw));
}

absl::StatusOr<profile::ClientIndex> Coordinator::CheckSession(const std::string& client_id,
                                                               const std::string& token) const {
  auto it = sessions_.find(client_id);
  std::optional<profile::ClientIndex> index = engine_->book().FindByClientId(client_id);
  if (it == sessions_.end() || token.empty() || it->second.session_token != token || !index) {
    return NoSessionError(client_id);
  }
  return *index;
}

void Coordinator::EndSessionLocked(const std::string& client_id) {
  inbox_.EndSession(client_id);
  sessions_.erase(client_id);
}

void Coordinator::ExpireUnseenLocked(absl::Time now) {
  const double ttl_s = config_.security().unseen_identity_ttl_s();
  if (ttl_s <= 0) return;
  // A sweep is O(clients): at most every ttl / 10, and at least every 10 s.
  const absl::Duration every = std::min(absl::Seconds(10), absl::Seconds(ttl_s / 10));
  if (now - last_expiry_sweep_ < every) return;
  last_expiry_sweep_ = now;
  std::vector<std::string> expired = engine_->RetireUnseen(ToSeconds(now), ttl_s);
  if (expired.empty()) return;
  for (const std::string& id : expired) EndSessionLocked(id);
  if (absl::Status s = options_.store->DeleteProfiles(expired); !s.ok()) {
    FEDSCHED_LOG(warn, "could not delete the profiles of {} expired identities: {}", expired.size(),
                 s.ToString());
  }
  FEDSCHED_LOG(info,
               "forgot {} identities never heard from for {:.0f} s without an accepted update "
               "(security.unseen_identity_ttl_s); {} remain",
               expired.size(), ttl_s, engine_->book().live_size());
}

absl::Status Coordinator::CheckIdentityName(const std::string& identity) {
  if (identity.empty() || identity.size() > 256) {
    return absl::InvalidArgumentError("identity must be 1..256 bytes");
  }
  return absl::OkStatus();
}

absl::Status Coordinator::CheckSigningKey(const v1::RegisterRequest& request,
                                          absl::string_view bound) {
  const std::string& key = request.signing_public_key();
  if (!key.empty() && key.size() != secagg::kSigningPublicKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("signing_public_key has ", key.size(),
                                                   " bytes; an Ed25519 public key has ",
                                                   secagg::kSigningPublicKeyBytes));
  }
  if (key.empty() || bound.empty() || key == bound) return absl::OkStatus();
  // A device that lost its state dir made a new key; anyone else presenting one would sign
  // secure-aggregation advertisements in this identity's name.
  return absl::PermissionDeniedError(absl::StrCat(
      "identity '", request.identity(),
      "' is bound to another signing key (its secure-aggregation advertisements are signed with "
      "the key in its state dir's signing_key); if the device lost it, the operator stops the "
      "server and runs fedsched-enroll --store_path=STORE --reset_identity=",
      request.identity(), " so that its next registration binds the new key"));
}

absl::Status Coordinator::CheckDeviceFigures(const v1::DeviceProfile& device) const {
  if (device.compute_ms_per_sample() < 0 || device.storage_budget_bytes() < 0 ||
      device.num_samples() < 0 || device.bandwidth_hint_kbps() < 0 || device.sample_bytes() < 0 ||
      !std::isfinite(device.compute_ms_per_sample()) ||
      !std::isfinite(device.bandwidth_hint_kbps())) {
    return absl::InvalidArgumentError("device profile has a negative or non-finite figure");
  }
  const v1::SecurityConfig& security = config_.security();
  if (security.max_num_samples() > 0 && device.num_samples() > security.max_num_samples()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device.num_samples ", device.num_samples(), " exceeds the server's limit ",
                     security.max_num_samples(), " (security.max_num_samples)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterResponse> Coordinator::Register(const v1::RegisterRequest& request,
                                                           absl::Time now,
                                                           const std::string& cert_fingerprint,
                                                           const std::string& peer_address) {
  FEDSCHED_RETURN_IF_ERROR(CheckIdentityName(request.identity()));
  // First: a revoked device is refused whatever it presents (docs/guides/OPERATIONS.md).
  FEDSCHED_RETURN_IF_ERROR(admission_->CheckNotRevoked(request.identity()));
  const v1::DeviceProfile& device = request.device();
  FEDSCHED_RETURN_IF_ERROR(CheckDeviceFigures(device));
  FEDSCHED_ASSIGN_OR_RETURN(
      const Admission admission,
      admission_->Admit(request.identity(), request.credential(), cert_fingerprint));
  std::string binding = admission.binding;
  absl::MutexLock lock(&mu_);
  profile::ProfileBook& book = engine_->mutable_book();
  std::optional<profile::ClientIndex> known = book.FindByIdentity(request.identity());
  if (known) {
    const std::string& bound = book.profile(*known).cert_fingerprint();
    if (admission.provisioned && absl::StartsWith(bound, profile::kFirstUseBindingPrefix)) {
      // The operator's enrolment secret outranks whoever named the identity first: the first
      // registrant's session ends and the device takes its name back.
      FEDSCHED_LOG(warn, "identity '{}' held on first use is taken over by its enrolment secret",
                   request.identity());
      EndSessionLocked(book.profile(*known).client_id());
      FEDSCHED_RETURN_IF_ERROR(book.SetCertFingerprint(*known, binding));
      // The first registrant's signing key was never proven either: the device binds its own.
      FEDSCHED_RETURN_IF_ERROR(book.SetSigningPublicKey(*known, ""));
    } else if (!bound.empty() && !ConstantTimeEquals(bound, binding)) {
      return absl::PermissionDeniedError(
          absl::StrCat("identity '", request.identity(), "' is enrolled with another ",
                       absl::StartsWith(bound, "cred:") ||
                               absl::StartsWith(bound, profile::kFirstUseBindingPrefix)
                           ? "credential"
                           : "client certificate"));
    }
  } else {
    FEDSCHED_RETURN_IF_ERROR(admission_->CheckIdentityRoom(book, admission.provisioned));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckSigningKey(request, known ? book.profile(*known).signing_public_key() : ""));
  if (!known) FEDSCHED_RETURN_IF_ERROR(rate_limit_.Admit(peer_address, now));
  std::string issued;
  if (binding.empty()) {
    // Trust on first use: the first registrant of an unbound identity gets its credential.
    issued = NewId("c-");
    binding = FirstUseBinding(issued);
  }
  FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBook::Registration registration,
                            engine_->Register(request.identity(), device, ToSeconds(now)));
  if (book.profile(registration.index).cert_fingerprint().empty()) {
    FEDSCHED_RETURN_IF_ERROR(book.SetCertFingerprint(registration.index, binding));
  }
  if (book.profile(registration.index).signing_public_key().empty()) {
    // Bound with what proved the identity (only trust on first use for a first-use identity).
    FEDSCHED_RETURN_IF_ERROR(
        book.SetSigningPublicKey(registration.index, request.signing_public_key()));
  }
  v1::RegisterResponse response = StartSessionLocked(registration.index, NewId("s-"));
  response.set_credential(issued);
  return response;
}

v1::RegisterResponse Coordinator::StartSessionLocked(profile::ClientIndex index,
                                                     std::string session_token) {
  const v1::ClientProfile& profile = engine_->book().profile(index);
  if (absl::Status s = options_.store->PutProfile(profile); !s.ok()) {
    FEDSCHED_LOG(warn, "could not persist profile of {}: {}", profile.client_id(), s.ToString());
  }
  ClientState& session = sessions_[profile.client_id()];
  session.session_token = std::move(session_token);
  session.checked_in = false;  // a new session checks in with its first poll
  inbox_.StartSession(profile.client_id(), session.session_token);
  v1::RegisterResponse response;
  response.set_client_id(profile.client_id());
  response.set_session_token(session.session_token);
  response.set_heartbeat_interval_ms(config_.heartbeat_interval_ms());
  *response.mutable_transport() = config_.transport();
  // Certificate paths are the server's own; never send them.
  response.mutable_transport()->clear_tls_cert_path();
  response.mutable_transport()->clear_tls_key_path();
  response.mutable_transport()->clear_tls_ca_path();
  return response;
}

absl::StatusOr<v1::RegisterResponse> Coordinator::RegisterAdmitted(
    const v1::RegisterRequest& request, const std::string& client_id,
    const std::string& session_token, absl::Time now) {
  FEDSCHED_RETURN_IF_ERROR(CheckIdentityName(request.identity()));
  if (client_id.empty() || session_token.empty()) {
    return absl::InvalidArgumentError(
        "an admitted registration needs the admitting coordinator's client id and session token");
  }
  FEDSCHED_RETURN_IF_ERROR(CheckDeviceFigures(request.device()));
  // Only the key's form: whether it may replace a bound one was the admitting coordinator's call.
  FEDSCHED_RETURN_IF_ERROR(CheckSigningKey(request, ""));
  absl::MutexLock lock(&mu_);
  profile::ProfileBook& book = engine_->mutable_book();
  std::optional<profile::ClientIndex> known = book.FindByIdentity(request.identity());
  const std::string old_id = known ? book.profile(*known).client_id() : "";
  const double now_s = ToSeconds(now);
  FEDSCHED_ASSIGN_OR_RETURN(
      profile::ProfileBook::Registration registration,
      book.OnRegister(request.identity(), request.device(), now_s, client_id));
  if (known && old_id != client_id) {
    // The admitting coordinator forgot the identity and made it a new client (identity
    // expiry): the profile moved to the new id; the old id's session and stored profile go
    // (a stored duplicate of the identity would fail the next resume's import).
    EndSessionLocked(old_id);
    if (absl::Status s = options_.store->DeleteProfiles({old_id}); !s.ok()) {
      FEDSCHED_LOG(warn, "{}could not delete the profile of {} (now {}): {}", log_prefix_, old_id,
                   client_id, s.ToString());
    }
  }
  // As RoundEngine::Register: a registration is a sighting for the learned availability.
  FEDSCHED_RETURN_IF_ERROR(engine_->Heartbeat(registration.index, now_s));
  const std::string& key = request.signing_public_key();
  if (!key.empty() && key != book.profile(registration.index).signing_public_key()) {
    FEDSCHED_RETURN_IF_ERROR(book.SetSigningPublicKey(registration.index, key));
  }
  return StartSessionLocked(registration.index, session_token);
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& request,
                                                             absl::Time now) {
  if (!inbox_.HasSession(request.client_id(), request.session_token())) {
    return NoSessionError(request.client_id());
  }
  NoteActivity(request.client_id(), now);
  // Fold it in now if nobody holds the lock (a heartbeat then counts at once, as before);
  // otherwise the next Tick folds it (never wait behind a fold or a plan).
  if (mu_.TryLock()) {
    ApplyActivityLocked();
    mu_.Unlock();
  }
  v1::HeartbeatResponse response;
  response.set_current_round(current_round_.load(std::memory_order_relaxed));
  return response;
}

absl::StatusOr<v1::PollTaskResponse> Coordinator::PollTask(const v1::PollTaskRequest& request,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index,
                            CheckSession(request.client_id(), request.session_token()));
  FEDSCHED_RETURN_IF_ERROR(engine_->Heartbeat(index, ToSeconds(now)));
  // Checking in ends any absence pace steering asked of it (PaceIdleRetryMs).
  FEDSCHED_RETURN_IF_ERROR(engine_->mutable_book().SetAwayUntil(index, 0));
  sessions_[request.client_id()].checked_in = true;
  v1::PollTaskResponse response;
  if (engine_->finished() && durable_round_ != engine_->version()) {
    // The last rounds are closed but not yet durable: a client told "finished" now would leave,
    // and a crash before the commits end would restart the run without it.
    response.set_retry_after_ms(std::min<int64_t>(500, config_.heartbeat_interval_ms()));
    return response;
  }
  if (engine_->finished()) {
    told_finished_.insert(index);
    response.set_finished(true);
    return response;
  }
  if (const round::Task* current = engine_->TaskOf(index)) {
    FEDSCHED_ASSIGN_OR_RETURN(
        const round::Task* state,
        engine_->PinModel(index, current->task_id,
                          request.has_held_model() ? &request.held_model() : nullptr));
    v1::Task* task = response.mutable_task();
    task->set_round(state->round);
    task->set_task_id(state->task_id);
    task->set_model_version(state->base_version);
    task->set_local_steps(state->local_steps);
    task->set_batch_size(state->batch_size);
    task->set_learning_rate(config_.training().learning_rate());
    task->set_proximal_mu(config_.training().proximal_mu());
    task->set_deadline_unix_ms(round::ToMillis(state->deadline_s));
    *task->mutable_cache_plan() = state->cache_plan;
    task->set_model_bytes(static_cast<int64_t>(state->blob->bytes.size()));
    task->set_model_sha256(state->blob->sha256);
    if (state->download_from_version >= 0 && state->download_result != nullptr) {
      v1::DownlinkDelta* delta = task->mutable_downlink_delta();
      delta->set_from_version(state->download_from_version);
      delta->set_model_bytes(static_cast<int64_t>(state->download_result->bytes.size()));
      delta->set_model_sha256(state->download_result->sha256);
    }
    task->set_dp_clip_norm(state->dp_clip_norm);
    task->set_dp_noise_stddev(state->dp_noise_stddev);
    if (state->in_secagg()) *task->mutable_secagg() = state->secagg;
    task->set_update_dropout(state->update_dropout);
    *task->mutable_upload_compression() = state->upload_compression;
    task->set_utility_noise_stddev(state->utility_noise_stddev);
    // Client-side evaluation of the model this round starts from (its accuracy lands in the
    // record of round state->round, as client_eval_*).
    task->set_evaluate(config_.eval().mode() == v1::EVAL_MODE_CLIENT &&
                       (state->round - 1) % config_.eval().every_n_rounds() == 0);
    return response;
  }
  response.set_retry_after_ms(std::min<int64_t>(500, config_.heartbeat_interval_ms()));
  if (const v1::CachePlan* prefetch = engine_->PrefetchPlan(index)) {
    *response.mutable_prefetch_plan() = *prefetch;
  }
  return response;
}

absl::StatusOr<std::shared_ptr<const ModelBlob>> Coordinator::ModelForTask(
    const std::string& client_id, const std::string& token, const std::string& task_id,
    bool whole_model, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index, CheckSession(client_id, token));
  FEDSCHED_ASSIGN_OR_RETURN(const round::Task* task, engine_->PinModel(index, task_id));
  if (whole_model && task->download_result != nullptr) return task->download_result;
  return task->blob;
}

absl::Status Coordinator::ReportFailure(const v1::ReportFailureRequest& request, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index,
                            CheckSession(request.client_id(), request.session_token()));
  absl::Status s = request.cause() == v1::FAILURE_CAUSE_OUT_OF_MEMORY
                       ? engine_->FailTaskOutOfMemory(index, request.task_id(), ToSeconds(now),
                                                      request.peak_memory_bytes())
                       : engine_->FailTask(index, request.task_id(), ToSeconds(now),
                                           absl::StrCat("client reported: ", request.reason()));
  if (!s.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no open task '", request.task_id(), "' for client ", request.client_id()));
  }
  LogTaskFailures();
  if (absl::StartsWith(request.reason(), kIneligibleReasonPrefix)) {
    // The device stopped being eligible and stops checking in: unreachable now, not after its
    // missed heartbeats (a re-plan would hand it the round again); it registers when eligible.
    EndSessionLocked(request.client_id());
  }
  return absl::OkStatus();
}

void Coordinator::Tick(absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(now);
  }
  DrainCommits();
}

void Coordinator::AdvanceLocked(absl::Time now) {
  ApplyActivityLocked();
  ExpireUnseenLocked(now);
  UpdatePacingLocked(now);
  std::vector<round::ClosedRound> closed = engine_->Advance(ToSeconds(now));
  SettleGateLocked(now);
  current_round_.store(engine_->current_round(), std::memory_order_relaxed);
  LogTaskFailures();
  LogRefusals(now);
  LogNewTasks();
  if (!engine_->running() && !engine_->finished() &&
      absl::IsFailedPrecondition(engine_->last_plan_status()) &&
      ToSeconds(now) - ToSeconds(last_wait_log_) >= kWaitLogIntervalS) {
    last_wait_log_ = now;
    FEDSCHED_LOG(info, "{}round {}: {} (registered {})", log_prefix_, engine_->current_round(),
                 std::string(engine_->last_plan_status().message()), engine_->book().live_size());
  }
  if (closed.empty()) return;
  absl::MutexLock lock(&jobs_mu_);
  for (round::ClosedRound& c : closed) jobs_.push_back(std::move(c));
}

void Coordinator::ReportToGate(absl::Time now) {
  absl::MutexLock lock(&mu_);
  SettleGateLocked(now);
}

void Coordinator::SettleGateLocked(absl::Time now) {
  if (options_.planning_gate == nullptr) return;
  round::ReportToGate(*engine_, ToSeconds(now), options_.planning_gate, &describe_pacer_,
                      &in_flight_scratch_);
}

void Coordinator::LogTaskFailures() {
  for (const round::TaskFailureNote& f : engine_->TakeTaskFailures()) {
    FEDSCHED_LOG(info, "{}round {}: task of {} failed: {}", log_prefix_, f.round, f.client_id,
                 f.reason);
    if (options_.on_task_failed) options_.on_task_failed(f.reason);
  }
}

void Coordinator::LogRefusals(absl::Time now) {
  for (const round::RefusalNote& r : engine_->TakeRefusals()) {
    const std::string reason(round::RejectReasonName(r.reason));
    if (options_.on_update_rejected) options_.on_update_rejected(reason);
    // A flood of refusals (an attack, or a client looping on a refused update) must not flood
    // the log: one warning per reason per interval, the rest at debug level and counted.
    RefusalLogState& state = refusal_log_[reason];
    const std::string who =
        r.client_id.empty() ? std::string("an unauthenticated sender") : r.client_id;
    if (now - state.last_warn < absl::Seconds(kRefusalLogIntervalS)) {
      ++state.suppressed;
      FEDSCHED_LOG(debug, "{}round {}: update of {} (task '{}') refused ({}): {}", log_prefix_,
                   r.round, who, r.task_id, reason, r.why);
      continue;
    }
    const std::string also = state.suppressed == 0
                                 ? std::string()
                                 : absl::StrCat(" (and ", state.suppressed, " more refused for ",
                                                reason, " since the last warning)");
    FEDSCHED_LOG(warn, "{}round {}: update of {} (task '{}') refused ({}){}: {}{}", log_prefix_,
                 r.round, who, r.task_id, reason, r.task_failed ? ", its task fails" : "", r.why,
                 also);
    state.last_warn = now;
    state.suppressed = 0;
  }
}

void Coordinator::LogNewTasks() {
  std::vector<const round::Task*> tasks = engine_->TakeNewTasks();
  if (tasks.empty()) return;
  if (task_listener_) task_listener_();
  FEDSCHED_LOG(info, "{}round {} planned: {} participants, deadline {:.1f} s (attempt {})",
               log_prefix_, tasks.front()->round, tasks.size(),
               tasks.front()->deadline_s - tasks.front()->issued_s, engine_->attempts_failed() + 1);
}

v1::GetStatusResponse Coordinator::GetStatus(int recent_rounds, bool include_clients) const {
  v1::GetStatusResponse response;
  absl::MutexLock lock(&mu_);
  const double now_s = ToSeconds(Now());
  const profile::ProfileBook& book = engine_->book();
  const bool finished = engine_->finished() && durable_round_ == engine_->version();
  // A closed synchronous round is evaluated, stored and published (coordinator_commit.cc)
  // before the next one is planned: "committing" that round, not waiting for clients.
  const bool committing =
      !finished && !engine_->running() && engine_->published_version() < engine_->version();
  response.set_committed_round(durable_round_);
  response.set_current_round(finished     ? durable_round_
                             : committing ? engine_->version()
                                          : engine_->current_round());
  response.set_state(finished             ? "finished"
                     : engine_->running() ? "running"
                     : committing         ? "committing"
                                          : "waiting_for_clients");
  response.set_registered_clients(static_cast<int32_t>(book.live_size()));
  response.set_online_clients(static_cast<int32_t>(book.CountOnline(now_s)));
  response.set_paced_clients(static_cast<int32_t>(book.CountAway(now_s)));
  if (std::optional<int64_t> cycle_ms = pacing_.CycleMs()) {
    response.set_checkin_cycle_ms(*cycle_ms);
  }
  if (committing) {
    response.set_waiting_for(absl::StrCat("round ", engine_->version(),
                                          " closed: evaluating, storing and publishing it"));
  } else if (!finished && !engine_->running() && !engine_->last_plan_status().ok()) {
    response.set_waiting_for(std::string(engine_->last_plan_status().message()));
  }
  response.set_revoked_identities(static_cast<int32_t>(admission_->revoked_count()));
  for (std::string& identity : admission_->revoked_identities()) {
    response.add_revoked_identity_names(std::move(identity));
  }
  if (engine_->running()) *response.add_recent_rounds() = engine_->current_record();
  absl::StatusOr<std::vector<v1::RoundRecord>> recent =
      options_.store->LoadRecentRounds(recent_rounds <= 0 ? 5 : recent_rounds);
  if (recent.ok()) {
    for (v1::RoundRecord& record : *recent) *response.add_recent_rounds() = std::move(record);
  }
  // The list is cut to what one response can carry (7/8 of the transport's max_message_bytes,
  // the rest for the counts and round records): a million clients are about 170 MB. The caller
  // sees the cut as clients_size() < registered_clients.
  int64_t budget = StatusListBudgetBytes(config_) - static_cast<int64_t>(response.ByteSizeLong());
  for (profile::ClientIndex i = 0; i < static_cast<profile::ClientIndex>(book.size()); ++i) {
    if (book.state(i).retired) continue;
    const v1::ClientProfile& profile = book.profile(i);
    // Without the list (or past its cut), the few clients secure aggregation keeps out are still
    // named: their exclusion is something an operator must see (fedsched-status prints it
    // either way).
    if (!include_clients || budget <= 0) {
      if (profile.secagg_excluded().empty()) continue;
    } else {
      // A summary's bytes: the profile's, the id and identity twice over (a bound: tags and
      // lengths included).
      budget -= static_cast<int64_t>(profile.ByteSizeLong() + 2 * profile.client_id().size() +
                                     2 * profile.identity().size() + 16);
      if (budget <= 0) continue;
    }
    v1::ClientSummary* summary = response.add_clients();
    summary->set_client_id(profile.client_id());
    summary->set_identity(profile.identity());
    summary->set_online(book.IsOnline(i, now_s));
    *summary->mutable_profile() = profile;
  }
  return response;
}

absl::StatusOr<v1::GetStatusResponse> Coordinator::GetStatusOf(
    const v1::GetStatusRequest& request) const {
  if (!request.job().empty() && request.job() != options_.job_name) {
    return absl::NotFoundError(absl::StrCat("no job named ", request.job()));
  }
  return GetStatus(request.recent_rounds(), !request.omit_clients());
}

std::vector<v1::ClientProfile> Coordinator::SystemProfiles(
    absl::Span<const std::string> client_ids) const {
  std::vector<v1::ClientProfile> profiles;
  absl::MutexLock lock(&mu_);
  const profile::ProfileBook& book = engine_->book();
  for (const std::string& id : client_ids) {
    std::optional<profile::ClientIndex> index = book.FindByClientId(id);
    if (!index) continue;
    v1::ClientProfile& system = profiles.emplace_back();
    system.set_client_id(id);
    profile::CopySystemFields(book.profile(*index), &system);
  }
  return profiles;
}

void Coordinator::AdoptSystemProfiles(absl::Span<const v1::ClientProfile> profiles) {
  absl::MutexLock lock(&mu_);
  profile::ProfileBook& book = engine_->mutable_book();
  for (const v1::ClientProfile& profile : profiles) {
    std::optional<profile::ClientIndex> index = book.FindByClientId(profile.client_id());
    if (!index) continue;
    if (absl::Status s = book.AdoptSystemFields(*index, profile); !s.ok()) {
      FEDSCHED_LOG(warn, "{}system profile of {} not adopted: {}", log_prefix_, profile.client_id(),
                   s.ToString());
    }
  }
}

bool Coordinator::privacy_budget_exhausted() const {
  absl::MutexLock lock(&mu_);
  return engine_->privacy_budget_exhausted();
}

void Coordinator::SetTaskListener(std::function<void()> listener) {
  absl::MutexLock lock(&mu_);
  task_listener_ = std::move(listener);
}

bool Coordinator::finished() const {
  absl::MutexLock lock(&mu_);
  return engine_->finished() && durable_round_ == engine_->version();
}

int Coordinator::ClientsAwaitingFinish(absl::Time now, absl::Duration heard_within) const {
  absl::MutexLock lock(&mu_);
  const double oldest_s = ToSeconds(now - heard_within);
  const profile::ProfileBook& book = engine_->book();
  int waiting = 0;
  for (profile::ClientIndex i = 0; i < static_cast<profile::ClientIndex>(book.size()); ++i) {
    if (sessions_.contains(book.profile(i).client_id()) &&
        book.state(i).last_heartbeat_s >= oldest_s && !told_finished_.contains(i)) {
      ++waiting;
    }
  }
  return waiting;
}

Coordinator::ClientCounts Coordinator::CountClients(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  const profile::ProfileBook& book = engine_->book();
  return {book.live_size(), book.CountOnline(ToSeconds(now))};
}

int64_t Coordinator::committed_round() const {
  absl::MutexLock lock(&mu_);
  return durable_round_;
}

absl::Status Coordinator::health() const {
  absl::MutexLock lock(&mu_);
  return health_;
}

std::vector<std::string> Coordinator::revoked_identities() const {
  return admission_->revoked_identities();
}

int64_t Coordinator::max_update_bytes() const {
  // A delta has the global model's shapes; allow generous framing slack.
  return model_bytes_ * 2 + (1 << 20);
}

}  // namespace fedsched
