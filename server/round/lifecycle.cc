// RoundEngine's time-driven transitions: planning, closing, failing and re-planning rounds
// (docs/ARCHITECTURE.md "The round engine"; docs/ALGORITHMS.md §2 and §6).
#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/compress/update_codec.h"
#include "common/status_macros.h"
#include "server/aggregation/checks.h"
#include "server/profile/utility_noise.h"
#include "server/round/checkin_pacer.h"
#include "server/round/engine.h"
#include "server/round/forecast_persistence.h"

namespace fedsched::round {
namespace {

// At a million clients the candidates' profile states are scattered over ~150 MB and each
// per-candidate check below waits on its state's cache lines: they are fetched this many
// candidates ahead.
constexpr size_t kPrefetchAhead = 8;

void PrefetchStateAhead(const profile::ProfileBook& book, const std::vector<ClientIndex>& ids,
                        size_t i) {
  if (i + kPrefetchAhead >= ids.size()) return;
  const auto* state = reinterpret_cast<const char*>(&book.state(ids[i + kPrefetchAhead]));
  for (size_t line = 0; line < sizeof(profile::ClientState); line += 64) {
    __builtin_prefetch(state + line);
  }
}

}  // namespace

std::vector<ClosedRound> RoundEngine::Advance(double now_s) {
  std::vector<ClosedRound> closed;
  if (finished()) return closed;
  if (running_) {
    int outstanding = 0;
    for (auto& [id, task] : tasks_) {
      if (!task.in_flight()) continue;
      if (!options_.presence->IsReachable(task.index, now_s)) {
        FailTaskState(task, now_s, "missed heartbeats");
        continue;
      }
      ++outstanding;
    }
    // Secure aggregation's cohort is fixed once keys are advertised: no replacements.
    const bool secure = secagg_ != nullptr || !secagg_status_.ok();
    if (!async_ && !secure && now_s < deadline_s_) outstanding += RetaskFailedSlots(now_s);
    const bool past_deadline = now_s >= deadline_s_;
    if (secure) {
      if (std::optional<ClosedRound> done = AdvanceSecAgg(now_s, outstanding)) {
        closed.push_back(*std::move(done));
      }
    } else {
      const int accepted = record_.updates_accepted();
      switch (closing_.Decide(accepted, now_s, deadline_s_, outstanding)) {
        case CloseVerdict::kCommit:
          closed.push_back(Close(now_s));
          break;
        case CloseVerdict::kFail:
          closed.push_back(Fail(now_s, closing_.Shortfall(accepted, past_deadline, "updates")));
          break;
        case CloseVerdict::kOpen:
          break;
      }
    }
  }
  if (!running_ && !finished()) Plan(now_s);
  return closed;
}

planner::PlanRequest RoundEngine::MakePlanRequest(int64_t round, double now_s,
                                                  int32_t max_participants) const {
  planner::PlanRequest request;
  request.round = round;
  request.now_s = now_s;
  request.candidates = scratch_;
  // The bytes each task downloads and uploads: the published blob's (the server's), else the
  // model's serialized size.
  const std::shared_ptr<const ModelBlob>& blob = versions_->published_blob();
  const auto model_size = static_cast<int64_t>(versions_->model()->ByteSizeLong());
  request.model_bytes = blob != nullptr ? static_cast<int64_t>(blob->bytes.size()) : model_size;
  // Compressed upload sizes come from the model's shapes, unless the blob stands in for a model
  // of another size (the simulator's no-train mode): they are then scaled from model_bytes.
  if (request.model_bytes == model_size) request.model = versions_->model().get();
  request.availability = options_.availability;
  if (learned_availability_ != nullptr) request.availability = learned_availability_.get();
  request.max_participants = max_participants;
  return request;
}

void RoundEngine::LeaveOutFailingClients(double now_s, size_t need) {
  const profile::ProfileBook& book = *book_;
  // Only clients with a counted failure since their last success can be cooling down: the book
  // keeps them (ProfileBook::failing), usually far fewer than the candidates, which are sorted
  // (CollectReachable) and looked up by binary search.
  std::vector<size_t> cooling;
  const bool ascending = std::adjacent_find(scratch_.begin(), scratch_.end(),
                                            std::greater_equal<ClientIndex>()) == scratch_.end();
  if (book.failing().size() < scratch_.size() / 8 && ascending) {
    for (ClientIndex index : book.failing()) {
      if (!book.InFailureCooldown(index, now_s)) continue;
      auto it = std::lower_bound(scratch_.begin(), scratch_.end(), index);
      if (it != scratch_.end() && *it == index) cooling.push_back(it - scratch_.begin());
    }
    std::sort(cooling.begin(), cooling.end());
  } else {
    for (size_t i = 0; i < scratch_.size(); ++i) {
      PrefetchStateAhead(book, scratch_, i);
      if (book.InFailureCooldown(scratch_[i], now_s)) cooling.push_back(i);
    }
  }
  const size_t cooled = cooling.size();
  if (cooled == 0 || scratch_.size() - cooled < need) return;
  size_t out = 0;
  size_t next = 0;  // into cooling, ascending positions
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (next < cooled && cooling[next] == i) {
      ++next;
      continue;
    }
    scratch_[out++] = scratch_[i];
  }
  scratch_.resize(out);
}

