#include "server/service/coordinator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

// Weight of the newest measurement in the profiles' exponentially weighted moving averages.
constexpr double kEwmaAlpha = 0.3;

double Ewma(double previous, double sample) {
  if (previous <= 0) return sample;
  return (1 - kEwmaAlpha) * previous + kEwmaAlpha * sample;
}

int64_t ToUnixMs(absl::Time t) { return absl::ToUnixMillis(t); }

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)), config_(options_.config), rng_(options_.config.seed()) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorOptions options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("coordinator needs a store");
  auto coordinator = std::unique_ptr<Coordinator>(new Coordinator(std::move(options)));
  FEDSCHED_RETURN_IF_ERROR(coordinator->Open());
  return coordinator;
}

absl::Status Coordinator::Open() {
  absl::MutexLock lock(&mu_);
  Store& store = *options_.store;
  absl::StatusOr<v1::RunMeta> meta = store.LoadMeta();
  v1::Model model;
  if (absl::IsNotFound(meta.status())) {
    if (options_.initial_model.tensors_size() == 0) {
      return absl::InvalidArgumentError("fresh store and no initial model");
    }
    v1::RunMeta fresh;
    fresh.set_config_text(ConfigToText(config_));
    fresh.set_created_unix_ms(ToUnixMs(absl::Now()));
    FEDSCHED_RETURN_IF_ERROR(store.Initialize(options_.initial_model, fresh));
    model = options_.initial_model;
    committed_round_ = 0;
  } else {
    if (!meta.ok()) return meta.status();
    committed_round_ = meta->committed_round();
    FEDSCHED_ASSIGN_OR_RETURN(model, store.LoadModel(committed_round_));
    FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::ClientProfile> profiles, store.LoadProfiles());
    for (v1::ClientProfile& profile : profiles) {
      // Sessions do not survive a restart; clients re-register and keep their profiles.
      profile.set_last_heartbeat_unix_ms(0);
      identities_[profile.identity()] = profile.client_id();
      profiles_[profile.client_id()] = std::move(profile);
    }
    FEDSCHED_LOG(info, "resuming after committed round {} with {} known clients",
                 committed_round_, profiles_.size());
  }
  FEDSCHED_ASSIGN_OR_RETURN(aggregator_, Aggregator::Create(config_.aggregation(), model));
  if (meta.ok() && meta->optimizer_state_size() > 0) {
    v1::Model state;
    if (!state.ParseFromString(meta->optimizer_state(0))) {
      return absl::DataLossError("corrupt server optimiser state in the store");
    }
    FEDSCHED_RETURN_IF_ERROR(aggregator_->RestoreState(state));
  }
  SetGlobalModel(std::move(model));
  if (config_.num_rounds() > 0 && committed_round_ >= config_.num_rounds()) {
    phase_ = Phase::kFinished;
  }
  return absl::OkStatus();
}

