#include "server/service/coordinator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "server/aggregation/layout.h"

namespace fedsched {
namespace {

int64_t ToUnixMs(absl::Time t) { return absl::ToUnixMillis(t); }
double ToSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// Parse targets kept for reuse: as many as updates are typically parsed at once (one per core of
// a small server), each the size of the model.
constexpr size_t kMaxSpareDeltas = 2;

// The concatenation of `pieces` as a protobuf input stream, without copying it.
class PiecesInputStream : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit PiecesInputStream(absl::Span<const std::string> pieces) : pieces_(pieces) {}

  bool Next(const void** data, int* size) override {
    while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
    if (index_ == pieces_.size()) return false;
    const size_t n = std::min<size_t>(pieces_[index_].size() - offset_, INT_MAX);
    *data = pieces_[index_].data() + offset_;
    *size = static_cast<int>(n);
    offset_ += n;
    position_ += static_cast<int64_t>(n);
    return true;
  }
  // Only ever backs up within the block the last Next() returned.
  void BackUp(int count) override {
    offset_ -= static_cast<size_t>(count);
    position_ -= count;
  }
  bool Skip(int count) override {
    const void* data;
    int size;
    while (count > 0) {
      if (!Next(&data, &size)) return false;
      if (size > count) BackUp(size - count);
      count -= std::min(size, count);
    }
    return true;
  }
  int64_t ByteCount() const override { return position_; }

 private:
  const absl::Span<const std::string> pieces_;
  size_t index_ = 0;
  size_t offset_ = 0;
  int64_t position_ = 0;
};

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      config_(options_.config),
      async_(config_.aggregation().async_fedbuff()) {}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(CoordinatorOptions options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("coordinator needs a store");
  auto coordinator = std::unique_ptr<Coordinator>(new Coordinator(std::move(options)));
  FEDSCHED_RETURN_IF_ERROR(coordinator->Open());
  return coordinator;
}

absl::Status Coordinator::Open() {
  absl::MutexLock lock(&mu_);
  Store& store = *options_.store;
  FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBookOptions book_options,
                            profile::ProfileBookOptions::FromServerConfig(config_));
  FEDSCHED_ASSIGN_OR_RETURN(book_, profile::ProfileBook::Create(book_options));
  FEDSCHED_ASSIGN_OR_RETURN(planner::PlannerOptions planner_options,
                            planner::PlannerOptions::FromServerConfig(config_));
  FEDSCHED_ASSIGN_OR_RETURN(planner_, planner::Planner::Create(planner_options, book_.get()));

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
    // The configured model must be the stored one's architecture: a different one would train
    // clients on shapes the stored model does not have.
    if (options_.initial_model.tensors_size() > 0) {
      FEDSCHED_ASSIGN_OR_RETURN(ModelLayout configured,
                                ModelLayout::FromModel(options_.initial_model));
      std::vector<int> index;
      if (absl::Status s = configured.Match(model, &index); !s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the store holds a model (round ", committed_round_,
            ") that does not match the configured model: ", s.message(),
            "; use the run's original model config, or a new store_path"));
      }
    }
    FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::ClientProfile> profiles, store.LoadProfiles());
    FEDSCHED_RETURN_IF_ERROR(book_->Import(profiles));
    FEDSCHED_ASSIGN_OR_RETURN(std::string planner_bytes, store.LoadPlannerState());
    if (!planner_bytes.empty()) {
      v1::PlannerState state;
      if (!state.ParseFromString(planner_bytes)) {
        return absl::DataLossError("corrupt planner state in the store");
      }
      FEDSCHED_RETURN_IF_ERROR(planner_->ImportState(state));
    }
    FEDSCHED_LOG(info, "resuming after committed round {} with {} known clients",
                 committed_round_, book_->size());
  }
  FEDSCHED_ASSIGN_OR_RETURN(aggregator_, Aggregator::Create(config_.aggregation(), model));
  for (const v1::Tensor& tensor : model.tensors()) delta_capacity_.push_back(tensor.data_size());
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
  PublishGlobalModel();
}

