#include "server/round/engine.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compress/update_codec.h"
#include "common/status_macros.h"
#include "server/aggregation/checks.h"
#include "server/round/forecast_persistence.h"

namespace fedsched::round {

RoundEngine::RoundEngine(EngineOptions options)
    : options_(std::move(options)),
      config_(options_.config),
      async_(config_.aggregation().async_fedbuff()),
      closing_(config_),
      backoff_(config_),
      influence_(config_) {}

RoundEngine::~RoundEngine() = default;

absl::StatusOr<std::unique_ptr<RoundEngine>> RoundEngine::Create(EngineOptions options) {
  if (options.presence == nullptr) {
    return absl::InvalidArgumentError("round engine: a Presence is required");
  }
  if (options.model.tensors_size() == 0) {
    return absl::InvalidArgumentError("round engine: the global model has no tensors");
  }
  if (options.version < 0) {
    return absl::InvalidArgumentError("round engine: version must be >= 0");
  }
  std::unique_ptr<RoundEngine> engine(new RoundEngine(std::move(options)));
  FEDSCHED_RETURN_IF_ERROR(engine->Init());
  return engine;
}

absl::Status RoundEngine::Init() {
  FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBookOptions book_options,
                            profile::ProfileBookOptions::FromServerConfig(config_));
  FEDSCHED_ASSIGN_OR_RETURN(book_, profile::ProfileBook::Create(book_options));
  if (config_.selection().learned_availability() && options_.availability == nullptr) {
    FEDSCHED_ASSIGN_OR_RETURN(forecast::AvailabilityForecast f,
                              forecast::AvailabilityForecast::Create({}));
    learned_availability_ = std::make_unique<forecast::AvailabilityForecast>(std::move(f));
    heartbeat_timeout_s_ = book_options.heartbeat_timeout_s;
  }
  if (!options_.profiles.empty()) FEDSCHED_RETURN_IF_ERROR(book_->Import(options_.profiles));
  FEDSCHED_ASSIGN_OR_RETURN(planner::PlannerOptions planner_options,
                            planner::PlannerOptions::FromServerConfig(config_));
  planner_options.fit.model = ResolveModelFeatures();
  FEDSCHED_ASSIGN_OR_RETURN(planner_, planner::Planner::Create(planner_options, book_.get()));
  if (!options_.planner_state.empty()) FEDSCHED_RETURN_IF_ERROR(RestorePlannerState());
  FEDSCHED_ASSIGN_OR_RETURN(aggregator_, Aggregator::Create(config_.aggregation(), options_.model));
  if (!options_.optimizer_state.empty()) {
    v1::Model state;
    if (!state.ParseFromString(options_.optimizer_state)) {
      return absl::DataLossError("round engine: the restored optimiser state does not parse");
    }
    FEDSCHED_RETURN_IF_ERROR(InitPrivacy(&state));
    FEDSCHED_RETURN_IF_ERROR(aggregator_->RestoreState(state));
  } else {
    FEDSCHED_RETURN_IF_ERROR(InitPrivacy(nullptr));
  }
  FEDSCHED_ASSIGN_OR_RETURN(CollapseGuard guard,
                            CollapseGuard::Create(config_, options_.guard_reference));
  guard_.emplace(std::move(guard));
  FEDSCHED_RETURN_IF_ERROR(ValidateDownlink(config_));
  versions_ = std::make_unique<ModelVersions>(options_.version, std::move(options_.model));
  options_.profiles.clear();
  options_.planner_state.clear();
  options_.optimizer_state.clear();
  return absl::OkStatus();
}