void Coordinator::SetGlobalModel(v1::Model model) {
  global_ = std::move(model);
  auto blob = std::make_shared<ModelBlob>();
  blob->bytes = global_.SerializeAsString();
  blob->sha256 = Sha256(blob->bytes);
  global_blob_ = std::move(blob);
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

absl::Status Coordinator::CheckSession(const std::string& client_id,
                                       const std::string& token) const {
  auto it = sessions_.find(client_id);
  if (it == sessions_.end() || token.empty() || it->second.session_token != token) {
    return absl::UnauthenticatedError(
        absl::StrCat("no session for client '", client_id, "' with this token; register again"));
  }
  return absl::OkStatus();
}

bool Coordinator::IsOnline(const v1::ClientProfile& profile, absl::Time now) const {
  if (profile.last_heartbeat_unix_ms() == 0) return false;
  const int64_t timeout_ms =
      static_cast<int64_t>(config_.heartbeat_interval_ms()) * config_.missed_heartbeats();
  return ToUnixMs(now) - profile.last_heartbeat_unix_ms() <= timeout_ms;
}

int Coordinator::OnlineCount(absl::Time now) const {
  int online = 0;
  for (const auto& [id, profile] : profiles_) online += IsOnline(profile, now) ? 1 : 0;
  return online;
}

absl::StatusOr<v1::RegisterResponse> Coordinator::Register(const v1::RegisterRequest& request,
                                                           absl::Time now,
                                                           const std::string& cert_fingerprint) {
  if (request.identity().empty() || request.identity().size() > 256) {
    return absl::InvalidArgumentError("identity must be 1..256 bytes");
  }
  const v1::DeviceProfile& device = request.device();
  if (device.compute_ms_per_sample() < 0 || device.storage_budget_bytes() < 0 ||
      device.num_samples() < 0 || device.bandwidth_hint_kbps() < 0 || device.sample_bytes() < 0 ||
      !std::isfinite(device.compute_ms_per_sample()) ||
      !std::isfinite(device.bandwidth_hint_kbps())) {
    return absl::InvalidArgumentError("device profile has a negative or non-finite figure");
  }
  absl::MutexLock lock(&mu_);
  std::string client_id;
  auto known = identities_.find(request.identity());
  if (known != identities_.end()) {
    client_id = known->second;
    const std::string& bound = profiles_[client_id].cert_fingerprint();
    if (!bound.empty() && bound != cert_fingerprint) {
      return absl::PermissionDeniedError(absl::StrCat(
          "identity '", request.identity(), "' is bound to another client certificate"));
    }
  } else {
    client_id = absl::StrCat("client-", identities_.size() + 1);
    while (profiles_.contains(client_id)) client_id += "x";
    identities_[request.identity()] = client_id;
  }
  v1::ClientProfile& profile = profiles_[client_id];
  if (profile.client_id().empty()) {
    profile.set_client_id(client_id);
    profile.set_identity(request.identity());
    profile.set_registered_unix_ms(ToUnixMs(now));
    profile.set_compute_ms_per_sample(device.compute_ms_per_sample());
    // Oort's registration utility: min(|D_i|, batch * steps) (research.md section 3).
    profile.set_statistical_utility(static_cast<double>(device.num_samples()));
  }
  *profile.mutable_device() = device;
  if (profile.cert_fingerprint().empty()) profile.set_cert_fingerprint(cert_fingerprint);
  profile.set_last_heartbeat_unix_ms(ToUnixMs(now));
  if (absl::Status s = options_.store->PutProfile(profile); !s.ok()) {
    FEDSCHED_LOG(warn, "could not persist profile of {}: {}", client_id, s.ToString());
  }
  ClientState& session = sessions_[client_id];
  session.session_token = NewId("s-");
  v1::RegisterResponse response;
  response.set_client_id(client_id);
  response.set_session_token(session.session_token);
  response.set_heartbeat_interval_ms(config_.heartbeat_interval_ms());
  *response.mutable_transport() = config_.transport();
  // Certificate paths are the server's own; never send them.
  response.mutable_transport()->clear_tls_cert_path();
  response.mutable_transport()->clear_tls_key_path();
  response.mutable_transport()->clear_tls_ca_path();
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(
    const v1::HeartbeatRequest& request, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(request.client_id(), request.session_token()));
  profiles_[request.client_id()].set_last_heartbeat_unix_ms(ToUnixMs(now));
  v1::HeartbeatResponse response;
  response.set_current_round(committed_round_ + 1);
  return response;
}

absl::StatusOr<v1::PollTaskResponse> Coordinator::PollTask(const v1::PollTaskRequest& request,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(request.client_id(), request.session_token()));
  profiles_[request.client_id()].set_last_heartbeat_unix_ms(ToUnixMs(now));
  v1::PollTaskResponse response;
  if (phase_ == Phase::kFinished) {
    response.set_finished(true);
    return response;
  }
  const std::string& task_id = sessions_[request.client_id()].task_id;
  auto it = tasks_.find(task_id);
  if (phase_ == Phase::kRunning && it != tasks_.end() && !it->second.uploaded &&
      !it->second.failed) {
    const TaskState& state = it->second;
    v1::Task* task = response.mutable_task();
    task->set_round(state.round);
    task->set_task_id(state.task_id);
    task->set_model_version(committed_round_);
    task->set_local_steps(state.local_steps);
    task->set_batch_size(config_.training().batch_size());
    task->set_learning_rate(config_.training().learning_rate());
    task->set_proximal_mu(config_.training().proximal_mu());
    task->set_deadline_unix_ms(ToUnixMs(round_deadline_));
    *task->mutable_cache_plan() = state.cache_plan;
    task->set_model_bytes(static_cast<int64_t>(global_blob_->bytes.size()));
    task->set_model_sha256(global_blob_->sha256);
    return response;
  }
  response.set_retry_after_ms(std::min<int64_t>(500, config_.heartbeat_interval_ms()));
  return response;
}