void Coordinator::PublishGlobalModel() {
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

absl::StatusOr<profile::ClientIndex> Coordinator::CheckSession(const std::string& client_id,
                                                               const std::string& token) const {
  auto it = sessions_.find(client_id);
  std::optional<profile::ClientIndex> index = book_->FindByClientId(client_id);
  if (it == sessions_.end() || token.empty() || it->second.session_token != token || !index) {
    return absl::UnauthenticatedError(
        absl::StrCat("no session for client '", client_id, "' with this token; register again"));
  }
  return *index;
}

std::vector<v1::ClientProfile> Coordinator::TakeDirtyProfiles() {
  std::vector<profile::ClientIndex> dirty;
  book_->TakeDirty(&dirty);
  std::vector<v1::ClientProfile> out;
  out.reserve(dirty.size());
  for (profile::ClientIndex i : dirty) out.push_back(book_->profile(i));
  return out;
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
  if (std::optional<profile::ClientIndex> known = book_->FindByIdentity(request.identity())) {
    const std::string& bound = book_->profile(*known).cert_fingerprint();
    if (!bound.empty() && bound != cert_fingerprint) {
      return absl::PermissionDeniedError(absl::StrCat(
          "identity '", request.identity(), "' is bound to another client certificate"));
    }
  }
  FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBook::Registration registration,
                            book_->OnRegister(request.identity(), device, ToSeconds(now)));
  if (book_->profile(registration.index).cert_fingerprint().empty() && !cert_fingerprint.empty()) {
    FEDSCHED_RETURN_IF_ERROR(book_->SetCertFingerprint(registration.index, cert_fingerprint));
  }
  const v1::ClientProfile& profile = book_->profile(registration.index);
  if (absl::Status s = options_.store->PutProfile(profile); !s.ok()) {
    FEDSCHED_LOG(warn, "could not persist profile of {}: {}", profile.client_id(), s.ToString());
  }
  ClientState& session = sessions_[profile.client_id()];
  session.session_token = NewId("s-");
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

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(
    const v1::HeartbeatRequest& request, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index,
                            CheckSession(request.client_id(), request.session_token()));
  FEDSCHED_RETURN_IF_ERROR(book_->OnHeartbeat(index, ToSeconds(now)));
  v1::HeartbeatResponse response;
  response.set_current_round(committed_round_ + 1);
  return response;
}

absl::StatusOr<v1::PollTaskResponse> Coordinator::PollTask(const v1::PollTaskRequest& request,
                                                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_ASSIGN_OR_RETURN(profile::ClientIndex index,
                            CheckSession(request.client_id(), request.session_token()));
  FEDSCHED_RETURN_IF_ERROR(book_->OnHeartbeat(index, ToSeconds(now)));
  v1::PollTaskResponse response;
  if (phase_ == Phase::kFinished) {
    response.set_finished(true);
    return response;
  }
  const std::string& task_id = sessions_[request.client_id()].task_id;
  auto it = tasks_.find(task_id);
  if (phase_ == Phase::kRunning && it != tasks_.end() && it->second.in_flight()) {
    TaskState& state = it->second;
    // The model the task is announced with is the one its download serves, even if a FedBuff
    // version commits in between (the client checks the announced size and SHA-256).
    if (state.blob == nullptr) {
      state.blob = global_blob_;
      state.base_version = committed_round_;
    }
    v1::Task* task = response.mutable_task();
    task->set_round(state.round);
    task->set_task_id(state.task_id);
    task->set_model_version(state.base_version);
    task->set_local_steps(state.local_steps);
    task->set_batch_size(config_.training().batch_size());
    task->set_learning_rate(config_.training().learning_rate());
    task->set_proximal_mu(config_.training().proximal_mu());
    task->set_deadline_unix_ms(ToUnixMs(round_deadline_));
    *task->mutable_cache_plan() = state.cache_plan;
    task->set_model_bytes(static_cast<int64_t>(state.blob->bytes.size()));
    task->set_model_sha256(state.blob->sha256);
    return response;
  }
  response.set_retry_after_ms(std::min<int64_t>(500, config_.heartbeat_interval_ms()));
  auto prefetch = prefetch_.find(request.client_id());
  if (prefetch != prefetch_.end()) *response.mutable_prefetch_plan() = prefetch->second;
  return response;
}