absl::Status RoundEngine::RestorePlannerState() {
  v1::PlannerState state;
  if (!state.ParseFromString(options_.planner_state)) {
    return absl::DataLossError("round engine: the restored planner state does not parse");
  }
  FEDSCHED_RETURN_IF_ERROR(planner_->ImportState(state));
  // A state saved with the forecast off has none (the forecast then starts empty); one saved
  // with it on is ignored by a server that has it off.
  if (learned_availability_ == nullptr || !state.has_forecast()) return absl::OkStatus();
  if (absl::Status s = RestoreForecast(state.forecast(), *book_, *learned_availability_); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("round engine: the restored learned availability forecast "
                                     "(PlannerState.forecast) is refused: ",
                                     s.message()));
  }
  return absl::OkStatus();
}

std::string RoundEngine::NextTaskId() {
  if (options_.new_task_id) return options_.new_task_id();
  return absl::StrCat("t", round_, "-", ++task_serial_);
}

bool RoundEngine::finished() const {
  return (config_.num_rounds() > 0 && version() >= config_.num_rounds()) || budget_exhausted_;
}

int64_t RoundEngine::Staleness(const Task& task) const {
  if (!async_) return 0;
  return versions_->VersionsSince(task.base_version);
}

absl::StatusOr<profile::ProfileBook::Registration> RoundEngine::Register(
    const std::string& identity, const v1::DeviceProfile& device, double now_s) {
  FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBook::Registration r,
                            book_->OnRegister(identity, device, now_s));
  if (learned_availability_ != nullptr) {
    FEDSCHED_RETURN_IF_ERROR(
        learned_availability_->ObserveSeen(r.index, now_s, heartbeat_timeout_s_));
  }
  return r;
}

absl::Status RoundEngine::Heartbeat(ClientIndex index, double now_s) {
  FEDSCHED_RETURN_IF_ERROR(book_->OnHeartbeat(index, now_s));
  if (learned_availability_ == nullptr) return absl::OkStatus();
  return learned_availability_->ObserveSeen(index, now_s, heartbeat_timeout_s_);
}

std::vector<std::string> RoundEngine::RetireUnseen(double now_s, double ttl_s) {
  std::vector<std::string> retired;
  std::vector<ClientIndex> unseen;
  book_->CollectUnseen(now_s, ttl_s, &unseen);
  if (unseen.empty()) return retired;
  // A client named by a remembered task keeps its slot: the task's index must stay its own.
  absl::flat_hash_set<ClientIndex> tasked;
  for (const auto& [id, task] : tasks_) tasked.insert(task.index);
  for (ClientIndex index : unseen) {
    if (tasked.contains(index)) continue;
    std::string client_id = book_->profile(index).client_id();
    if (!book_->Retire(index).ok()) continue;
    // The slot goes to the next new identity, which must not inherit this one's sessions.
    if (learned_availability_ != nullptr) learned_availability_->Forget(index);
    task_of_.erase(index);
    prefetch_.erase(index);
    retired.push_back(std::move(client_id));
  }
  return retired;
}

std::vector<const Task*> RoundEngine::TakeNewTasks() {
  std::vector<const Task*> out;
  out.reserve(new_task_ids_.size());
  for (const std::string& id : new_task_ids_) {
    auto it = tasks_.find(id);
    if (it != tasks_.end()) out.push_back(&it->second);
  }
  new_task_ids_.clear();
  return out;
}

std::vector<TaskFailureNote> RoundEngine::TakeTaskFailures() {
  std::vector<TaskFailureNote> out;
  out.swap(failures_);
  return out;
}

const Task* RoundEngine::TaskOf(ClientIndex index) const {
  auto id = task_of_.find(index);
  if (id == task_of_.end()) return nullptr;
  auto it = tasks_.find(id->second);
  return it == tasks_.end() || !it->second.in_flight() ? nullptr : &it->second;
}

int64_t RoundEngine::PlanningDemand() const {
  if (finished() || backing_off_) return 0;
  const int64_t slots = planner_->SlotsPerRound();
  const int64_t min_online = config_.min_online_clients();
  if (!async_) return running_ ? 0 : std::max(slots, min_online);
  // FedBuff fills free slots at every close, whether or not a version is open: it asks for them
  // ahead, and for enough devices to be reachable at all (Plan's min_online_clients).
  int64_t in_flight = 0;
  for (const auto& [id, task] : tasks_) in_flight += task.in_flight() ? 1 : 0;
  const int64_t free_slots = std::max<int64_t>(0, slots - in_flight);
  if (free_slots == 0) return 0;
  return std::max(free_slots, min_online - in_flight);
}

