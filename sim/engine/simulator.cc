// The simulator's event loop around the round engine (docs/ARCHITECTURE.md "The round engine";
// the call sequence is in simulator.h).
#include "sim/engine/simulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/privacy/round_privacy.h"
#include "server/round/checkin_pacer.h"

namespace fedsched::sim {
namespace {

// Advance calls at one virtual instant before the simulator calls it a livelock: each one
// closes a round, which the engine never does twice at one instant without tasks in between.
constexpr int kMaxClosesPerInstant = 1000;

bool ValidTiming(const TaskTiming& t) {
  for (double v : {t.download_s, t.compute_s, t.io_s, t.upload_s}) {
    if (!std::isfinite(v) || v < 0) return false;
  }
  return t.total_s() > 0;
}

}  // namespace

// round::Presence over the simulator's online list (the availability trace), and, when the
// config models pace steering, the device's check-in window (Simulator::CheckedIn).
class Simulator::OnlinePresence : public round::Presence {
 public:
  explicit OnlinePresence(const Simulator* sim) : sim_(sim) {}
  bool IsReachable(round::ClientIndex index, double now_s) const override {
    return index < sim_->client_of_.size() && sim_->online_pos_[sim_->client_of_[index]] >= 0 &&
           sim_->CheckedIn(index, now_s) && sim_->Free(index);
  }
  void CollectReachable(double now_s, std::vector<round::ClientIndex>* out) const override {
    out->clear();
    out->reserve(sim_->online_.size());
    // In index order (the engine's order; it sorts otherwise), from the online bitmap: O(online
    // + clients / 64), not a scan of every client.
    const std::vector<uint64_t>& bits = sim_->online_bits_;
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
        const auto index = static_cast<round::ClientIndex>(w * 64 + std::countr_zero(word));
        if (sim_->CheckedIn(index, now_s) && sim_->Free(index)) out->push_back(index);
      }
    }
  }

 private:
  const Simulator* sim_;
};

Simulator::Simulator(SimulatorParts parts)
    : parts_(std::move(parts)), config_(parts_.config), t0_(config_.traces().start_time_s()) {}

Simulator::~Simulator() = default;

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(SimulatorParts parts) {
  if (parts.capacity == nullptr || parts.availability == nullptr || parts.learner == nullptr) {
    return absl::InvalidArgumentError(
        "simulator: a capacity trace, an availability trace and a learner are required");
  }
  if (parts.config.num_clients() <= 0) {
    return absl::InvalidArgumentError("simulator: num_clients must be > 0");
  }
  std::unique_ptr<Simulator> sim(new Simulator(std::move(parts)));
  FEDSCHED_RETURN_IF_ERROR(sim->Init());
  return sim;
}