void RoundEngine::LimitUnprovenClients(int64_t round, size_t slots, size_t tasked, size_t need) {
  const profile::ProfileBook& book = *book_;
  // The book counts its never-proven clients: without any, there is nothing to limit.
  if (book.CountUnproven() == 0) return;
  // scratch_ holds distinct clients (CollectReachable), so a client is dropped exactly when it
  // is never-proven and not among the `allowed` kept below.
  std::vector<uint8_t> unproven_flag(scratch_.size(), 0);
  size_t num_unproven = 0;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    PrefetchStateAhead(book, scratch_, i);
    if (book.IsUnproven(scratch_[i])) {
      unproven_flag[i] = 1;
      ++num_unproven;
    }
  }
  // Too few proven or provisioned candidates to commit a round: never-proven ones may fill it
  // (a loopback demo's devices are all never-proven until their first accepted update).
  if (num_unproven == 0 || scratch_.size() - num_unproven < need) return;
  const double share = config_.security().max_unproven_task_fraction();
  const size_t cap = static_cast<size_t>(std::ceil(share * static_cast<double>(slots)));
  const size_t allowed = cap > tasked ? cap - tasked : 0;
  if (num_unproven <= allowed) return;
  // Which never-proven clients may be picked rotates with the round (seeded, reproducible), so
  // each gets its turn to prove itself without any of them holding more than the share: the
  // `allowed` with the smallest keys (SplitMix64 is a bijection, so the keys are distinct and the
  // kept set is unique).
  const uint64_t salt = config_.seed() ^ SplitMix64(static_cast<uint64_t>(round));
  std::vector<std::pair<uint64_t, ClientIndex>> keyed;
  keyed.reserve(num_unproven);
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (unproven_flag[i]) keyed.emplace_back(SplitMix64(salt ^ scratch_[i]), scratch_[i]);
  }
  std::nth_element(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(allowed),
                   keyed.end());
  absl::flat_hash_set<ClientIndex> kept;
  for (size_t k = 0; k < allowed; ++k) kept.insert(keyed[k].second);
  size_t out = 0;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    if (!unproven_flag[i] || kept.contains(scratch_[i])) scratch_[out++] = scratch_[i];
  }
  scratch_.resize(out);
}

bool RoundEngine::ShouldClose(double now_s, int outstanding) const {
  return closing_.ShouldCommit(record_.updates_accepted(), now_s, deadline_s_, outstanding);
}