void RoundEngine::ClientsInFlight(std::vector<std::string>* out) const {
  out->clear();
  for (const auto& [id, task] : tasks_) {
    if (task.in_flight()) out->push_back(task.client_id);
  }
}

const Task* RoundEngine::FindTask(const std::string& task_id) const {
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? nullptr : &it->second;
}

std::optional<int64_t> RoundEngine::ClosedTaskRound(const std::string& task_id) const {
  auto it = closed_tasks_.find(task_id);
  if (it == closed_tasks_.end()) return std::nullopt;
  return it->second.round;
}

const v1::CachePlan* RoundEngine::PrefetchPlan(ClientIndex index) const {
  auto it = prefetch_.find(index);
  return it == prefetch_.end() ? nullptr : &it->second;
}

absl::StatusOr<const Task*> RoundEngine::PinModel(ClientIndex index, const std::string& task_id,
                                                  const v1::HeldModel* held) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    if (std::optional<int64_t> round = ClosedTaskRound(task_id)) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id, " belongs to round ", *round, ", which has closed"));
    }
    return absl::NotFoundError(absl::StrCat("unknown task '", task_id, "'"));
  }
  Task& task = it->second;
  if (task.index != index) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", task_id, " belongs to another client"));
  }
  if (task.failed) {
    return absl::FailedPreconditionError(absl::StrCat("task ", task_id, " was marked failed"));
  }
  if (task.base_version < 0) {
    // The model a task is announced with is the one its download serves, even if a FedBuff
    // version commits in between (the client checks the announced size and digest).
    task.base_version = versions_->published_version();
    task.blob = versions_->published_blob();
    PinDownload(task, held);
  }
  return &task;
}

absl::Status RoundEngine::Publish(int64_t version, std::shared_ptr<const v1::Model> model,
                                  std::shared_ptr<const ModelBlob> blob) {
  const v1::Model* published = model.get();
  FEDSCHED_RETURN_IF_ERROR(versions_->Publish(version, std::move(model), std::move(blob)));
  PublishDownlink(version, *published);
  return absl::OkStatus();
}

absl::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kSession:
      return "session";
    case RejectReason::kTask:
      return "task";
    case RejectReason::kLate:
      return "late";
    case RejectReason::kExamples:
      return "examples";
    case RejectReason::kMetrics:
      return "metrics";
    case RejectReason::kPayload:
      return "payload";
    case RejectReason::kValidation:
      return "validation";
    case RejectReason::kNormBound:
      return "norm_bound";
    case RejectReason::kNormMedian:
      return "norm_median";
    case RejectReason::kSignature:
      return "signature";
  }
  return "validation";
}

bool RefusalFailsTask(RejectReason reason) {
  return reason != RejectReason::kSession && reason != RejectReason::kTask &&
         reason != RejectReason::kLate;
}