absl::StatusOr<std::shared_ptr<const ModelBlob>> Coordinator::ModelForTask(
    const std::string& client_id, const std::string& token, const std::string& task_id,
    absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(client_id, token));
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    if (closed_tasks_.contains(task_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id, " belongs to round ", closed_tasks_[task_id],
                       ", which has closed"));
    }
    return absl::NotFoundError(absl::StrCat("unknown task '", task_id, "'"));
  }
  if (it->second.client_id != client_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", task_id, " belongs to another client"));
  }
  if (it->second.failed) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task_id, " was marked failed"));
  }
  if (it->second.download_started == absl::InfinitePast()) it->second.download_started = now;
  return global_blob_;
}

absl::Status Coordinator::SubmitUpdate(const v1::UploadHeader& header, const std::string& payload,
                                       absl::Time now) {
  // Cheap checks and parsing happen before taking the lock.
  const v1::UpdateMetrics& metrics = header.metrics();
  if (metrics.num_examples() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("update for task ", header.task_id(), " declares num_examples = ",
                     metrics.num_examples(), "; it must be > 0"));
  }
  if (header.total_bytes() != static_cast<int64_t>(payload.size())) {
    return absl::InvalidArgumentError(absl::StrCat("update declares ", header.total_bytes(),
                                                   " bytes but carries ", payload.size()));
  }
  if (Sha256(payload) != header.sha256()) {
    return absl::InvalidArgumentError("update SHA-256 does not match its payload");
  }
  v1::Model delta;
  if (!delta.ParseFromString(payload)) {
    return absl::InvalidArgumentError("update payload is not a valid Model message");
  }

  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(header.client_id(), header.session_token()));
  auto it = tasks_.find(header.task_id());
  if (it == tasks_.end()) {
    if (options_.store->LoadReceipt(header.task_id()).ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("update for task ", header.task_id(), " was already accepted"));
    }
    if (closed_tasks_.contains(header.task_id())) {
      return absl::FailedPreconditionError(
          absl::StrCat("late update: round ", closed_tasks_[header.task_id()],
                       " has closed (current round ", committed_round_ + 1, ")"));
    }
    return absl::NotFoundError(absl::StrCat("unknown task '", header.task_id(), "'"));
  }
  TaskState& task = it->second;
  if (task.client_id != header.client_id()) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", header.task_id(), " belongs to another client"));
  }
  if (task.uploaded) {
    return absl::AlreadyExistsError(
        absl::StrCat("update for task ", header.task_id(), " was already accepted"));
  }
  if (task.failed) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", header.task_id(), " was marked failed (missed heartbeats)"));
  }
  if (header.round() != task.round) {
    return absl::FailedPreconditionError(absl::StrCat(
        "update names round ", header.round(), " but task ", task.task_id, " is for round ",
        task.round));
  }
  if (record_.total_examples() > INT64_MAX - metrics.num_examples()) {
    return absl::InvalidArgumentError("num_examples would overflow the round's example count");
  }
  FEDSCHED_RETURN_IF_ERROR(aggregator_->Accumulate(delta, metrics.num_examples()));

  task.uploaded = true;
  record_.set_updates_accepted(record_.updates_accepted() + 1);
  record_.set_total_examples(record_.total_examples() + metrics.num_examples());
  record_.add_accepted_task_ids(task.task_id);
  loss_sum_ += metrics.mean_loss() * metrics.num_examples();
  hits_ += metrics.cache_hits();
  misses_ += metrics.cache_misses();
  v1::Receipt receipt;
  receipt.set_task_id(task.task_id);
  receipt.set_client_id(task.client_id);
  receipt.set_round(task.round);
  receipt.set_sha256(header.sha256());
  receipt.set_num_examples(metrics.num_examples());
  receipt.set_received_unix_ms(ToUnixMs(now));
  receipts_.push_back(std::move(receipt));
  if (config_.audit_updates()) {
    v1::AuditedUpdate audited;
    audited.set_task_id(task.task_id);
    audited.set_round(task.round);
    audited.set_num_examples(metrics.num_examples());
    audited.set_payload(payload);
    audited.set_order(static_cast<int32_t>(audited_.size()));
    audited_.push_back(std::move(audited));
  }

  v1::ClientProfile& profile = profiles_[task.client_id];
  profile.set_successes(profile.successes() + 1);
  profile.set_last_heartbeat_unix_ms(ToUnixMs(now));
  if (metrics.train_seconds() > 0) {
    profile.set_compute_ms_per_sample(Ewma(
        profile.compute_ms_per_sample(), 1000.0 * metrics.train_seconds() / metrics.num_examples()));
  }
  if (metrics.download_seconds() > 0 && metrics.download_bytes() > 0) {
    profile.set_download_kbps(Ewma(profile.download_kbps(),
                                   metrics.download_bytes() * 8.0 / 1000.0 /
                                       metrics.download_seconds()));
  }
  const double duration = absl::ToDoubleSeconds(now - task.issued);
  if (task.predicted_seconds > 0 && duration > 0) {
    ape_sum_ += std::abs(task.predicted_seconds - duration) / duration;
  }
  profile.set_last_duration_s(duration);
  profile.set_measured_tasks(profile.measured_tasks() + 1);
  profile.set_statistical_utility(metrics.statistical_utility());
  const int64_t accesses = metrics.cache_hits() + metrics.cache_misses();
  if (accesses > 0) {
    profile.set_cache_hit_ratio(static_cast<double>(metrics.cache_hits()) / accesses);
  }
  profile.set_last_io_s(metrics.io_seconds());
  profile.set_last_samples_trained(metrics.num_examples());
  touched_profiles_.insert(task.client_id);
  return absl::OkStatus();
}