absl::StatusOr<std::shared_ptr<const ModelBlob>> Coordinator::ModelForTask(
    const std::string& client_id, const std::string& token, const std::string& task_id,
    absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(client_id, token).status());
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
  // The model announced by PollTask (base_version is its version: FedBuff weighs the update by
  // how far behind it is).
  TaskState& task = it->second;
  if (task.blob == nullptr) {
    task.blob = global_blob_;
    task.base_version = committed_round_;
  }
  return task.blob;
}

absl::Status Coordinator::SubmitUpdate(const v1::UploadHeader& header, const std::string& payload,
                                       absl::Time now, double upload_seconds) {
  return SubmitUpdate(header, absl::MakeConstSpan(&payload, 1), now, upload_seconds);
}

std::unique_ptr<v1::Model> Coordinator::TakeDelta() {
  {
    absl::MutexLock lock(&spare_mu_);
    if (!spare_deltas_.empty()) {
      std::unique_ptr<v1::Model> delta = std::move(spare_deltas_.back());
      spare_deltas_.pop_back();
      return delta;
    }
  }
  // Room for each tensor of the global model, in its order: parsing a payload that arrives in
  // pieces then never regrows a tensor (Clear keeps the tensors and their capacity for reuse).
  auto delta = std::make_unique<v1::Model>();
  for (int size : delta_capacity_) delta->add_tensors()->mutable_data()->Reserve(size);
  delta->Clear();
  return delta;
}

void Coordinator::RecycleDelta(std::unique_ptr<v1::Model> delta) {
  // A model that took more tensors than the global model has (a malformed or hostile update)
  // would keep them all allocated: drop it.
  if (static_cast<size_t>(delta->tensors_size()) > delta_capacity_.size()) return;
  delta->Clear();
  absl::MutexLock lock(&spare_mu_);
  if (spare_deltas_.size() < kMaxSpareDeltas) spare_deltas_.push_back(std::move(delta));
}

namespace {

// The checks of an upload's metrics (they need no coordinator state): num_examples > 0, counts
// non-negative and at most 2^53, times and losses finite and non-negative.
absl::Status CheckUpdateMetrics(const v1::UploadHeader& header) {
  const v1::UpdateMetrics& metrics = header.metrics();
  if (metrics.num_examples() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("update for task ", header.task_id(), " declares num_examples = ",
                     metrics.num_examples(), "; it must be > 0"));
  }
  constexpr int64_t kMaxCount = int64_t{1} << 53;
  if (metrics.cache_hits() < 0 || metrics.cache_misses() < 0 ||
      metrics.storage_bytes_read() < 0 || metrics.cache_hits() > kMaxCount ||
      metrics.cache_misses() > kMaxCount || metrics.storage_bytes_read() > kMaxCount ||
      !std::isfinite(metrics.mean_loss()) || !std::isfinite(metrics.train_seconds()) ||
      !std::isfinite(metrics.io_seconds()) || !std::isfinite(metrics.statistical_utility()) ||
      metrics.train_seconds() < 0 || metrics.io_seconds() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update for task ", header.task_id(), " reports negative, absurd or non-finite metrics"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Coordinator::CheckUploadHeader(const v1::UploadHeader& header) {
  FEDSCHED_RETURN_IF_ERROR(CheckUpdateMetrics(header));
  absl::MutexLock lock(&mu_);
  return CheckUpdate(header).status();
}

absl::Status Coordinator::SubmitUpdate(const v1::UploadHeader& header,
                                       absl::Span<const std::string> payload_pieces, absl::Time now,
                                       double upload_seconds) {
  // Cheap checks, hashing and parsing happen before taking the lock. Parsing goes into a recycled
  // model: filling a fresh one of tens of MB costs a page fault per 4 KiB, about as much CPU as
  // the hash (docs/BENCHMARKS.md, server ingest).
  FEDSCHED_RETURN_IF_ERROR(CheckUpdateMetrics(header));
  int64_t payload_bytes = 0;
  for (const std::string& piece : payload_pieces) {
    payload_bytes += static_cast<int64_t>(piece.size());
  }
  if (header.total_bytes() != payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("update declares ", header.total_bytes(),
                                                   " bytes but carries ", payload_bytes));
  }
  if (Sha256OfPieces(payload_pieces) != header.sha256()) {
    return absl::InvalidArgumentError("update SHA-256 does not match its payload");
  }
  std::unique_ptr<v1::Model> delta = TakeDelta();
  bool parsed;
  if (payload_pieces.size() == 1) {
    parsed = delta->ParseFromString(payload_pieces[0]);
  } else {
    PiecesInputStream input(payload_pieces);
    parsed = delta->ParseFromZeroCopyStream(&input);
  }
  absl::Status s = absl::InvalidArgumentError("update payload is not a valid Model message");
  if (parsed) s = ApplyUpdate(header, *delta, payload_pieces, now, upload_seconds);
  RecycleDelta(std::move(delta));
  return s;
}