void RoundEngine::OpenRecord(double now_s, double deadline_s) {
  running_ = true;
  round_ = version() + 1;
  deadline_s_ = now_s + deadline_s;
  receipts_.clear();
  audited_.clear();
  loss_sum_ = 0;
  eval_accuracy_sum_ = eval_loss_sum_ = 0;
  eval_examples_ = 0;
  hits_ = misses_ = 0;
  dp_unclipped_ = 0;
  influence_.Reset();
  record_.Clear();
  passed_over_.clear();
  record_.set_round(round_);
  record_.set_start_unix_ms(ToMillis(now_s));
  record_.set_deadline_s(deadline_s);
  record_.set_dropped_stale(std::exchange(dropped_stale_, 0));
}

void RoundEngine::CollectReachable(double now_s) {
  options_.presence->CollectReachable(now_s, &scratch_);
  // The simulator hands over a sorted list when many are online (a sort of 150,000 sorted
  // indices costs more than the check).
  if (!std::is_sorted(scratch_.begin(), scratch_.end()))
    std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
}

void RoundEngine::CollectCandidates(double now_s) {
  CollectReachable(now_s);
  if (config_.secure_aggregation().enabled()) {
    // Members whose key shares neighbours could not authenticate are never tasked again.
    const profile::ProfileBook& book = *book_;
    scratch_.erase(std::remove_if(scratch_.begin(), scratch_.end(),
                                  [&](ClientIndex i) { return book.SecAggExcluded(i); }),
                   scratch_.end());
  }
}

void RoundEngine::Plan(double now_s) {
  last_plan_status_ = absl::OkStatus();
  backing_off_ = false;
  // A synchronous round's tasks train on the last committed model: wait until it is published.
  const int64_t version = versions_->version();
  if (!async_ && versions_->published_version() != version) {
    last_plan_status_ =
        absl::UnavailableError(absl::StrCat("waiting for version ", version, " to be published"));
    return;
  }
  last_plan_status_ = backoff_.CheckMayPlan(version + 1, now_s);
  backing_off_ = !last_plan_status_.ok();
  if (backing_off_) return;
  last_plan_status_ = ExpireLearnedSessions(now_s);
  if (!last_plan_status_.ok()) return;
  CollectCandidates(now_s);
  reachable_ = static_cast<int64_t>(scratch_.size());
  int in_flight = 0;
  for (const auto& [id, task] : tasks_) in_flight += task.in_flight() ? 1 : 0;
  // FedBuff: tasks of earlier versions stay in flight; only idle clients get new ones, up to
  // ceil(K x overcommit) tasks in flight in all.
  if (!task_of_.empty()) {
    scratch_.erase(std::remove_if(scratch_.begin(), scratch_.end(),
                                  [&](ClientIndex i) { return task_of_.contains(i); }),
                   scratch_.end());
  }
  int32_t free_slots = 0;
  bool may_plan = reachable_ >= config_.min_online_clients();
  if (!may_plan) {
    last_plan_status_ = absl::FailedPreconditionError(
        absl::StrCat("waiting for min_online_clients: ", reachable_, " of ",
                     config_.min_online_clients(), " reachable"));
  }
  if (async_) {
    free_slots = std::max(0, planner_->SlotsPerRound() - in_flight);
    may_plan = may_plan && free_slots > 0;
  }
  // A synchronous round needs min_updates updates to commit, not every slot filled: failing
  // clients sit out as long as that many others are reachable (with the slot count instead,
  // 300 live sybils came back as soon as the honest clients alone could not fill the slots).
  const size_t need = static_cast<size_t>(
      async_ ? free_slots
             : std::min(planner_->SlotsPerRound(), std::max(1, config_.min_updates())));
  LeaveOutFailingClients(now_s, need);
  // FedBuff: the never-proven tasks still in flight count against the share of this version.
  size_t unproven_in_flight = 0;
  for (const auto& [id, task] : tasks_) {
    unproven_in_flight += task.in_flight() && book_->IsUnproven(task.index) ? 1 : 0;
  }
  LimitUnprovenClients(version + 1, static_cast<size_t>(planner_->SlotsPerRound()),
                       unproven_in_flight, need);
  planner::RoundPlan plan;
  if (may_plan && !scratch_.empty()) {
    const planner::PlanRequest request = MakePlanRequest(version + 1, now_s, free_slots);
    absl::StatusOr<planner::RoundPlan> planned = planner_->PlanRound(request);
    if (!planned.ok()) {
      last_plan_status_ = planned.status();
      if (!async_ || in_flight == 0) return;
    } else {
      plan = std::move(*planned);
    }
  }
  // A FedBuff version opens for the updates in flight even when nobody new is tasked.
  if (plan.participants.empty() && in_flight == 0) return;
  OpenRecord(now_s, plan.participants.empty() ? config_.round_deadline_s() : plan.deadline_s);
  // Once per planning (O(clients)); replacement tasks of the round reuse it.
  utility_noise_stddev_ =
      profile::UtilityNoiseStddev(*book_, config_.selection().utility_noise_factor());
  for (planner::PlannedTask& planned : plan.participants) AddTask(planned, now_s);
  UpdateWeightCap();
  NotePassedOver(plan.passed_over);
  StartSecAgg(now_s);
  prefetch_.clear();
  for (planner::PrefetchHint& hint : plan.expected_next) {
    prefetch_[hint.index] = std::move(hint.cache_plan);
  }
}