absl::Status Coordinator::ReportFailure(const v1::ReportFailureRequest& request, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(request.client_id(), request.session_token()));
  auto it = tasks_.find(request.task_id());
  if (it == tasks_.end() || it->second.client_id != request.client_id()) {
    return absl::NotFoundError(
        absl::StrCat("no open task '", request.task_id(), "' for client ", request.client_id()));
  }
  if (!it->second.uploaded && !it->second.failed) {
    FailTask(it->second, now, absl::StrCat("client reported: ", request.reason()));
  }
  return absl::OkStatus();
}

void Coordinator::FailTask(TaskState& task, absl::Time now, const std::string& why) {
  task.failed = true;
  v1::ClientProfile& profile = profiles_[task.client_id];
  profile.set_failures(profile.failures() + 1);
  touched_profiles_.insert(task.client_id);
  FEDSCHED_LOG(info, "round {}: task of {} failed: {}", task.round, task.client_id, why);
}

std::vector<std::string> Coordinator::SelectCohort(absl::Time now) {
  std::vector<std::string> online;
  for (const auto& [id, profile] : profiles_) {
    if (IsOnline(profile, now)) online.push_back(id);
  }
  std::sort(online.begin(), online.end());  // hash order is not deterministic
  std::shuffle(online.begin(), online.end(), rng_);
  const size_t want = static_cast<size_t>(
      std::ceil(config_.clients_per_round() * config_.selection().overcommit() - 1e-9));
  if (online.size() > want) online.resize(want);
  return online;
}