absl::Status Coordinator::ApplyUpdate(const v1::UploadHeader& header, const v1::Model& delta,
                                      absl::Span<const std::string> payload_pieces, absl::Time now,
                                      double upload_seconds) {
  // Flat combining: while one thread holds mu_, uploads that arrive queue up; the next thread to
  // get mu_ decides all of them, folding them in few passes over the running sum instead of one
  // pass each (docs/BENCHMARKS.md section 1).
  PendingUpdate self;
  self.header = &header;
  self.delta = &delta;
  self.payload_pieces = payload_pieces;
  self.now = now;
  self.upload_seconds = upload_seconds;
  {
    absl::MutexLock lock(&queue_mu_);
    if (queue_tail_ == nullptr) {
      queue_head_ = &self;
    } else {
      queue_tail_->next = &self;
    }
    queue_tail_ = &self;
  }
  std::vector<v1::RoundRecord> committed;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    // Queued updates are taken and marked done within one hold of mu_, so an update not done
    // yet is still queued, and this thread decides it with the others.
    if (self.done) return self.status;
    PendingUpdate* head;
    {
      absl::MutexLock queue_lock(&queue_mu_);
      head = queue_head_;
      queue_head_ = queue_tail_ = nullptr;
    }
    DecideUpdates(head);
    // The other threads read their verdicts once they get mu_, and only then touch their deltas.
    for (PendingUpdate* update = head; update != nullptr; update = update->next) {
      update->done = true;
    }
    status = self.status;
    committed.swap(inline_commits_);
  }
  // FedBuff versions committed while deciding (a full buffer commits at once).
  if (options_.on_round_committed) {
    for (const v1::RoundRecord& record : committed) options_.on_round_committed(record);
  }
  return status;
}

void Coordinator::DecideUpdates(PendingUpdate* head) {
  // Candidates are checked against the state before any of them is folded. The checks whose
  // answer depends on whether earlier candidates get accepted (the same task twice, the first-K
  // cap, the example count) fold those first, so every verdict is the one that deciding the
  // updates one at a time, in queue order, gives.
  std::vector<FoldCandidate> candidates;
  int64_t candidate_examples = 0;  // total of the candidates' num_examples
  // FedBuff's buffer holds K updates whatever round_closing says.
  const bool first_k = config_.round_closing() == v1::ROUND_CLOSING_FIRST_K || async_;
  absl::Time last_now = absl::InfinitePast();
  for (PendingUpdate* update = head; update != nullptr; update = update->next) {
    last_now = std::max(last_now, update->now);
    // num_examples > 0 was checked before queueing; total_examples + candidate_examples stays
    // <= INT64_MAX because each candidate passed this test.
    const int64_t examples = update->header->metrics().num_examples();
    const bool depends_on_candidates =
        (first_k && record_.updates_accepted() + static_cast<int64_t>(candidates.size()) >=
                        config_.clients_per_round()) ||
        record_.total_examples() + candidate_examples > INT64_MAX - examples ||
        std::any_of(candidates.begin(), candidates.end(), [&](const FoldCandidate& c) {
          return c.task->task_id == update->header->task_id();
        });
    if (depends_on_candidates) {
      FoldCandidates(&candidates);
      candidate_examples = 0;
      MaybeCommitBuffer(update->now);
    }
    absl::StatusOr<TaskState*> task = CheckUpdate(*update->header);
    if (!task.ok()) {
      update->status = task.status();
      continue;
    }
    candidates.push_back({update, *task});
    candidate_examples += examples;
  }
  FoldCandidates(&candidates);
  MaybeCommitBuffer(last_now);
}