absl::Status Simulator::Init() {
  if (parts_.durations == nullptr) {
    default_durations_ = std::make_unique<CapacityDurations>(parts_.capacity);
    durations_ = default_durations_.get();
  } else {
    durations_ = parts_.durations;
  }
  const int32_t n = config_.num_clients();
  if (config_.server().has_pacing() && !config_.server().pacing().disable()) {
    FEDSCHED_ASSIGN_OR_RETURN(round::PacerOptions pacing, round::PacerOptions::FromServerConfig(
                                                              config_.server(), kCheckInHoldS));
    pacer_ = std::make_unique<round::CheckInPacer>(pacing);
  }
  presence_ = std::make_unique<OnlinePresence>(this);
  FEDSCHED_ASSIGN_OR_RETURN(v1::DeviceBudgetConfig budgets,
                            ResolveDeviceBudgets(config_.budgets()));
  budgets_ = std::make_unique<DeviceBudgets>(std::move(budgets));
  FEDSCHED_RETURN_IF_ERROR(ResolveModelFeatures());
  FEDSCHED_RETURN_IF_ERROR(CreateEngine());
  queue_.set_start_time(t0_);
  const double start = StartTime();
  queue_.Reserve(static_cast<size_t>(n) + 1024);
  online_pos_.assign(n, -1);
  index_of_.assign(n, -1);
  for (int32_t c = 0; c < n; ++c) {
    DeviceInfo d;
    d.client = c;
    d.num_samples = parts_.learner->NumSamples(c);
    // A client without local data never checks in (it has nothing to train on).
    if (d.num_samples <= 0) continue;
    const DeviceCapacity& cap = parts_.capacity->ForClient(c);
    d.compute_ms_per_sample = cap.computation_ms_per_sample;
    d.sample_kb = cap.sample_kb;
    if (budgets_->enabled()) {
      if (device_budget_.empty()) device_budget_.resize(n);
      DeviceBudget& b = device_budget_[c];
      b = budgets_->ForClient(c, d.model);
      d.model = b.device_model;
      d.memory_budget_bytes = b.memory_budget_bytes;
      d.storage_budget_bytes = b.storage_budget_bytes;
    }
    FEDSCHED_ASSIGN_OR_RETURN(profile::ProfileBook::Registration r,
                              engine_->Register(SimIdentity(c), SimDeviceProfile(d), start));
    if (r.index != client_of_.size()) {
      return absl::InternalError(absl::StrCat("simulator: client ", c, " registered as index ",
                                              r.index, ", expected ", client_of_.size()));
    }
    index_of_[c] = static_cast<int64_t>(r.index);
    client_of_.push_back(c);
    if (parts_.availability->IsAvailable(c, start)) {
      FEDSCHED_RETURN_IF_ERROR(SetOnline(c, true, start));
    }
    FEDSCHED_RETURN_IF_ERROR(ScheduleAvailability(c, start));
  }
  // The planner predicts transfers from the published model's size: in no-train mode the
  // engine's model is a one-float stand-in, so a placeholder of the modelled size is served.
  const int64_t bytes = parts_.learner->ModelBytes();
  if (bytes != static_cast<int64_t>(engine_->model()->ByteSizeLong())) {
    auto blob = std::make_shared<round::ModelBlob>();
    blob->bytes.assign(static_cast<size_t>(bytes), '\0');
    blob_ = std::move(blob);
  }
  if (absl::Status s = engine_->Publish(0, engine_->model(), blob_); !s.ok()) {
    return absl::InternalError(absl::StrCat("simulator: publishing version 0: ", s.message()));
  }
  return queue_.Push(start, EventKind::kRoundStart);
}