void Coordinator::PlanRound(absl::Time now) {
  std::vector<std::string> cohort = SelectCohort(now);
  if (cohort.empty()) return;
  phase_ = Phase::kRunning;
  round_ = committed_round_ + 1;
  round_start_ = now;
  round_deadline_ = now + absl::Seconds(config_.round_deadline_s());
  tasks_.clear();
  receipts_.clear();
  audited_.clear();
  touched_profiles_.clear();
  loss_sum_ = 0;
  hits_ = misses_ = 0;
  ape_sum_ = 0;
  record_.Clear();
  record_.set_round(round_);
  record_.set_start_unix_ms(ToUnixMs(now));
  record_.set_deadline_s(config_.round_deadline_s());
  const v1::TrainingConfig& training = config_.training();
  for (const std::string& client_id : cohort) {
    const v1::ClientProfile& profile = profiles_[client_id];
    TaskState task;
    task.task_id = NewId("t-");
    task.client_id = client_id;
    task.round = round_;
    task.issued = now;
    const int64_t samples = std::max<int64_t>(1, profile.device().num_samples());
    task.local_steps =
        training.local_steps() > 0
            ? training.local_steps()
            : static_cast<int32_t>(std::max<int64_t>(
                  1, (training.local_epochs() * samples + training.batch_size() - 1) /
                         training.batch_size()));
    v1::CachePlan& plan = task.cache_plan;
    plan.set_policy(config_.cache().policy());
    plan.set_capacity_samples(
        static_cast<int64_t>(std::floor(config_.cache().capacity_fraction() * samples)));
    int64_t bytes = plan.capacity_samples() * std::max<int64_t>(1, profile.device().sample_bytes());
    if (profile.device().storage_budget_bytes() > 0) {
      bytes = std::min(bytes, profile.device().storage_budget_bytes());
    }
    plan.set_capacity_bytes(bytes);
    plan.set_replication_factor(config_.cache().replication_factor());
    plan.set_samples_to_train(static_cast<int64_t>(task.local_steps) * training.batch_size());
    v1::SelectionReason* reason = record_.add_cohort();
    reason->set_client_id(client_id);
    reason->set_policy(config_.selection().policy());
    reason->set_local_steps(task.local_steps);
    reason->set_note("random among online clients");
    sessions_[client_id].task_id = task.task_id;
    tasks_.emplace(task.task_id, std::move(task));
  }
  FEDSCHED_LOG(info, "round {} planned: {} participants (attempt {})", round_, cohort.size(),
               attempt_ + 1);
}

void Coordinator::FailRound(absl::Time now, const std::string& why) {
  record_.set_outcome(v1::ROUND_OUTCOME_FAILED);
  record_.set_end_unix_ms(ToUnixMs(now));
  if (absl::Status s = options_.store->RecordFailedRound(record_); !s.ok()) {
    FEDSCHED_LOG(error, "could not record failed round {}: {}", round_, s.ToString());
  }
  FEDSCHED_LOG(warn, "round {} failed ({}); re-planning", round_, why);
  aggregator_->Reset();
  closed_tasks_.clear();
  for (const auto& [id, task] : tasks_) closed_tasks_[id] = task.round;
  tasks_.clear();
  ++attempt_;
  phase_ = Phase::kWaiting;
}

void Coordinator::CloseRound(absl::Time now, v1::RoundRecord* committed) {
  absl::StatusOr<v1::Model> next = aggregator_->Finalize(global_);
  if (!next.ok()) {
    FailRound(now, absl::StrCat("aggregation: ", next.status().ToString()));
    return;
  }
  record_.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  record_.set_end_unix_ms(ToUnixMs(now));
  if (record_.total_examples() > 0) {
    record_.set_mean_train_loss(loss_sum_ / record_.total_examples());
  }
  if (hits_ + misses_ > 0) {
    record_.set_cache_hit_ratio(static_cast<double>(hits_) / (hits_ + misses_));
  }
  if (record_.updates_accepted() > 0) {
    record_.set_predictor_mape(ape_sum_ / record_.updates_accepted());
  }
  for (auto& [id, task] : tasks_) {
    if (!task.uploaded && !task.failed) {
      record_.add_stragglers(task.client_id);
      FailTask(task, now, "straggler: round closed");
    }
  }
  if (options_.evaluator && round_ % config_.eval().every_n_rounds() == 0) {
    absl::StatusOr<EvalMetrics> eval = options_.evaluator(*next);
    if (eval.ok()) {
      record_.set_test_accuracy(eval->accuracy);
      record_.set_test_loss(eval->loss);
    } else {
      FEDSCHED_LOG(warn, "evaluation of round {} failed: {}", round_, eval.status().ToString());
    }
  }
  RoundCommit commit;
  commit.record = record_;
  commit.model = *next;
  commit.receipts = receipts_;
  commit.audited_updates = std::move(audited_);
  audited_.clear();
  for (const std::string& id : touched_profiles_) commit.profiles.push_back(profiles_[id]);
  commit.meta.set_config_text(ConfigToText(config_));
  commit.meta.add_optimizer_state(aggregator_->SaveState().SerializeAsString());
  if (absl::Status s = options_.store->CommitRound(std::move(commit)); !s.ok()) {
    FEDSCHED_LOG(error, "commit of round {} failed: {}", round_, s.ToString());
    FailRound(now, "store commit failed");
    return;
  }
  committed_round_ = round_;
  SetGlobalModel(*std::move(next));
  *committed = record_;
  closed_tasks_.clear();
  for (const auto& [id, task] : tasks_) closed_tasks_[id] = task.round;
  tasks_.clear();
  attempt_ = 0;
  phase_ = (config_.num_rounds() > 0 && committed_round_ >= config_.num_rounds())
               ? Phase::kFinished
               : Phase::kWaiting;
}