absl::StatusOr<Coordinator::TaskState*> Coordinator::CheckUpdate(const v1::UploadHeader& header) {
  const v1::UpdateMetrics& metrics = header.metrics();
  FEDSCHED_RETURN_IF_ERROR(CheckSession(header.client_id(), header.session_token()).status());
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
  // FedAvg weighs by examples: a client may not claim more than the work it was given.
  const int64_t planned_examples =
      static_cast<int64_t>(task.local_steps) * config_.training().batch_size();
  if (metrics.num_examples() > planned_examples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update for task ", task.task_id, " claims ", metrics.num_examples(),
        " examples; the task was for at most ", planned_examples, " (local_steps ",
        task.local_steps, " x batch_size ", config_.training().batch_size(), ")"));
  }
  if (config_.round_closing() == v1::ROUND_CLOSING_FIRST_K &&
      record_.updates_accepted() >= config_.clients_per_round()) {
    // The round is complete with its first K updates; the next tick commits it.
    return absl::FailedPreconditionError(absl::StrCat(
        "late update: round ", task.round, " already has its ", config_.clients_per_round(),
        " updates (straggler)"));
  }
  if (record_.total_examples() > INT64_MAX - metrics.num_examples()) {
    return absl::InvalidArgumentError("num_examples would overflow the round's example count");
  }
  return &task;
}

void Coordinator::FoldCandidates(std::vector<FoldCandidate>* candidates) {
  if (candidates->empty()) return;
  std::vector<Aggregator::WeightedUpdate> batch;
  batch.reserve(candidates->size());
  for (const FoldCandidate& c : *candidates) {
    batch.push_back({.delta = c.update->delta,
                     .num_examples = c.update->header->metrics().num_examples(),
                     .staleness = Staleness(*c.task)});
  }
  std::vector<absl::Status> verdicts = aggregator_->AccumulateBatch(batch);
  bool folded = false;
  for (size_t i = 0; i < candidates->size(); ++i) {
    const FoldCandidate& c = (*candidates)[i];
    if (verdicts[i].ok()) {
      RecordAccepted(*c.update, *c.task);
      folded = true;
    }
    c.update->status = std::move(verdicts[i]);
  }
  if (folded) record_.set_aggregation_calls(record_.aggregation_calls() + 1);
  candidates->clear();
}

void Coordinator::RecordAccepted(const PendingUpdate& update, TaskState& task) {
  const v1::UploadHeader& header = *update.header;
  const v1::UpdateMetrics& metrics = header.metrics();
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
  // The round the update counts in: under FedBuff a later one than the task's if it is stale.
  receipt.set_round(round_);
  receipt.set_sha256(header.sha256());
  receipt.set_num_examples(metrics.num_examples());
  receipt.set_received_unix_ms(ToUnixMs(update.now));
  receipts_.push_back(std::move(receipt));
  if (config_.audit_updates()) {
    v1::AuditedUpdate audited;
    audited.set_task_id(task.task_id);
    audited.set_round(round_);
    audited.set_num_examples(metrics.num_examples());
    audited.set_staleness(Staleness(task));
    std::string* payload = audited.mutable_payload();
    payload->reserve(static_cast<size_t>(header.total_bytes()));
    for (const std::string& piece : update.payload_pieces) payload->append(piece);
    audited.set_order(static_cast<int32_t>(audited_.size()));
    audited_.push_back(std::move(audited));
  }
  // Measured times feed the profile and the round-time predictor.
  profile::TaskTiming timing;
  timing.completion_s = std::max(1e-6, absl::ToDoubleSeconds(update.now - task.issued));
  timing.upload_s = update.upload_seconds;
  timing.upload_bytes = update.upload_seconds > 0 ? header.total_bytes() : 0;
  if (absl::Status s =
          planner_->OnUpdate(task.index, task.round, metrics, timing, ToSeconds(update.now));
      !s.ok()) {
    FEDSCHED_LOG(warn, "planner feedback for {}: {}", task.client_id, s.ToString());
  }
}

