#include "sim/engine/simulator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fedsched::sim {
namespace {

constexpr double kInf = AvailabilityTrace::kNever;

}  // namespace

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(const Options& options,
                                                             const CapacityTrace* capacity,
                                                             const AvailabilityTrace* availability,
                                                             ParticipantSelector* selector,
                                                             Learner* learner) {
  if (capacity == nullptr || availability == nullptr || selector == nullptr || learner == nullptr) {
    return absl::InvalidArgumentError("simulator: traces, selector and learner are required");
  }
  if (options.num_clients <= 0 || options.clients_per_round <= 0 || options.num_rounds <= 0) {
    return absl::InvalidArgumentError(
        "simulator: num_clients, clients_per_round and num_rounds must be > 0");
  }
  if (!(options.overcommit >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulator: overcommit must be >= 1, got ", options.overcommit));
  }
  if (!(options.round_deadline_s > 0)) {
    return absl::InvalidArgumentError("simulator: round_deadline_s must be > 0");
  }
  if (options.min_updates > options.clients_per_round || options.min_updates < 0) {
    return absl::InvalidArgumentError("simulator: min_updates must be in [0, K]");
  }
  if (options.batch_size <= 0 || options.local_steps <= 0) {
    return absl::InvalidArgumentError("simulator: batch_size and local_steps must be > 0");
  }
  Options o = options;
  if (o.min_updates == 0) o.min_updates = std::max(1, o.clients_per_round / 2);
  if (o.min_online_clients <= 0) o.min_online_clients = o.clients_per_round;
  return std::unique_ptr<Simulator>(new Simulator(o, capacity, availability, selector, learner));
}

Simulator::Simulator(const Options& options, const CapacityTrace* capacity,
                     const AvailabilityTrace* availability, ParticipantSelector* selector,
                     Learner* learner)
    : options_(options),
      capacity_(capacity),
      availability_(availability),
      selector_(selector),
      learner_(learner) {}

void Simulator::SetOnline(int32_t c, bool online) {
  const bool is_online = online_pos_[c] >= 0;
  if (online == is_online) return;
  if (online) {
    online_pos_[c] = static_cast<int32_t>(online_.size());
    online_.push_back(c);
  } else {
    const int32_t pos = online_pos_[c];
    const int32_t last = online_.back();
    online_[pos] = last;
    online_pos_[last] = pos;
    online_.pop_back();
    online_pos_[c] = -1;
  }
}

absl::Status Simulator::ScheduleAvailability(int32_t c, double now) {
  double next = availability_->NextChange(c, now);
  if (next <= now) next = availability_->NextChange(c, std::nextafter(now, kInf));  // rounding
  if (next == kInf) return absl::OkStatus();
  return queue_.Push(next, EventKind::kAvailabilityChange, c);
}

absl::Status Simulator::Init() {
  const double t0 = options_.start_time_s;
  queue_.set_start_time(t0);
  queue_.Reserve(static_cast<size_t>(options_.num_clients) + 1024);
  online_pos_.assign(options_.num_clients, -1);
  std::vector<DeviceInfo> devices(options_.num_clients);
  for (int32_t c = 0; c < options_.num_clients; ++c) {
    const DeviceCapacity& d = capacity_->ForClient(c);
    devices[c].client = c;
    devices[c].compute_ms_per_sample = d.computation_ms_per_sample;
    devices[c].sample_kb = d.sample_kb;
    devices[c].num_samples = learner_->NumSamples(c);
    // A client without local data never checks in (it has nothing to train on).
    if (devices[c].num_samples <= 0) continue;
    if (availability_->IsAvailable(c, t0)) SetOnline(c, true);
    FEDSCHED_RETURN_IF_ERROR(ScheduleAvailability(c, t0));
  }
  FEDSCHED_RETURN_IF_ERROR(selector_->RegisterClients(devices));
  start_pending_ = true;
  return queue_.Push(t0, EventKind::kRoundStart);
}

absl::Status Simulator::MaybeStartRound(double now) {
  if (round_open_ || stop_) return absl::OkStatus();
  if (static_cast<int32_t>(online_.size()) < options_.min_online_clients ||
      now == last_failed_close_) {
    // Not enough devices (or a round just failed at this instant): wait for availability
    // events; time advances through them, so this never spins.
    waiting_ = true;
    return absl::OkStatus();
  }
  waiting_ = false;
  return StartRound(now);
}

absl::Status Simulator::StartRound(double now) {
  const int32_t count =
      static_cast<int32_t>(std::ceil(options_.clients_per_round * options_.overcommit - 1e-9));
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<PlannedTask> planned,
                            selector_->Select(round_, now, online_, count));
  if (planned.empty()) {
    waiting_ = true;
    return absl::OkStatus();
  }
  for (PlannedTask& p : planned) {
    if (p.client < 0 || p.client >= options_.num_clients || online_pos_[p.client] < 0) {
      return absl::InternalError(absl::StrCat("selector '", selector_->name(), "' chose client ",
                                              p.client, " which is not online at t=", now));
    }
    if (p.local_steps <= 0) p.local_steps = options_.local_steps;
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<TaskWork> work, learner_->StartTasks(round_, planned));
  if (work.size() != planned.size()) {
    return absl::InternalError("learner returned a different number of tasks");
  }
  ++attempt_;
  round_open_ = true;
  tasks_.clear();
  accepted_.clear();
  failed_ = 0;
  row_ = RoundRow{};
  row_.round = round_;
  row_.start_s = now - options_.start_time_s;
  row_.online = static_cast<int32_t>(online_.size());
  row_.selected = static_cast<int32_t>(planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    Task t;
    t.client = planned[i].client;
    t.start_s = now;
    t.predicted_s = planned[i].predicted_s;
    t.work = work[i];
    t.timing = ComputeTaskTiming(capacity_->ForClient(t.client), t.work.examples,
                                 learner_->ModelBytes(), t.work.cache_hits, t.work.cache_misses);
    const double done = now + t.timing.total_s();
    // The device must stay online until it is done (research.md section 1).
    const double offline = availability_->NextChange(t.client, now);
    const int64_t task_index = static_cast<int64_t>(tasks_.size());
    if (offline < done) {
      FEDSCHED_RETURN_IF_ERROR(
          queue_.Push(offline, EventKind::kTaskFail, t.client, attempt_, task_index));
    } else {
      FEDSCHED_RETURN_IF_ERROR(
          queue_.Push(done, EventKind::kTaskComplete, t.client, attempt_, task_index));
    }
    tasks_.push_back(t);
  }
  running_ = static_cast<int32_t>(tasks_.size());
  return queue_.Push(now + options_.round_deadline_s, EventKind::kRoundDeadline, -1, attempt_);
}