absl::Status Simulator::CreateEngine() {
  round::EngineOptions options;
  options.config = config_.server();
  options.model = parts_.learner->initial_model();
  options.presence = presence_.get();
  if (parts_.job) {
    gated_ = std::make_unique<round::GatedPresence>(presence_.get(), parts_.job->gate);
    options.presence = gated_.get();
    options.planning_gate = parts_.job->gate;
  }
  FEDSCHED_ASSIGN_OR_RETURN(options.availability, MakeOracle());
  options.model_features = model_features_;
  options.target_accuracy = config_.target_accuracy();
  options.persist_commits = false;  // the simulator stores no planner state or profiles
  FEDSCHED_ASSIGN_OR_RETURN(engine_, round::RoundEngine::Create(std::move(options)));
  if (gated_ != nullptr) gated_->set_engine(engine_.get());
  // The collapse guard's reference is the initial model's evaluation, as in the server.
  FEDSCHED_ASSIGN_OR_RETURN(std::optional<ModelQuality> initial, parts_.learner->EvaluateInitial());
  if (initial.has_value()) {
    FEDSCHED_RETURN_IF_ERROR(engine_->SetInitialEvaluation(initial->accuracy, initial->loss));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunSummary> Simulator::Run(RoundSink* sink) {
  sink_ = sink;
  FEDSCHED_RETURN_IF_ERROR(CheckCanStart());
  const double max_s = config_.max_virtual_hours() * 3600.0;
  bool advance = false;
  while (!stop_) {
    if (queue_.empty()) {
      // Nothing can happen any more (CheckCanStart makes this rare: every client keeps its
      // state for ever and the engine waits).
      return absl::FailedPreconditionError(absl::StrCat(
          "simulator: the run can never go on: no client can come online again and none is "
          "training (",
          online_count(), " online, server.min_online_clients ",
          config_.server().min_online_clients(), ") at virtual ", (summary_.virtual_s / 3600.0),
          " h"));
    }
    if (max_s > 0 && queue_.Top().time_s - t0_ > max_s) {
      summary_.virtual_s = max_s;
      summary_.stop_reason = absl::StrCat("virtual time limit ", max_s, " s");
      break;
    }
    const Event e = queue_.Pop();
    FEDSCHED_RETURN_IF_ERROR(HandleEvent(e, &advance));
    // The engine advances once per batch of same-time events.
    if (advance && (queue_.empty() || queue_.Top().time_s != e.time_s)) {
      advance = false;
      FEDSCHED_RETURN_IF_ERROR(Step(e.time_s));
      NoteWaiting(e.time_s);
    }
  }
  summary_.events = queue_.popped();
  return summary_;
}

void Simulator::NoteWaiting(double now) {
  const int32_t needed = config_.server().min_online_clients();
  if (stop_ || sink_ == nullptr || engine_->running() || online_count() >= needed) return;
  sink_->OnWaiting(now - t0_, online_count(), needed);
}

absl::Status Simulator::HandleEvent(const Event& e, bool* advance) {
  switch (e.kind) {
    case EventKind::kAvailabilityChange:
      *advance = true;
      return OnAvailabilityChange(e.client, e.time_s);
    case EventKind::kTaskComplete:
      *advance = true;
      return OnTaskComplete(e.a, e.time_s);
    case EventKind::kTaskFail: {
      *advance = true;
      auto it = tasks_.find(e.a);
      if (it == tasks_.end()) return absl::InternalError("simulator: unknown task event");
      const SimTask task = std::move(it->second);
      tasks_.erase(it);
      NoteTaskEnd(task.client);
      if (task.out_of_memory) {
        const round::Task* t = engine_->FindTask(task.task_id);
        if (t == nullptr || !t->in_flight()) return absl::OkStatus();
        ++failed_;
        ++summary_.oom_failures;
        return engine_->FailTaskOutOfMemory(task.index, task.task_id, e.time_s, task.peak_bytes);
      }
      return FailIfInFlight(task.index, task.task_id, e.time_s);
    }
    case EventKind::kRoundDeadline:
      // A closed round's deadline does nothing; the open one's closes it in Step.
      if (open_ && e.a == open_serial_) *advance = true;
      return absl::OkStatus();
    case EventKind::kRoundStart:
      *advance = true;
      return absl::OkStatus();
    case EventKind::kSecAggSend:
      *advance = true;
      return OnSecAggSend(e.a, e.time_s);
  }
  return absl::InternalError("simulator: unknown event kind");
}

absl::Status Simulator::FailIfInFlight(round::ClientIndex index, const std::string& task_id,
                                       double now) {
  const round::Task* task = engine_->FindTask(task_id);
  if (task == nullptr || !task->in_flight()) return absl::OkStatus();
  FEDSCHED_RETURN_IF_ERROR(engine_->FailTask(index, task_id, now, "device went offline"));
  ++failed_;
  return absl::OkStatus();
}

absl::Status Simulator::OnTaskComplete(int64_t serial, double now) {
  auto it = tasks_.find(serial);
  if (it == tasks_.end()) return absl::InternalError("simulator: unknown task event");
  const SimTask task = std::move(it->second);
  tasks_.erase(it);
  NoteTaskEnd(task.client);
  const int64_t bytes = parts_.learner->ModelBytes();  // downloaded
  round::Update update;
  update.claim.index = task.index;
  update.claim.task_id = task.task_id;
  update.claim.round = task.round;
  update.claim.num_examples = task.work.examples;
  update.delta = task.delta.get();
  update.metrics = SimUpdateMetrics(task.work, task.timing, task.download_bytes);
  std::unique_ptr<v1::Model> noised;  // distributed DP: the device's clipped, noised update
  FEDSCHED_RETURN_IF_ERROR(PrivatizeUpdate(serial, &update, &noised));
  if (!device_budget_.empty()) {
    const DeviceBudget& b = device_budget_[task.client];
    update.metrics.set_peak_memory_bytes(task.peak_bytes);
    update.metrics.set_memory_budget_bytes(b.memory_budget_bytes);
    update.metrics.set_storage_budget_bytes(b.storage_budget_bytes);
  }
  update.now_s = now;
  update.upload_seconds = task.timing.upload_s;
  update.upload_bytes = task.upload_bytes;
  update.download_bytes = task.download_bytes > 0 ? task.download_bytes : bytes;
  std::optional<v1::SecAggMaskedInput> masked;  // secure aggregation: what the device uploads
  FEDSCHED_ASSIGN_OR_RETURN(const bool upload,
                            MaskUpdate(serial, task.secagg, now, &update, &masked));
  if (!upload) return absl::OkStatus();
  std::unique_ptr<v1::CompressedModel> payload;  // update compression: what the device uploads
  if (!task.secagg) FEDSCHED_RETURN_IF_ERROR(CompressUpload(task, &update, &payload));
  const std::vector<absl::Status> verdicts = engine_->FoldUpdates({update});
  const absl::Status& verdict = verdicts.at(0);
  if (verdict.ok()) {
    ++accepted_;
    accepted_duration_s_ += task.timing.total_s();
    parts_.learner->OnAccepted(task.client, task.round);
    return absl::OkStatus();
  }
  // Late, straggling or failed tasks are refused and their work dropped, as the server does;
  // a malformed update means the learner (or a scripted test) produced something wrong.
  if (verdict.code() == absl::StatusCode::kInvalidArgument) {
    return absl::InvalidArgumentError(absl::StrCat("simulator: the engine refused client ",
                                                   task.client, "'s update for task ", task.task_id,
                                                   ": ", verdict.message()));
  }
  return absl::OkStatus();
}

absl::Status Simulator::Step(double now) {
  for (int i = 0; i < kMaxClosesPerInstant; ++i) {
    const std::vector<round::ClosedRound> closed = engine_->Advance(now);
    SettleGate(now);
    for (const round::ClosedRound& c : closed) {
      FEDSCHED_RETURN_IF_ERROR(FinishRound(c, now));
      if (stop_) return absl::OkStatus();
    }
    FEDSCHED_RETURN_IF_ERROR(NoteOpened(now));
    if (closed.empty()) {
      // The simulator counts failures itself (RoundRow::failed); the engine's notes are for a
      // server's log.
      (void)engine_->TakeTaskFailures();
      FEDSCHED_RETURN_IF_ERROR(ScheduleWake(now));
      FEDSCHED_RETURN_IF_ERROR(PollSecAgg(now));
      return StartNewTasks(now);
    }
  }
  return absl::InternalError(absl::StrCat("simulator: more than ", kMaxClosesPerInstant,
                                          " rounds closed at virtual time ", now, " s"));
}

bool Simulator::CheckedIn(round::ClientIndex index, double now_s) const {
  if (pacer_ == nullptr) return true;
  const double cycle = pacer_->CycleSeconds(static_cast<int64_t>(online_.size()));
  const double hold = pacer_->options().hold_s;
  if (cycle <= hold) return true;
  // A participant stays until its task ends, as the server never sends one away.
  if (engine_ != nullptr && engine_->TaskOf(index) != nullptr) return true;
  // Each device checks in for `hold` seconds once per cycle, at a fixed phase drawn from its
  // index: the share of time checked in, hold / cycle, is the live server's (docs/ALGORITHMS.md
  // §2.6); the live delays are spread at random instead of periodic.
  const double phase = round::UnitDraw(index + round::kSplitMixGamma * config_.server().seed());
  return std::fmod(now_s / cycle + phase, 1.0) < hold / cycle;
}

absl::Status Simulator::ScheduleWake(double now) {
  // Modelled pace steering: candidates change as devices check in, which no trace event marks;
  // while no round runs, look again after one hold.
  if (pacer_ != nullptr && !engine_->running() && !engine_->finished() && !stop_) {
    const double at = now + pacer_->options().hold_s;
    if (at != wake_s_) {
      wake_s_ = at;
      FEDSCHED_RETURN_IF_ERROR(queue_.Push(at, EventKind::kRoundStart));
    }
    return absl::OkStatus();
  }
  // A round that failed repeatedly is re-planned only after the engine's backoff: wake it then
  // (nothing else may happen in between).
  const double at = engine_->next_plan_s();
  if (engine_->running() || !(at > now) || at == wake_s_) return absl::OkStatus();
  wake_s_ = at;
  return queue_.Push(at, EventKind::kRoundStart);
}

// The CSV row of a closed round, from its record and the simulator's counters.
RoundRow Simulator::MakeRow(const round::ClosedRound& closed, const ModelQuality& quality,
                            double now) {
  const v1::RoundRecord& record = closed.record;
  RoundRow row;
  row.round = record.round();
  row.committed = closed.committed;
  row.start_s = open_s_ - t0_;
  row.end_s = now - t0_;
  row.quality = quality;
  row.online = online_at_open_;
  row.selected = record.cohort_size();
  row.participants = record.updates_accepted();
  row.stragglers = record.stragglers_size();
  row.failed = failed_;
  row.cache_hit_ratio = record.cache_hit_ratio();
  row.predictor_mape = record.predictor_mape();
  row.mean_duration_s = accepted_ > 0 ? accepted_duration_s_ / accepted_ : 0;
  row.staleness_mean = record.staleness_mean();
  row.staleness_max = record.staleness_max();
  row.dropped_stale = record.dropped_stale();
  row.oom_failures = record.oom_failures();
  row.passed_over = record.passed_over_size();
  row.memory_mape = record.memory_mape();
  row.dp_epsilon = record.dp_epsilon();
  if (closed.committed) last_dp_epsilon_ = record.dp_epsilon();
  row.dp_csv = privacy::CsvCells(record);
  row.secagg = std::exchange(secagg_counts_, {});
  row.uplink_bytes = record.uplink_bytes();
  row.downlink_bytes = record.downlink_bytes();
  row.stale_folded = record.stale_updates_folded();
  row.stale_weight_mean = record.stale_weight_mean();
  return row;
}

absl::Status Simulator::FinishRound(const round::ClosedRound& given, double now) {
  const round::ClosedRound* closed_ptr = &given;
  const int64_t round = given.record.round();
  ModelQuality quality;
  std::optional<round::ClosedRound> taken_back;
  if (given.committed) {
    // Evaluated before it is published, and refused by the engine's collapse guard exactly as
    // the server refuses it (docs/guides/SECURITY.md "Updates"): then the round is a failed one and
    // the previous model stays. (A modelled learner has already counted the round's progress;
    // its accuracy curve never drops, so its rounds are never refused.)
    FEDSCHED_ASSIGN_OR_RETURN(quality, parts_.learner->EndRound(round, true, *given.commit.model));
    std::optional<round::RoundEngine::Evaluation> evaluation;
    if (quality.evaluated) evaluation = {quality.accuracy, quality.loss};
    absl::StatusOr<std::optional<round::ClosedRound>> guard =
        engine_->GuardCommitted(given, evaluation);
    if (!guard.ok())
      return absl::InternalError(absl::StrCat("simulator: ", guard.status().message()));
    if (guard->has_value()) {
      taken_back = std::move(**guard);
      closed_ptr = &*taken_back;
    } else if (absl::Status s = engine_->Publish(round, given.commit.model, blob_); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("simulator: publishing version ", round, ": ", s.message()));
    }
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(quality, parts_.learner->EndRound(round, false, *engine_->model()));
  }
  const round::ClosedRound& closed = *closed_ptr;
  const v1::RoundRecord& record = closed.record;
  quality.train_loss = record.mean_train_loss();
  const RoundRow row = MakeRow(closed, quality, now);
  open_ = false;  // its deadline event is stale now
  if (sink_ != nullptr) {
    sink_->OnRound(row);
    v1::RoundRecord evaluated = record;
    evaluated.set_test_accuracy(quality.accuracy);
    evaluated.set_test_loss(quality.loss);
    sink_->OnRecord(evaluated, closed.committed ? closed.commit.model.get() : nullptr);
  }
  summary_.virtual_s = row.end_s;
  if (closed.committed) {
    ++summary_.rounds_committed;
    if (quality.evaluated) {
      summary_.final_accuracy = quality.accuracy;
      if (config_.target_accuracy() > 0 && summary_.time_to_target_s < 0 &&
          quality.accuracy >= config_.target_accuracy()) {
        summary_.time_to_target_s = row.end_s;
      }
    }
  } else {
    ++summary_.rounds_failed;
  }
  Done(now);
  return absl::OkStatus();
}

absl::Status Simulator::NoteOpened(double now) {
  if (!engine_->running()) return absl::OkStatus();
  const int64_t round = engine_->current_round();
  const int attempt = engine_->attempts_failed();
  if (open_ && round == open_round_ && attempt == open_attempt_) return absl::OkStatus();
  // The round (version) opened in the Advance just made, at `now`: the engine's deadline is
  // now + record.deadline_s (the same expression, so the same double).
  open_ = true;
  open_round_ = round;
  open_attempt_ = attempt;
  ++open_serial_;
  open_s_ = now;
  if (summary_.first_round_s < 0) summary_.first_round_s = now - t0_;
  online_at_open_ = online_count();
  failed_ = 0;
  accepted_ = 0;
  accepted_duration_s_ = 0;
  return queue_.Push(now + engine_->current_record().deadline_s(), EventKind::kRoundDeadline, -1,
                     open_serial_);
}

absl::Status Simulator::StartNewTasks(double now) {
  const std::vector<const round::Task*> fresh = engine_->TakeNewTasks();
  if (fresh.empty()) return absl::OkStatus();
  std::vector<TrainTask> train;
  std::vector<round::ClientIndex> indices;
  std::vector<int64_t> peaks;
  train.reserve(fresh.size());
  indices.reserve(fresh.size());
  for (const round::Task* t : fresh) {
    // The device fetches the published model at once (virtual time stands still).
    // It holds the shadow model it downloaded last (downlink compression: a delta chain from it).
    v1::HeldModel held;
    auto held_it = held_version_.find(t->index);
    if (held_it != held_version_.end()) held.set_version(held_it->second);
    absl::StatusOr<const round::Task*> pinned =
        engine_->PinModel(t->index, t->task_id, held_it != held_version_.end() ? &held : nullptr);
    if (!pinned.ok()) {
      return absl::InternalError(
          absl::StrCat("simulator: pinning task ", t->task_id, ": ", pinned.status().message()));
    }
    if (engine_->downlink() != nullptr) held_version_[t->index] = (*pinned)->base_version;
    TrainTask task;
    task.client = client_of_[t->index];
    task.task_id = t->task_id;
    task.round = t->round;
    task.local_steps = t->local_steps;
    task.batch_size = t->batch_size;
    task.cache_plan = t->cache_plan;
    ++summary_.tasks_started;
    int64_t peak = 0;
    FEDSCHED_ASSIGN_OR_RETURN(bool oom, FailsOutOfMemory(task, t->index, now, &peak));
    if (oom) continue;
    peaks.push_back(peak);
    train.push_back(std::move(task));
    indices.push_back(t->index);
  }
  if (train.empty()) return Prefetch();
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<TrainedTask> trained,
                            parts_.learner->Train(train, *engine_->download_model()));
  if (trained.size() != train.size()) {
    return absl::InternalError("simulator: the learner returned a different number of tasks");
  }
  for (size_t i = 0; i < train.size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(ScheduleTask(train[i], std::move(trained[i]), indices[i], now));
    tasks_[next_serial_ - 1].peak_bytes = peaks[i];
  }
  return Prefetch();
}