absl::Status Coordinator::ReportFailure(const v1::ReportFailureRequest& request, absl::Time now) {
  absl::MutexLock lock(&mu_);
  FEDSCHED_RETURN_IF_ERROR(CheckSession(request.client_id(), request.session_token()).status());
  auto it = tasks_.find(request.task_id());
  if (it == tasks_.end() || it->second.client_id != request.client_id()) {
    return absl::NotFoundError(
        absl::StrCat("no open task '", request.task_id(), "' for client ", request.client_id()));
  }
  if (it->second.in_flight()) {
    FailTask(it->second, now, absl::StrCat("client reported: ", request.reason()));
  }
  return absl::OkStatus();
}

void Coordinator::FailTask(TaskState& task, absl::Time now, const std::string& why) {
  task.failed = true;
  if (absl::Status s = planner_->OnTaskFailed(task.index, task.round, profile::TaskFailure::kDropped,
                                              ToSeconds(now));
      !s.ok()) {
    FEDSCHED_LOG(warn, "planner failure feedback for {}: {}", task.client_id, s.ToString());
  }
  FEDSCHED_LOG(info, "round {}: task of {} failed: {}", task.round, task.client_id, why);
}

void Coordinator::PlanRound(absl::Time now) {
  std::vector<profile::ClientIndex> candidates;
  book_->CollectSelectable(ToSeconds(now), &candidates);
  // Only clients with a live session can fetch a task (after a restart, profiles come back
  // before their devices re-register).
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                  [&](profile::ClientIndex i) {
                                    return !sessions_.contains(book_->profile(i).client_id());
                                  }),
                   candidates.end());
  // FedBuff: tasks of earlier versions stay in flight; only idle clients get new ones, up to
  // ceil(K x overcommit) tasks in flight in all.
  int in_flight = 0;
  int32_t free_slots = 0;
  if (async_) {
    for (const auto& [id, task] : tasks_) in_flight += task.in_flight() ? 1 : 0;
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](profile::ClientIndex i) {
                                      auto task = tasks_.find(
                                          sessions_[book_->profile(i).client_id()].task_id);
                                      return task != tasks_.end() && task->second.in_flight();
                                    }),
                     candidates.end());
    free_slots = std::max(0, planner_->SlotsPerRound() - in_flight);
    // New tasks only with min_online_clients online, as for a synchronous round; the buffer
    // still opens for the updates in flight.
    if (book_->CountOnline(ToSeconds(now)) < config_.min_online_clients()) free_slots = 0;
  }
  absl::StatusOr<planner::RoundPlan> plan = planner::RoundPlan();
  planner::PlanRequest request;
  request.round = committed_round_ + 1;
  if (!candidates.empty() && (!async_ || free_slots > 0)) {
    request.now_s = ToSeconds(now);
    request.candidates = candidates;
    request.model_bytes = static_cast<int64_t>(global_blob_->bytes.size());
    request.max_participants = free_slots;
    plan = planner_->PlanRound(request);
    if (!plan.ok()) {
      FEDSCHED_LOG(error, "planning round {} failed: {}", request.round, plan.status().ToString());
      if (!async_ || in_flight == 0) return;
      plan = planner::RoundPlan();
    }
  }
  if (plan->participants.empty() && in_flight == 0) return;
  phase_ = Phase::kRunning;
  round_ = request.round;
  const double deadline_s =
      plan->participants.empty() ? config_.round_deadline_s() : plan->deadline_s;
  round_deadline_ = now + absl::Seconds(deadline_s);
  if (!async_) tasks_.clear();
  receipts_.clear();
  audited_.clear();
  loss_sum_ = 0;
  hits_ = misses_ = 0;
  record_.Clear();
  record_.set_round(round_);
  record_.set_start_unix_ms(ToUnixMs(now));
  record_.set_deadline_s(deadline_s);
  for (planner::PlannedTask& planned : plan->participants) {
    TaskState task;
    task.task_id = NewId("t-");
    task.client_id = planned.client_id;
    task.index = planned.index;
    task.round = round_;
    task.base_version = committed_round_;
    task.issued = now;
    task.local_steps = planned.local_steps;
    task.cache_plan = std::move(planned.cache_plan);
    *record_.add_cohort() = std::move(planned.reason);
    sessions_[task.client_id].task_id = task.task_id;
    tasks_.emplace(task.task_id, std::move(task));
  }
  prefetch_.clear();
  for (planner::PrefetchHint& hint : plan->expected_next) {
    prefetch_[hint.client_id] = std::move(hint.cache_plan);
  }
  FEDSCHED_LOG(info, "round {} planned: {} participants{}, deadline {:.1f} s (attempt {})", round_,
               plan->participants.size(),
               async_ ? absl::StrCat(" + ", in_flight, " in flight from earlier versions") : "",
               deadline_s, attempt_ + 1);
}