Task& RoundEngine::AddTask(planner::PlannedTask& planned, double now_s) {
  Task task;
  task.task_id = NextTaskId();
  task.client_id = planned.client_id;
  task.index = planned.index;
  task.round = round_;
  task.local_steps = planned.local_steps;
  task.batch_size = planned.batch_size;
  task.issued_s = now_s;
  task.predicted_s = planned.predicted_seconds;
  task.update_dropout = planned.update_dropout;
  // The planner's per-device choice (compression.adaptive), else the job's compressor; the
  // cohort's reason names it either way.
  if (!planned.reason.has_compression() &&
      !compress::IsUncompressed(config_.compression().uplink())) {
    *planned.reason.mutable_compression() = config_.compression().uplink();
  }
  task.upload_compression = planned.reason.compression();
  task.deadline_s = deadline_s_;
  if (privacy_ != nullptr && !privacy_->central()) {
    task.dp_clip_norm = privacy_->clip_norm();
    task.dp_noise_stddev = privacy_->client_noise_stddev();
  }
  task.utility_noise_stddev = utility_noise_stddev_;
  task.cache_plan = std::move(planned.cache_plan);
  // Why the matcher offered the device to this job, when several jobs share the fleet.
  if (options_.planning_gate != nullptr) {
    planned.reason.set_match_reason(options_.planning_gate->OfferReason(planned.client_id));
  }
  *record_.add_cohort() = std::move(planned.reason);
  task_of_[task.index] = task.task_id;
  auto [it, inserted] = tasks_.emplace(task.task_id, std::move(task));
  new_task_ids_.push_back(it->first);
  return it->second;
}

v1::PlannerState RoundEngine::SavedPlannerState() const {
  v1::PlannerState state = planner_->ExportState();
  // The forecast rides with the planner's state so that a restart resumes it exactly (it is
  // learned from heartbeats, which a restarted server would otherwise have to see again).
  if (learned_availability_ != nullptr) {
    *state.mutable_forecast() = SaveForecast(*learned_availability_, *book_);
  }
  return state;
}

absl::Status RoundEngine::ExpireLearnedSessions(double now_s) {
  if (learned_availability_ == nullptr) return absl::OkStatus();
  // Sessions whose heartbeats stopped end now, as seen from here (at last heartbeat + timeout),
  // before the forecast is asked about anyone.
  return learned_availability_->ExpireUnseen(now_s, heartbeat_timeout_s_);
}