bool RoundEngine::RefuseUpdate(const UpdateClaim* claim, RejectReason reason, double now_s,
                               absl::string_view why) {
  RefusalNote note;
  note.reason = reason;
  note.round = current_round();
  note.why = std::string(why);
  if (claim != nullptr) {
    note.task_id = claim->task_id;
    if (static_cast<int64_t>(claim->index) < book_->size()) {
      note.client_id = book_->profile(claim->index).client_id();
    }
    auto it = tasks_.find(claim->task_id);
    if (it != tasks_.end() && it->second.index == claim->index) {
      Task& task = it->second;
      note.round = task.round;
      // Left in flight, a refused task would be handed out again and the same update uploaded
      // again, as fast as the client can train.
      if (RefusalFailsTask(reason) && task.in_flight() && !task.in_secagg()) {
        FailTaskState(task, now_s,
                      absl::StrCat("update refused (", RejectReasonName(reason), "): ", why));
        note.task_failed = true;
      }
    }
  }
  if (running_) {
    record_.set_updates_rejected(record_.updates_rejected() + 1);
    const absl::string_view name = RejectReasonName(reason);
    auto* counts = record_.mutable_rejected_by_reason();
    auto at = std::find_if(counts->begin(), counts->end(),
                           [&](const v1::RejectionCount& c) { return c.reason() >= name; });
    if (at == counts->end() || at->reason() != name) {
      // Kept sorted by reason: insert before `at`.
      const int position = static_cast<int>(at - counts->begin());
      v1::RejectionCount* added = counts->Add();
      added->set_reason(std::string(name));
      for (int i = counts->size() - 1; i > position; --i) counts->SwapElements(i, i - 1);
      at = counts->begin() + position;
    }
    at->set_count(at->count() + 1);
  }
  // Bounded for callers that never read the notes (the simulator): keep the newest.
  if (refusals_.size() >= 4096) refusals_.erase(refusals_.begin(), refusals_.begin() + 2048);
  const bool task_failed = note.task_failed;
  refusals_.push_back(std::move(note));
  return task_failed;
}

std::vector<RefusalNote> RoundEngine::TakeRefusals() {
  std::vector<RefusalNote> out;
  out.swap(refusals_);
  return out;
}

absl::Status RoundEngine::CheckUpdate(const UpdateClaim& claim, int32_t pending,
                                      int64_t pending_examples, RejectReason* reason) const {
  RejectReason ignored;
  RejectReason& why = reason != nullptr ? *reason : ignored;
  why = RejectReason::kTask;
  auto it = tasks_.find(claim.task_id);
  if (it == tasks_.end()) {
    if (const LateTask* late = FindLateTask(claim)) return CheckLateUpdate(claim, *late, &why);
    if (auto closed = closed_tasks_.find(claim.task_id); closed != closed_tasks_.end()) {
      if (closed->second.accepted) {
        return absl::AlreadyExistsError(
            absl::StrCat("update for task ", claim.task_id, " was already accepted"));
      }
      why = RejectReason::kLate;
      return absl::FailedPreconditionError(
          absl::StrCat("late update: round ", closed->second.round, " has closed",
                       closed->second.straggler ? " without it (straggler)" : "",
                       "; current round ", current_round()));
    }
    return absl::NotFoundError(absl::StrCat("unknown task '", claim.task_id, "'"));
  }
  const Task& task = it->second;
  if (task.index != claim.index) {
    return absl::PermissionDeniedError(
        absl::StrCat("task ", claim.task_id, " belongs to another client"));
  }
  if (task.uploaded) {
    return absl::AlreadyExistsError(
        absl::StrCat("update for task ", claim.task_id, " was already accepted"));
  }
  if (task.failed) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", claim.task_id, " was marked failed: ", task.failure_reason));
  }
  if (claim.round != task.round) {
    return absl::FailedPreconditionError(absl::StrCat("update names round ", claim.round,
                                                      " but task ", task.task_id, " is for round ",
                                                      task.round));
  }
  // FedAvg weighs by examples: a client may not claim more than the work it was given.
  const int64_t planned = static_cast<int64_t>(task.local_steps) * task.batch_size;
  if (claim.num_examples > planned) {
    why = RejectReason::kExamples;
    return absl::InvalidArgumentError(
        absl::StrCat("update for task ", task.task_id, " claims ", claim.num_examples,
                     " examples; the task was for at most ", planned, " (local_steps ",
                     task.local_steps, " x batch_size ", task.batch_size, ")"));
  }
  if (secagg_ != nullptr && secagg_->phase() != SecAggPhase::kMaskedInput) {
    why = RejectReason::kLate;
    return absl::FailedPreconditionError(absl::StrCat(
        secagg_->phase() < SecAggPhase::kMaskedInput
            ? "update before its secure-aggregation key steps closed: task "
            : "late update: secure aggregation is unmasking round ",
        secagg_->phase() < SecAggPhase::kMaskedInput ? task.task_id : absl::StrCat(task.round)));
  }
  if (!closing_.HasRoom(record_.updates_accepted() + pending)) {
    // The round (FedBuff: the version) is complete with its first K updates.
    why = RejectReason::kLate;
    return absl::FailedPreconditionError(absl::StrCat("late update: round ", task.round,
                                                      " already has its ", closing_.target(),
                                                      " updates (straggler)"));
  }
  if (record_.total_examples() + pending_examples > INT64_MAX - claim.num_examples) {
    why = RejectReason::kExamples;
    return absl::InvalidArgumentError("num_examples would overflow the round's example count");
  }
  return absl::OkStatus();
}