absl::Status Simulator::ScheduleTask(const TrainTask& task, TrainedTask trained,
                                     round::ClientIndex index, double now) {
  const int64_t bytes = parts_.learner->ModelBytes();
  if (trained.delta == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulator: the learner returned no delta for task ", task.task_id));
  }
  const round::Task* planned = engine_->FindTask(task.task_id);
  // The upload is charged the update's compressed bytes (docs/ALGORITHMS.md §13): known from
  // its shapes before it is compressed at completion (after DP's clip and noise).
  TrainTask timed = task;
  const v1::UpdateCompression compression =
      planned != nullptr ? planned->upload_compression : v1::UpdateCompression();
  timed.upload_bytes = UploadBytesOf(compression, trained.delta.get());
  FEDSCHED_ASSIGN_OR_RETURN(TaskTiming timing, durations_->Timing(timed, trained.work, bytes));
  // Downlink compression: the device downloads its pinned delta chain (or the whole shadow).
  const int64_t downloaded = DownloadBytesOf(planned);
  if (downloaded != bytes && bytes > 0) {
    timing.download_s *= static_cast<double>(downloaded) / static_cast<double>(bytes);
  }
  if (!ValidTiming(timing)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulator: task ", task.task_id, " of client ", task.client,
        " has an invalid timing (every phase must be finite and >= 0, the total > 0)"));
  }
  const int64_t serial = next_serial_++;
  SimTask& t = tasks_[serial];
  t.task_id = task.task_id;
  t.client = task.client;
  t.index = index;
  t.round = task.round;
  t.work = trained.work;
  t.timing = timing;
  t.download_bytes = downloaded;
  t.delta = std::move(trained.delta);
  t.compression = compression;
  t.upload_bytes = timed.upload_bytes;
  FEDSCHED_RETURN_IF_ERROR(NoteTaskStart(task.client));
  // Secure aggregation: the key steps come first; the task's work starts with the routed shares.
  if (planned != nullptr) ApplyUpdateDropout(t, planned->update_dropout);
  if (planned != nullptr && planned->in_secagg()) return BeginSecAgg(serial, *planned, now);
  return PushTaskEnd(serial, now);
}