int RoundEngine::RetaskFailedSlots(double now_s) {
  std::vector<Task*> vacant;
  for (auto& [id, task] : tasks_) {
    if (task.failed && !task.replaced && task.round == round_) vacant.push_back(&task);
  }
  if (vacant.empty()) return 0;
  if (absl::Status s = ExpireLearnedSessions(now_s); !s.ok()) {
    last_plan_status_ = s;
    return 0;
  }
  CollectReachable(now_s);
  // Only idle clients that have no part in this round yet (busy, done or failed are excluded).
  absl::flat_hash_set<ClientIndex> in_round;
  for (const auto& [id, task] : tasks_) in_round.insert(task.index);
  scratch_.erase(std::remove_if(scratch_.begin(), scratch_.end(),
                                [&](ClientIndex i) { return in_round.contains(i); }),
                 scratch_.end());
  LeaveOutFailingClients(now_s, 1);
  size_t unproven_in_round = 0;
  for (const auto& [id, task] : tasks_) {
    unproven_in_round +=
        task.round == round_ && !task.failed && book_->IsUnproven(task.index) ? 1 : 0;
  }
  LimitUnprovenClients(round_, static_cast<size_t>(planner_->SlotsPerRound()), unproven_in_round,
                       1);
  int added = 0;
  for (Task* failed : vacant) {
    if (scratch_.empty()) break;
    const planner::PlanRequest request = MakePlanRequest(round_, now_s, 1);
    absl::StatusOr<planner::RoundPlan> plan = planner_->PlanRound(request);
    if (plan.ok()) NotePassedOver(plan->passed_over);
    if (!plan.ok() || plan->participants.empty()) break;
    failed->replaced = true;
    Task& task = AddTask(plan->participants.front(), now_s);
    scratch_.erase(std::remove(scratch_.begin(), scratch_.end(), task.index), scratch_.end());
    ++added;
  }
  if (added > 0) UpdateWeightCap();
  return added;
}

bool RoundEngine::ExampleWeighted() const {
  return privacy_ == nullptr && aggregator_->rule_properties().example_weighted;
}

void RoundEngine::UpdateWeightCap() {
  // FedBuff's versions mix tasks of several plans: only the denominator bound applies there.
  if (async_ || !ExampleWeighted()) return;
  std::vector<int64_t> planned;
  planned.reserve(tasks_.size());
  for (const auto& [id, task] : tasks_) {
    // A failed task's plan still counts unless a replacement took its slot (which adds its
    // own): too few arrivals are the denominator's business (BoundRoundInfluence).
    if (task.round == round_ && !task.replaced) {
      planned.push_back(std::max<int64_t>(1, int64_t{task.local_steps} * task.batch_size));
    }
  }
  influence_.RaiseCap(planned);
}

absl::Status RoundEngine::BoundRoundInfluence() {
  if (!ExampleWeighted() || aggregator_->num_updates() == 0) return absl::OkStatus();
  const auto total = static_cast<double>(aggregator_->total_examples());
  const double denominator = influence_.Denominator(total);
  const auto max_weight = static_cast<double>(influence_.max_weight());
  if (denominator > total) {
    // Too few updates (or one too heavy) for the share: the missing weight counts as a zero
    // update, so that no client moves the model by more than `share` of its own update.
    FEDSCHED_RETURN_IF_ERROR(
        aggregator_->PerturbSum([](absl::Span<float>) { return absl::OkStatus(); }, denominator));
  }
  record_.set_weight_denominator(denominator);
  record_.set_max_weight_share(denominator > 0 ? max_weight / denominator : 0.0);
  return absl::OkStatus();
}

ClosedRound RoundEngine::Fail(double now_s, const std::string& why) {
  record_.set_outcome(v1::ROUND_OUTCOME_FAILED);
  record_.set_end_unix_ms(ToMillis(now_s));
  const planner::RoundSummary summary =
      planner_->OnRoundFinished(round_, /*committed=*/false, now_s,
                                /*held_to_deadline=*/now_s >= deadline_s_);
  record_.set_memory_mape(summary.memory_mape);
  record_.set_memory_predictions_scored(summary.memory_scored);
  aggregator_->Reset();
  secagg_.reset();
  secagg_cohort_.clear();
  secagg_pending_.clear();  // no member of a failed round counts as successful
  closed_tasks_.clear();
  for (const auto& [id, task] : tasks_) closed_tasks_[id] = {task.round, task.in_flight(), false};
  tasks_.clear();
  task_of_.clear();
  running_ = false;
  ClosedRound out;
  NoteFailedAttempt(now_s, why, &out);
  return out;
}