void Coordinator::FailRound(absl::Time now, const std::string& why) {
  record_.set_outcome(v1::ROUND_OUTCOME_FAILED);
  record_.set_end_unix_ms(ToUnixMs(now));
  planner_->OnRoundFinished(round_, /*committed=*/false, ToSeconds(now));
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
  // The new model goes into the previous round's model (no fresh allocation per round).
  if (absl::Status s = aggregator_->FinalizeInto(global_, &next_model_); !s.ok()) {
    FailRound(now, absl::StrCat("aggregation: ", s.ToString()));
    return;
  }
  const v1::Model& next = next_model_;
  record_.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  record_.set_end_unix_ms(ToUnixMs(now));
  if (record_.total_examples() > 0) {
    record_.set_mean_train_loss(loss_sum_ / record_.total_examples());
  }
  if (hits_ + misses_ > 0) {
    record_.set_cache_hit_ratio(static_cast<double>(hits_) / (hits_ + misses_));
  }
  for (auto& [id, task] : tasks_) {
    // FedBuff: tasks still in flight carry over to the next version.
    if (task.in_flight() && !async_) {
      // Stragglers: the planner records their elapsed time as a lower bound on their duration.
      record_.add_stragglers(task.client_id);
      task.failed = true;
    }
  }
  const planner::RoundSummary summary =
      planner_->OnRoundFinished(round_, /*committed=*/true, ToSeconds(now));
  record_.set_predictor_mape(summary.predictor_mape);
  if (options_.evaluator && round_ % config_.eval().every_n_rounds() == 0) {
    absl::StatusOr<EvalMetrics> eval = options_.evaluator(next);
    if (eval.ok()) {
      record_.set_test_accuracy(eval->accuracy);
      record_.set_test_loss(eval->loss);
    } else {
      FEDSCHED_LOG(warn, "evaluation of round {} failed: {}", round_, eval.status().ToString());
    }
  }
  RoundCommit commit;
  commit.record = record_;
  commit.model = next;
  commit.receipts = receipts_;
  commit.profiles = TakeDirtyProfiles();
  commit.planner_state = planner_->ExportState().SerializeAsString();
  commit.meta.set_config_text(ConfigToText(config_));
  commit.meta.add_optimizer_state(aggregator_->SaveState().SerializeAsString());
  commit.audited_updates = std::move(audited_);
  audited_.clear();
  if (absl::Status s = options_.store->CommitRound(std::move(commit)); !s.ok()) {
    FEDSCHED_LOG(error, "commit of round {} failed: {}", round_, s.ToString());
    FailRound(now, "store commit failed");
    return;
  }
  committed_round_ = round_;
  global_.Swap(&next_model_);  // next_model_ keeps the old model's storage for the next round
  PublishGlobalModel();
  *committed = record_;
  closed_tasks_.clear();
  attempt_ = 0;
  phase_ = (config_.num_rounds() > 0 && committed_round_ >= config_.num_rounds())
               ? Phase::kFinished
               : Phase::kWaiting;
  if (!async_ || phase_ == Phase::kFinished) {
    for (const auto& [id, task] : tasks_) closed_tasks_[id] = task.round;
    tasks_.clear();
    return;
  }
  // FedBuff: keep the tasks in flight that can still be accepted, and open the next version's
  // buffer at once (with new tasks for idle clients), so that no upload finds it closed.
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    TaskState& task = it->second;
    if (task.in_flight() && Staleness(task) > aggregator_->config().max_staleness()) {
      FailTask(task, now, absl::StrCat("more than max_staleness = ",
                                       aggregator_->config().max_staleness(),
                                       " versions behind"));
    }
    if (!task.in_flight()) {
      closed_tasks_[it->first] = task.round;
      tasks_.erase(it++);
    } else {
      ++it;
    }
  }
  PlanRound(now);
}