absl::Status Simulator::PushTaskEnd(int64_t serial, double start) {
  SimTask& t = tasks_.at(serial);
  const double done = start + t.timing.total_s();
  // The device must stay online until it is done (docs/ALGORITHMS.md §7.3).
  const double offline = parts_.availability->NextChange(t.client, start);
  if (offline < done) {
    t.delta.reset();  // never uploaded
    return queue_.Push(offline, EventKind::kTaskFail, t.client, serial);
  }
  return queue_.Push(done, EventKind::kTaskComplete, t.client, serial);
}

absl::Status Simulator::Prefetch() {
  if (!parts_.learner->prefetches()) return absl::OkStatus();
  for (int32_t c : online_) {
    const auto index = static_cast<round::ClientIndex>(index_of_[c]);
    const v1::CachePlan* plan = engine_->PrefetchPlan(index);
    if (plan == nullptr || engine_->TaskOf(index) != nullptr) continue;
    FEDSCHED_RETURN_IF_ERROR(parts_.learner->Prefetch(c, *plan));
  }
  return absl::OkStatus();
}

bool Simulator::Done(double now) {
  if (stop_) return true;
  if (engine_->privacy_budget_exhausted()) {
    summary_.stop_reason = BudgetStopReason();
  } else if (engine_->finished()) {
    summary_.stop_reason = absl::StrCat("completed ", config_.server().num_rounds(), " rounds");
  } else if (config_.target_accuracy() > 0 && summary_.time_to_target_s >= 0) {
    summary_.stop_reason = absl::StrCat("reached target accuracy ", config_.target_accuracy());
  } else if (config_.max_virtual_hours() > 0 && now - t0_ >= config_.max_virtual_hours() * 3600.0) {
    summary_.stop_reason =
        absl::StrCat("virtual time limit ", config_.max_virtual_hours() * 3600.0, " s");
  } else {
    return false;
  }
  stop_ = true;
  return true;
}

}  // namespace fedsched::sim