void RoundEngine::NoteFailedAttempt(double now_s, const std::string& why, ClosedRound* out) {
  out->committed = false;
  out->closed_at_s = now_s;
  out->record = record_;
  out->failure_reason = backoff_.NoteFailure(now_s, why);
}

absl::Status RoundEngine::ScreenEvaluation(double accuracy, double loss) {
  return guard_->Screen(accuracy, loss);
}

absl::Status RoundEngine::SetInitialEvaluation(double accuracy, double loss) {
  return guard_->SetInitial(accuracy, loss);
}

std::optional<v1::CollapseGuardReference> RoundEngine::guard_reference() const {
  return guard_->reference();
}

absl::StatusOr<ClosedRound> RoundEngine::RevertClose(double now_s, const std::string& why) {
  if (async_ || !versions_->CanRevert()) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", versions_->version(),
                     " cannot be taken back (published, FedBuff, or not "
                     "closed by this engine)"));
  }
  FEDSCHED_RETURN_IF_ERROR(aggregator_->RestoreState(state_before_close_));
  // The model before the round comes back; the rejected one is never handed out.
  versions_->Revert();
  record_.set_outcome(v1::ROUND_OUTCOME_FAILED);
  record_.set_end_unix_ms(ToMillis(now_s));
  ClosedRound out;
  NoteFailedAttempt(now_s, why, &out);
  return out;
}

absl::StatusOr<std::optional<ClosedRound>> RoundEngine::GuardCommitted(
    const ClosedRound& closed, std::optional<Evaluation> evaluation) {
  absl::Status verdict =
      closed.commit.model != nullptr ? ValidateModel(*closed.commit.model) : absl::OkStatus();
  if (verdict.ok() && evaluation.has_value()) {
    verdict = ScreenEvaluation(evaluation->accuracy, evaluation->loss);
  }
  if (verdict.ok()) {
    if (evaluation.has_value()) last_accuracy_ = evaluation->accuracy;
    return std::nullopt;
  }
  absl::StatusOr<ClosedRound> reverted =
      RevertClose(closed.closed_at_s, absl::StrCat("not published: ", verdict.message()));
  if (!reverted.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", closed.record.round(), " must not be published (", verdict.message(),
                     ") but cannot be taken back: ", reverted.status().message()));
  }
  return std::optional<ClosedRound>(*std::move(reverted));
}