void Coordinator::MaybeCommitBuffer(absl::Time now) {
  if (!async_ || phase_ != Phase::kRunning ||
      record_.updates_accepted() < config_.clients_per_round()) {
    return;
  }
  v1::RoundRecord committed;
  CloseRound(now, &committed);
  if (committed.round() > 0) inline_commits_.push_back(std::move(committed));
}

void Coordinator::Tick(absl::Time now) {
  v1::RoundRecord committed;
  bool did_commit = false;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kFinished) return;
    const double now_s = ToSeconds(now);
    if (phase_ == Phase::kRunning) {
      int outstanding = 0;
      for (auto& [id, task] : tasks_) {
        if (!task.in_flight()) continue;
        if (!book_->IsOnline(task.index, now_s)) {
          FailTask(task, now, "missed heartbeats");
          continue;
        }
        ++outstanding;
      }
      const int accepted = record_.updates_accepted();
      const bool enough = accepted >= config_.min_updates();
      const bool first_k =
          (config_.round_closing() == v1::ROUND_CLOSING_FIRST_K || async_) &&
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
    if (phase_ == Phase::kWaiting && book_->CountOnline(now_s) >= config_.min_online_clients()) {
      PlanRound(now);
    }
  }
  if (did_commit && options_.on_round_committed) options_.on_round_committed(committed);
}

v1::GetStatusResponse Coordinator::GetStatus(int recent_rounds) const {
  v1::GetStatusResponse response;
  absl::MutexLock lock(&mu_);
  const double now_s = ToSeconds(absl::Now());
  response.set_committed_round(committed_round_);
  response.set_current_round(phase_ == Phase::kFinished ? committed_round_ : committed_round_ + 1);
  response.set_state(phase_ == Phase::kFinished  ? "finished"
                     : phase_ == Phase::kRunning ? "running"
                                                 : "waiting_for_clients");
  response.set_registered_clients(static_cast<int32_t>(book_->size()));
  response.set_online_clients(static_cast<int32_t>(book_->CountOnline(now_s)));
  if (phase_ == Phase::kRunning) *response.add_recent_rounds() = record_;
  absl::StatusOr<std::vector<v1::RoundRecord>> recent =
      options_.store->LoadRecentRounds(recent_rounds <= 0 ? 5 : recent_rounds);
  if (recent.ok()) {
    for (v1::RoundRecord& record : *recent) *response.add_recent_rounds() = std::move(record);
  }
  for (profile::ClientIndex i = 0; i < static_cast<profile::ClientIndex>(book_->size()); ++i) {
    const v1::ClientProfile& profile = book_->profile(i);
    v1::ClientSummary* summary = response.add_clients();
    summary->set_client_id(profile.client_id());
    summary->set_identity(profile.identity());
    summary->set_online(book_->IsOnline(i, now_s));
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