namespace {

// The update carries exactly one payload, of the kind its task asked for: a masked input under
// secure aggregation, else a compressed delta when the task's upload_compression compresses and a
// float32 delta when it does not. InvalidArgument saying which (RejectReason::kPayload).
absl::Status CheckPayloadKind(const Update& update, const Task& task, bool secagg) {
  const int kinds =
      (update.delta != nullptr) + (update.masked != nullptr) + (update.compressed != nullptr);
  if (kinds != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an update carries exactly one of a float32 delta, a masked input and a compressed "
        "delta; this one carries ",
        kinds));
  }
  if (secagg) {
    if (update.masked != nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "a secure-aggregation round takes masked inputs only, not a float32 or compressed delta");
  }
  const bool want_compressed = !compress::IsUncompressed(task.upload_compression);
  if (update.compressed != nullptr && !want_compressed) {
    return absl::InvalidArgumentError(
        absl::StrCat("a compressed update for task ", task.task_id,
                     ", whose upload_compression is float32: upload the float32 delta"));
  }
  if (update.delta != nullptr && want_compressed) {
    return absl::InvalidArgumentError(
        absl::StrCat("a float32 update for task ", task.task_id, ", whose upload_compression is ",
                     compress::Describe(task.upload_compression), ": upload it compressed"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<absl::Status> RoundEngine::FoldUpdates(absl::Span<const Update> updates) {
  std::vector<absl::Status> verdicts(updates.size());
  // Why each refused update was refused; the aggregator's refusals are validation errors.
  std::vector<RejectReason> reasons(updates.size(), RejectReason::kValidation);
  std::vector<Aggregator::WeightedUpdate> batch;
  std::vector<size_t> position;  // index in `updates` of each batch entry
  int64_t pending_examples = 0;
  for (size_t i = 0; i < updates.size(); ++i) {
    const UpdateClaim& claim = updates[i].claim;
    absl::Status s =
        CheckUpdate(claim, static_cast<int32_t>(position.size()), pending_examples, &reasons[i]);
    if (s.ok()) reasons[i] = RejectReason::kValidation;  // what the aggregator may refuse
    if (s.ok() && secagg_ == nullptr && updates[i].masked != nullptr) {
      reasons[i] = RejectReason::kPayload;
      s = absl::InvalidArgumentError(
          "a masked input outside a secure-aggregation round (secure_aggregation is off)");
    }
    for (size_t p : position) {
      if (s.ok() && updates[p].claim.task_id == claim.task_id) {
        reasons[i] = RejectReason::kTask;
        s = absl::AlreadyExistsError(
            absl::StrCat("update for task ", claim.task_id, " was already accepted"));
      }
    }
    if (!s.ok()) {
      verdicts[i] = std::move(s);
      continue;
    }
    if (!tasks_.contains(claim.task_id)) {  // a straggler's late update (stale_updates)
      verdicts[i] = HoldLateUpdate(updates[i], &reasons[i]);
      continue;
    }
    const Task& task = tasks_.at(claim.task_id);
    if (absl::Status kind = CheckPayloadKind(updates[i], task, secagg_ != nullptr); !kind.ok()) {
      reasons[i] = RejectReason::kPayload;
      verdicts[i] = std::move(kind);
      continue;
    }
    if (secagg_ != nullptr) {
      position.push_back(i);  // masked inputs go to the protocol, not the aggregator
      pending_examples += claim.num_examples;
      continue;
    }
    batch.push_back({.delta = updates[i].delta,
                     .num_examples = FoldWeight(updates[i]),
                     .staleness = Staleness(task),
                     .tensor_sum_squares = updates[i].tensor_sum_squares,
                     .compressed = updates[i].compressed});
    position.push_back(i);
    pending_examples += claim.num_examples;
  }
  if (secagg_ != nullptr) {
    FoldMaskedInputs(updates, position, &verdicts);
  } else if (!batch.empty()) {
    std::vector<absl::Status> folded = aggregator_->AccumulateBatch(batch);
    bool any = false;
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = position[b];
      if (folded[b].ok()) {
        RecordAccepted(updates[i], tasks_.at(updates[i].claim.task_id), batch[b].num_examples);
        NoteUnclipped(updates[i]);
        any = true;
      }
      verdicts[i] = std::move(folded[b]);
    }
    if (any) record_.set_aggregation_calls(record_.aggregation_calls() + 1);
  }
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (!verdicts[i].ok()) {
      RefuseUpdate(&updates[i].claim, reasons[i], updates[i].now_s, verdicts[i].message());
    }
  }
  return verdicts;
}

absl::Status RoundEngine::FoldPartial(absl::Span<const Update> entries,
                                      const v1::Model& weighted_sum, int64_t total_examples) {
  if (async_ || config_.audit_updates()) {
    return absl::InvalidArgumentError(
        "partial sums need synchronous rounds without audit_updates (both need each delta)");
  }
  if (entries.empty()) return absl::InvalidArgumentError("partial sum without entries");
  int64_t examples = 0;
  absl::flat_hash_set<std::string> seen;
  for (const Update& entry : entries) {
    // First-K: the sum is indivisible, so only the room for its first update is asked for.
    RejectReason reason = RejectReason::kTask;
    absl::Status s = CheckUpdate(entry.claim, 0, examples, &reason);
    if (s.ok() && !seen.insert(entry.claim.task_id).second) {
      s = absl::InvalidArgumentError("task repeated in the partial sum");
    }
    if (!s.ok()) {
      RefuseUpdate(nullptr, reason, 0, s.message());
      return absl::Status(s.code(), absl::StrCat("partial sum entry for task ", entry.claim.task_id,
                                                 ": ", s.message()));
    }
    examples += entry.claim.num_examples;
  }
  if (examples != total_examples) {
    RefuseUpdate(nullptr, RejectReason::kExamples, 0, "partial sum's examples do not add up");
    return absl::InvalidArgumentError(absl::StrCat("partial sum declares ", total_examples,
                                                   " examples; its entries sum to ", examples));
  }
  // A relay clips every update to the bound before it sums (relay_service.cc), so an honest
  // sum of n examples is at most bound x n long; a longer one carries an unclipped update.
  if (const double bound = UpdateNormBound(config_); bound > 0) {
    const double norm = UpdateL2Norm(weighted_sum);
    const double limit = bound * static_cast<double>(total_examples);
    if (!(norm <= limit)) {
      const std::string why = absl::StrCat(
          "partial sum L2 norm ", norm, " exceeds the clip bound ", bound, " x its ",
          total_examples, " examples = ", limit,
          " (security.max_update_norm / aggregation.clip_update_norm): an entry was not clipped");
      RefuseUpdate(nullptr, RejectReason::kNormBound, 0, why);
      return absl::InvalidArgumentError(why);
    }
  }
  if (absl::Status s = aggregator_->AccumulatePartial(weighted_sum, total_examples,
                                                      static_cast<int64_t>(entries.size()));
      !s.ok()) {
    RefuseUpdate(nullptr, RejectReason::kValidation, 0, s.message());
    return s;
  }
  for (const Update& entry : entries) {
    RecordAccepted(entry, tasks_.at(entry.claim.task_id), entry.claim.num_examples);
  }
  record_.set_aggregation_calls(record_.aggregation_calls() + 1);
  return absl::OkStatus();
}

void RoundEngine::RecordAccepted(const Update& update, Task& task, int64_t weight) {
  const v1::UpdateMetrics& metrics = update.metrics;
  influence_.NoteFolded(weight);
  if (task.base_version < 0) task.base_version = versions_->published_version();
  task.uploaded = true;
  task_of_.erase(task.index);
  record_.set_updates_accepted(record_.updates_accepted() + 1);
  const int64_t staleness = Staleness(task);
  record_.set_staleness_mean(record_.staleness_mean() +
                             (static_cast<double>(staleness) - record_.staleness_mean()) /
                                 record_.updates_accepted());
  record_.set_staleness_max(std::max(record_.staleness_max(), staleness));
  record_.set_total_examples(record_.total_examples() + update.claim.num_examples);
  // Bytes on the participant's links (docs/guides/COMPRESSION.md): its payload as uploaded, and
  // what it downloaded for the task (the caller's figure, else the model it pinned).
  record_.set_uplink_bytes(record_.uplink_bytes() + update.upload_bytes);
  int64_t downloaded = update.download_bytes;
  if (downloaded <= 0 && task.blob != nullptr) {
    downloaded = static_cast<int64_t>(task.blob->bytes.size());
  }
  record_.set_downlink_bytes(record_.downlink_bytes() + downloaded);
  record_.add_accepted_task_ids(task.task_id);
  loss_sum_ += metrics.mean_loss() * static_cast<double>(update.claim.num_examples);
  // Client-side evaluation of the model the task trained from (docs/ARCHITECTURE.md
  // "Client-side evaluation"); an implausible report is left out rather than failing the update.
  // The record describes one model version: under FedBuff a version's updates may have trained
  // from different models, and only the newest model's evaluations are averaged (an older
  // model's are superseded; a newer one's replace those folded so far).
  const bool plausible = metrics.eval_examples() > 0 && metrics.eval_accuracy() >= 0 &&
                         metrics.eval_accuracy() <= 1 && std::isfinite(metrics.eval_loss()) &&
                         metrics.eval_loss() >= 0;
  const bool older = eval_examples_ > 0 && task.base_version < record_.client_eval_version();
  if (plausible && !older) {
    if (eval_examples_ > 0 && task.base_version > record_.client_eval_version()) {
      eval_accuracy_sum_ = eval_loss_sum_ = 0;
      eval_examples_ = 0;
    }
    const auto n = static_cast<double>(metrics.eval_examples());
    eval_accuracy_sum_ += metrics.eval_accuracy() * n;
    eval_loss_sum_ += metrics.eval_loss() * n;
    eval_examples_ += metrics.eval_examples();
    record_.set_client_eval_version(task.base_version);
  }
  hits_ += metrics.cache_hits();
  misses_ += metrics.cache_misses();
  v1::Receipt receipt;
  receipt.set_task_id(task.task_id);
  receipt.set_client_id(task.client_id);
  // The round the update counts in: under FedBuff a later one than the task's if it is stale.
  receipt.set_round(round_);
  receipt.set_sha256(update.sha256);
  receipt.set_num_examples(update.claim.num_examples);
  receipt.set_received_unix_ms(ToMillis(update.now_s));
  receipts_.push_back(std::move(receipt));
  if (config_.audit_updates()) AuditAccepted(update, task, weight);
  // Measured times feed the profile and the round-time predictor (docs/ALGORITHMS.md §1).
  profile::TaskTiming timing;
  timing.completion_s = std::max(1e-6, update.now_s - task.issued_s);
  timing.upload_s = update.upload_seconds;
  timing.upload_bytes = update.upload_seconds > 0 ? update.upload_bytes : 0;
  if (task.in_secagg()) {
    // Counted once the round unmasks (AdvanceSecAgg): a masked input may still be left out.
    secagg_pending_.push_back({task.task_id, task.index, task.round, metrics, timing, update.now_s,
                               update.claim.num_examples});
    return;
  }
  // Feedback errors (e.g. a metric the profile refuses) do not undo an accepted update.
  (void)planner_->OnUpdate(task.index, task.round, metrics, timing, update.now_s);
}

// The accepted update as received, for the audit trail (ServerConfig.audit_updates): the payload
// pieces, else the update re-serialized; compressed payloads are marked so a replay folds them
// compressed.
void RoundEngine::AuditAccepted(const Update& update, const Task& task, int64_t weight) {
  v1::AuditedUpdate audited;
  audited.set_task_id(task.task_id);
  audited.set_round(round_);
  audited.set_num_examples(weight);  // what it weighed in the sum (bounded influence)
  audited.set_staleness(Staleness(task));
  audited.set_compressed(update.compressed != nullptr);
  std::string* payload = audited.mutable_payload();
  if (update.payload_pieces.empty()) {
    if (update.compressed != nullptr) {
      update.compressed->SerializeToString(payload);
    } else if (update.delta != nullptr) {
      update.delta->SerializeToString(payload);
    }
  } else {
    for (std::string_view piece : update.payload_pieces) payload->append(piece);
  }
  audited.set_order(static_cast<int32_t>(audited_.size()));
  audited_.push_back(std::move(audited));
}

absl::Status RoundEngine::FailTask(ClientIndex index, const std::string& task_id, double now_s,
                                   const std::string& why) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second.index != index) {
    return absl::NotFoundError(absl::StrCat("no open task '", task_id, "' for this client"));
  }
  if (it->second.in_flight()) FailTaskState(it->second, now_s, why);
  return absl::OkStatus();
}