void Coordinator::Tick(absl::Time now) {
  v1::RoundRecord committed;
  bool did_commit = false;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kFinished) return;
    if (phase_ == Phase::kRunning) {
      int outstanding = 0;
      for (auto& [id, task] : tasks_) {
        if (task.uploaded || task.failed) continue;
        if (!IsOnline(profiles_[task.client_id], now)) {
          FailTask(task, now, "missed heartbeats");
          continue;
        }
        ++outstanding;
      }
      const int accepted = record_.updates_accepted();
      const bool enough = accepted >= config_.min_updates();
      const bool first_k = config_.round_closing() == v1::ROUND_CLOSING_FIRST_K &&
                           accepted >= config_.clients_per_round();
      const bool past_deadline = now >= round_deadline_;
      if (first_k || (enough && (past_deadline || outstanding == 0))) {
        CloseRound(now, &committed);
        did_commit = committed.round() > 0;
      } else if (past_deadline || outstanding == 0) {
        FailRound(now, absl::StrCat(accepted, " of min_updates ", config_.min_updates(),
                                    " updates by the ", past_deadline ? "deadline" : "last task"));
      }
    }
    if (phase_ == Phase::kWaiting && OnlineCount(now) >= config_.min_online_clients()) {
      PlanRound(now);
    }
  }
  if (did_commit && options_.on_round_committed) options_.on_round_committed(committed);
}

v1::GetStatusResponse Coordinator::GetStatus(int recent_rounds) const {
  v1::GetStatusResponse response;
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  response.set_committed_round(committed_round_);
  response.set_current_round(phase_ == Phase::kFinished ? committed_round_ : committed_round_ + 1);
  response.set_state(phase_ == Phase::kFinished  ? "finished"
                     : phase_ == Phase::kRunning ? "running"
                                                 : "waiting_for_clients");
  response.set_registered_clients(static_cast<int32_t>(profiles_.size()));
  response.set_online_clients(OnlineCount(now));
  if (phase_ == Phase::kRunning) *response.add_recent_rounds() = record_;
  absl::StatusOr<std::vector<v1::RoundRecord>> recent =
      options_.store->LoadRecentRounds(recent_rounds <= 0 ? 5 : recent_rounds);
  if (recent.ok()) {
    for (v1::RoundRecord& record : *recent) *response.add_recent_rounds() = std::move(record);
  }
  std::vector<std::string> ids;
  for (const auto& [id, profile] : profiles_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    const v1::ClientProfile& profile = profiles_.at(id);
    v1::ClientSummary* summary = response.add_clients();
    summary->set_client_id(id);
    summary->set_identity(profile.identity());
    summary->set_online(IsOnline(profile, now));
    *summary->mutable_profile() = profile;
  }
  return response;
}

bool Coordinator::finished() const {
  absl::MutexLock lock(&mu_);
  return phase_ == Phase::kFinished;
}

int64_t Coordinator::committed_round() const {
  absl::MutexLock lock(&mu_);
  return committed_round_;
}

int64_t Coordinator::max_update_bytes() const {
  absl::MutexLock lock(&mu_);
  // A delta has the global model's shapes; allow generous framing slack.
  return static_cast<int64_t>(global_blob_->bytes.size()) * 2 + (1 << 20);
}

}  // namespace fedsched