ClosedRound RoundEngine::Close(double now_s) {
  // The collapse guard may take the round back before it is published (RevertClose); from
  // here until the commit below the previous version cannot be.
  std::shared_ptr<v1::Model> next = versions_->TakeBuffer();
  if (!async_) state_before_close_ = aggregator_->SaveState();
  if (absl::Status s = FoldHeldUpdates(); !s.ok()) {
    return Fail(now_s, absl::StrCat("stale updates: ", s.ToString()));
  }
  if (absl::Status s = BoundRoundInfluence(); !s.ok()) {
    return Fail(now_s, absl::StrCat("bounded influence: ", s.ToString()));
  }
  const uint64_t noise_seed = privacy_ != nullptr ? NextNoiseSeed() : 0;
  if (absl::Status s = PerturbRoundSum(noise_seed); !s.ok()) {
    return Fail(now_s, absl::StrCat("privacy: ", s.ToString()));
  }
  if (absl::Status s = aggregator_->FinalizeInto(*versions_->model(), next.get()); !s.ok()) {
    return Fail(now_s, absl::StrCat("aggregation: ", s.ToString()));
  }
  // The noised sum is out (a reverted round's evaluation was seen too): it counts from here.
  if (absl::Status s = AccountRound(noise_seed); !s.ok()) {
    return Fail(now_s, absl::StrCat("privacy accountant: ", s.ToString()));
  }
  record_.set_outcome(v1::ROUND_OUTCOME_COMMITTED);
  record_.set_end_unix_ms(ToMillis(now_s));
  SummarizeRecord();
  const planner::RoundSummary summary =
      planner_->OnRoundFinished(round_, /*committed=*/true, now_s,
                                /*held_to_deadline=*/now_s >= deadline_s_);
  record_.set_predictor_mape(summary.predictor_mape);
  record_.set_memory_mape(summary.memory_mape);
  record_.set_memory_predictions_scored(summary.memory_scored);

  ClosedRound out;
  out.committed = true;
  out.closed_at_s = now_s;
  out.record = record_;
  RoundCommit& commit = out.commit;
  commit.record = record_;
  commit.model = next;
  commit.receipts = std::move(receipts_);
  receipts_.clear();
  std::vector<profile::ClientIndex> dirty;
  book_->TakeDirty(&dirty);
  if (options_.persist_commits) {
    commit.profiles.reserve(dirty.size());
    for (profile::ClientIndex i : dirty) commit.profiles.push_back(book_->profile(i));
    commit.planner_state = SavedPlannerState().SerializeAsString();
  }
  commit.meta.add_optimizer_state(SavedOptimizerState().SerializeAsString());
  commit.audited_updates = std::move(audited_);
  audited_.clear();

  versions_->Commit(round_, std::move(next), /*revertible=*/!async_);
  backoff_.Reset();
  running_ = false;
  closed_tasks_.clear();
  NoteLateTasks();
  RetireTasks(now_s, /*keep_in_flight=*/async_ && !finished());
  if (async_ && !finished()) Plan(now_s);
  return out;
}

void RoundEngine::SummarizeRecord() {
  if (record_.total_examples() > 0) {
    record_.set_mean_train_loss(loss_sum_ / static_cast<double>(record_.total_examples()));
  }
  if (hits_ + misses_ > 0) {
    record_.set_cache_hit_ratio(static_cast<double>(hits_) / static_cast<double>(hits_ + misses_));
  }
  if (eval_examples_ > 0) {
    const auto n = static_cast<double>(eval_examples_);
    record_.set_client_eval_accuracy(eval_accuracy_sum_ / n);
    record_.set_client_eval_loss(eval_loss_sum_ / n);
    record_.set_client_eval_examples(eval_examples_);
  }
  if (!async_) {
    // Stragglers: the planner records their elapsed time as a lower bound on their duration.
    for (auto& [id, task] : tasks_) {
      if (!task.in_flight()) continue;
      record_.add_stragglers(task.client_id);
      task.failed = true;
      stragglers_.insert(task.task_id);
    }
  }
}

void RoundEngine::RetireTasks(double now_s, bool keep_in_flight) {
  const int64_t max_staleness = aggregator_->config().max_staleness();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    Task& task = it->second;
    // FedBuff: a task whose model is already too many versions behind cannot count any more.
    if (keep_in_flight && task.in_flight() && task.base_version >= 0 &&
        Staleness(task) > max_staleness) {
      FailTaskState(task, now_s,
                    absl::StrCat("more than max_staleness = ", max_staleness, " versions behind"));
      ++dropped_stale_;
    }
    if (keep_in_flight && task.in_flight()) {
      ++it;
      continue;
    }
    closed_tasks_[it->first] = {task.round, stragglers_.contains(it->first), task.uploaded};
    task_of_.erase(task.index);
    it = tasks_.erase(it);
  }
  if (!keep_in_flight) task_of_.clear();
  stragglers_.clear();
}

// A re-plan of a vacant slot evaluates the same candidates again (at every Advance while no
// replacement is found): each client is listed once per round.
void RoundEngine::NotePassedOver(std::vector<v1::SelectionReason>& passed_over) {
  for (v1::SelectionReason& r : passed_over) {
    if (passed_over_.insert(r.client_id()).second) *record_.add_passed_over() = std::move(r);
  }
}

}  // namespace fedsched::round