absl::Status RoundEngine::FailTaskOutOfMemory(ClientIndex index, const std::string& task_id,
                                              double now_s, int64_t peak_bytes) {
  auto it = tasks_.find(task_id);
  if (it == tasks_.end() || it->second.index != index) {
    return absl::NotFoundError(absl::StrCat("no open task '", task_id, "' for this client"));
  }
  if (it->second.in_flight()) {
    FailTaskState(it->second, now_s, absl::StrCat("out of memory (needs ", peak_bytes, " bytes)"),
                  std::max<int64_t>(peak_bytes, 0));
  }
  return absl::OkStatus();
}

// oom_peak_bytes >= 0: an out-of-memory failure (its peak, 0 = unknown).
void RoundEngine::FailTaskState(Task& task, double now_s, const std::string& why,
                                int64_t oom_peak_bytes) {
  task.failed = true;
  task.failure_reason = why;
  task_of_.erase(task.index);
  // Bounded for callers that never read the notes (the simulator): keep the newest.
  if (failures_.size() >= 4096) failures_.erase(failures_.begin(), failures_.begin() + 2048);
  failures_.push_back({task.task_id, task.client_id, task.round, why});
  if (oom_peak_bytes >= 0) {
    if (task.round == round_ && running_) record_.set_oom_failures(record_.oom_failures() + 1);
    (void)planner_->OnOutOfMemory(task.index, task.round, oom_peak_bytes, now_s);
    return;
  }
  (void)planner_->OnTaskFailed(task.index, task.round, profile::TaskFailure::kDropped, now_s);
}

fit::ModelFeatures RoundEngine::ResolveModelFeatures() const {
  fit::ModelFeatures f = options_.model_features;
  if (f.parameters == 0) {
    for (const v1::Tensor& t : options_.model.tensors()) f.parameters += t.data_size();
  }
  if (f.optimizer_floats_per_parameter == 0 && config_.training().proximal_mu() > 0) {
    f.optimizer_floats_per_parameter = 1;
  }
  return f;
}

}  // namespace fedsched::round