TaskReport Simulator::MakeReport(const Task& t, TaskOutcome outcome, double end_s) const {
  TaskReport r;
  r.client = t.client;
  r.round = round_;
  r.outcome = outcome;
  r.start_s = t.start_s;
  r.end_s = end_s;
  r.duration_s = t.timing.total_s();
  r.predicted_s = t.predicted_s;
  r.compute_s = t.timing.compute_s;
  r.download_s = t.timing.download_s;
  r.upload_s = t.timing.upload_s;
  r.io_s = t.timing.io_s;
  r.examples = t.work.examples;
  r.model_bytes = learner_->ModelBytes();
  r.cache_hits = t.work.cache_hits;
  r.cache_misses = t.work.cache_misses;
  r.mean_loss = t.work.mean_loss;
  r.statistical_utility = t.work.statistical_utility;
  return r;
}

absl::Status Simulator::OnTaskComplete(const Event& e) {
  if (!round_open_ || e.a != attempt_) return absl::OkStatus();  // a closed round's task
  Task& t = tasks_[e.b];
  if (!t.running) return absl::OkStatus();
  t.running = false;
  --running_;
  const bool full = static_cast<int32_t>(accepted_.size()) >= options_.clients_per_round;
  if (full) {
    // DEADLINE mode keeps only K updates too; a late arrival is a straggler.
    selector_->Report(MakeReport(t, TaskOutcome::kStraggler, e.time_s));
    ++row_.stragglers;
  } else {
    FEDSCHED_RETURN_IF_ERROR(learner_->Accept(t.client));
    accepted_.push_back(static_cast<int32_t>(e.b));
    selector_->Report(MakeReport(t, TaskOutcome::kAccepted, e.time_s));
  }
  const bool k_in = static_cast<int32_t>(accepted_.size()) >= options_.clients_per_round;
  if ((k_in && options_.closing != v1::ROUND_CLOSING_DEADLINE) || running_ == 0) {
    return CloseRound(e.time_s);
  }
  return absl::OkStatus();
}

absl::Status Simulator::OnTaskFail(const Event& e) {
  if (!round_open_ || e.a != attempt_) return absl::OkStatus();
  Task& t = tasks_[e.b];
  if (!t.running) return absl::OkStatus();
  t.running = false;
  --running_;
  ++failed_;
  selector_->Report(MakeReport(t, TaskOutcome::kFailedOffline, e.time_s));
  if (running_ == 0) return CloseRound(e.time_s);
  return absl::OkStatus();
}

absl::Status Simulator::CloseRound(double now) {
  round_open_ = false;
  for (const Task& t : tasks_) {
    if (!t.running) continue;
    selector_->Report(MakeReport(t, TaskOutcome::kStraggler, now));
    ++row_.stragglers;
  }
  const bool commit = static_cast<int32_t>(accepted_.size()) >= options_.min_updates;
  FEDSCHED_ASSIGN_OR_RETURN(ModelQuality quality, learner_->EndRound(round_, commit));
  selector_->EndRound(round_, now, commit);
  FEDSCHED_RETURN_IF_ERROR(selector_->Health());
  row_.committed = commit;
  row_.end_s = now - options_.start_time_s;
  row_.quality = quality;
  row_.participants = static_cast<int32_t>(accepted_.size());
  row_.failed = failed_;
  int64_t hits = 0, reads = 0;
  double ape = 0, duration = 0;
  int32_t predicted = 0;
  for (int32_t i : accepted_) {
    const Task& t = tasks_[i];
    hits += t.work.cache_hits;
    reads += t.work.cache_hits + t.work.cache_misses;
    const double actual = t.timing.total_s();
    duration += actual;
    if (t.predicted_s > 0 && actual > 0) {
      ape += std::abs(t.predicted_s - actual) / actual;
      ++predicted;
    }
  }
  row_.cache_hit_ratio = reads > 0 ? static_cast<double>(hits) / static_cast<double>(reads) : 0;
  row_.predictor_mape = predicted > 0 ? ape / predicted : 0;
  row_.mean_duration_s = accepted_.empty() ? 0 : duration / accepted_.size();
  if (sink_ != nullptr) sink_->OnRound(row_);
  summary_.virtual_s = row_.end_s;
  if (commit) {
    ++summary_.rounds_committed;
    ++round_;
    if (quality.evaluated) {
      summary_.final_accuracy = quality.accuracy;
      if (options_.target_accuracy > 0 && summary_.time_to_target_s < 0 &&
          quality.accuracy >= options_.target_accuracy) {
        summary_.time_to_target_s = row_.end_s;
      }
    }
    last_failed_close_ = -1;
  } else {
    ++summary_.rounds_failed;
    if (row_.start_s + options_.start_time_s == now) last_failed_close_ = now;
  }
  tasks_.clear();
  accepted_.clear();
  if (Done(now)) return absl::OkStatus();
  return MaybeStartRound(now);
}

bool Simulator::Done(double now) {
  if (stop_) return true;
  if (summary_.rounds_committed >= options_.num_rounds) {
    summary_.stop_reason = absl::StrCat("completed ", options_.num_rounds, " rounds");
  } else if (options_.target_accuracy > 0 && summary_.time_to_target_s >= 0) {
    summary_.stop_reason = absl::StrCat("reached target accuracy ", options_.target_accuracy);
  } else if (options_.max_virtual_s > 0 && now - options_.start_time_s >= options_.max_virtual_s) {
    summary_.stop_reason = absl::StrCat("virtual time limit ", options_.max_virtual_s, " s");
  } else {
    return false;
  }
  stop_ = true;
  return true;
}

absl::StatusOr<RunSummary> Simulator::Run(RoundSink* sink) {
  sink_ = sink;
  FEDSCHED_RETURN_IF_ERROR(Init());
  while (!stop_) {
    if (queue_.empty()) {
      summary_.stop_reason = "no client can come online again (availability trace exhausted)";
      break;
    }
    if (options_.max_virtual_s > 0 &&
        queue_.Top().time_s - options_.start_time_s > options_.max_virtual_s) {
      summary_.virtual_s = options_.max_virtual_s;
      summary_.stop_reason = absl::StrCat("virtual time limit ", options_.max_virtual_s, " s");
      break;
    }
    const Event e = queue_.Pop();
    switch (e.kind) {
      case EventKind::kAvailabilityChange:
        SetOnline(e.client, availability_->IsAvailable(e.client, e.time_s));
        FEDSCHED_RETURN_IF_ERROR(ScheduleAvailability(e.client, e.time_s));
        if (waiting_) FEDSCHED_RETURN_IF_ERROR(MaybeStartRound(e.time_s));
        break;
      case EventKind::kTaskComplete:
        FEDSCHED_RETURN_IF_ERROR(OnTaskComplete(e));
        break;
      case EventKind::kTaskFail:
        FEDSCHED_RETURN_IF_ERROR(OnTaskFail(e));
        break;
      case EventKind::kRoundDeadline:
        if (round_open_ && e.a == attempt_) FEDSCHED_RETURN_IF_ERROR(CloseRound(e.time_s));
        break;
      case EventKind::kRoundStart:
        start_pending_ = false;
        FEDSCHED_RETURN_IF_ERROR(MaybeStartRound(e.time_s));
        break;
    }
  }
  summary_.events = queue_.popped();
  return summary_;
}

}  // namespace fedsched::sim
