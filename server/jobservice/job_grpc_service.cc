#include "server/jobservice/job_grpc_service.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/grpc_service.h"
#include "server/service/operator_auth.h"

namespace fedsched {
namespace {

// The most round records one WatchJob poll reads when failed attempts it already sent fill
// smaller reads.
constexpr int kMaxWatchRead = 10000;

bool Ended(v1::JobState state) {
  return state == v1::JOB_STATE_FINISHED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// One WatchJob stream. The poller fetches (Poll) only while nothing is queued or being written,
// so a client that reads slowly holds at most one batch in memory; writes and the final Finish
// are started outside the lock, one at a time (Pump).
class WatchReactor final : public grpc::ServerWriteReactor<v1::WatchJobEvent>,
                           public JobGrpcService::Watch {
 public:
  WatchReactor(JobGrpcService* service, const v1::WatchJobRequest& request)
      : service_(service), name_(request.name()), from_round_(request.from_round()) {}

  // Ends the stream with `status` before any event (a refused call).
  void Reject(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finish_ = ToGrpcStatus(status);
    }
    Pump();
  }

  void Poll(fleet::JobControl* control, int batch) override {
    {
      absl::MutexLock lock(&mu_);
      if (finish_.has_value() || writing_ || !queue_.empty()) return;
    }
    std::deque<v1::WatchJobEvent> events;
    bool ends = false;
    absl::Status s = Fetch(control, batch, &events, &ends);
    {
      absl::MutexLock lock(&mu_);
      if (finish_.has_value()) return;  // cancelled meanwhile
      for (v1::WatchJobEvent& event : events) queue_.push_back(std::move(event));
      if (!s.ok()) {
        finish_ = ToGrpcStatus(s);
      } else if (ends) {
        finish_ = grpc::Status::OK;
      }
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.pop_front();
      // A failed write: the stream is gone, whatever was still to be sent.
      if (!ok && (!finish_.has_value() || finish_->ok())) {
        finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke");
      }
    }
    Pump();
  }

  void OnCancel() override { End(absl::CancelledError("cancelled")); }

  void End(const absl::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      if (!finish_.has_value() || finish_->ok()) finish_ = ToGrpcStatus(status);
    }
    Pump();
  }

  void OnDone() override { service_->Release(this); }

 private:
  // Reads the job's record, then its rounds after last_round_ (in this order: rounds read after
  // a record that says "ended" are its last ones) into `events`; `*ends` when the job has ended
  // and no round is left.
  absl::Status Fetch(fleet::JobControl* control, int batch, std::deque<v1::WatchJobEvent>* events,
                     bool* ends) {
    FEDSCHED_ASSIGN_OR_RETURN(v1::JobRecord job, control->Get(name_));
    if (!started_) {
      started_ = true;
      last_round_ = from_round_ > 0 ? from_round_ - 1 : job.committed_round();
      // The job's record opens the stream; an ended job's comes last, after its rounds.
      if (!Ended(job.state())) {
        last_state_ = job.state();
        *events->emplace_back().mutable_job() = job;
      }
    }
    bool caught_up = false;
    for (int limit = batch;; limit *= 2) {
      FEDSCHED_ASSIGN_OR_RETURN(std::vector<v1::RoundRecord> rounds,
                                control->RoundsAfter(name_, last_round_, limit));
      const bool full = static_cast<int>(rounds.size()) >= limit;
      const bool fresh = TakeNew(std::move(rounds), events) > 0;
      caught_up = !full || (!fresh && limit >= kMaxWatchRead);
      // A full read of failed attempts already sent hides what follows them: read further.
      if (fresh || caught_up) break;
    }
    // A state change is told once the rounds before it were sent (the final state last).
    if (caught_up && job.state() != last_state_) {
      last_state_ = job.state();
      *events->emplace_back().mutable_job() = job;
    }
    *ends = caught_up && Ended(job.state());
    return absl::OkStatus();
  }

  // Appends the rounds not yet sent to `events` and returns how many. A failed attempt keeps the
  // number of the round it tried, which a later attempt commits: the stream moves past a round
  // once it is committed, and remembers the failed attempts it sent until then.
  int TakeNew(std::vector<v1::RoundRecord> rounds, std::deque<v1::WatchJobEvent>* events) {
    int fresh = 0;
    for (v1::RoundRecord& round : rounds) {
      if (round.outcome() == v1::ROUND_OUTCOME_COMMITTED) {
        last_round_ = std::max<int64_t>(last_round_, round.round());
      } else if (!failed_sent_.insert({round.round(), round.start_unix_ms(), round.end_unix_ms()})
                      .second) {
        continue;
      }
      ++fresh;
      *events->emplace_back().mutable_round() = std::move(round);
    }
    std::erase_if(failed_sent_,
                  [this](const auto& key) { return std::get<0>(key) <= last_round_; });
    return fresh;
  }

  // Starts the next write, or the Finish once nothing is left to write (a cancelled stream
  // drops what is queued).
  void Pump() {
    const v1::WatchJobEvent* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      const bool cancelled = finish_.has_value() && !finish_->ok();
      if (!queue_.empty() && !cancelled) {
        writing_ = true;
        next = &queue_.front();  // deque: stays put while later events are appended
      } else if (finish_.has_value()) {
        finished_ = true;
        finish = *finish_;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish.has_value()) Finish(*finish);
  }

  JobGrpcService* const service_;
  const std::string name_;
  const int64_t from_round_;
  // Poller thread only.
  bool started_ = false;
  v1::JobState last_state_ = v1::JOB_STATE_UNSPECIFIED;
  int64_t last_round_ = 0;  // the last committed round sent (or the one before from_round)
  // Failed attempts sent of rounds after last_round_: (round, start, end).
  std::set<std::tuple<int64_t, int64_t, int64_t>> failed_sent_;

  absl::Mutex mu_;
  std::deque<v1::WatchJobEvent> queue_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // How the stream ends once the queue is written (an error drops the queue).
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called
};

}  // namespace

JobServiceOptions JobServiceOptionsFor(const v1::JobsConfig& jobs, std::string operator_token) {
  JobServiceOptions options;
  options.operator_token = std::move(operator_token);
  options.operator_cert_sha256.assign(jobs.operator_cert_sha256().begin(),
                                      jobs.operator_cert_sha256().end());
  return options;
}

JobGrpcService::JobGrpcService(fleet::JobControl* control, JobServiceOptions options)
    : control_(control),
      options_(std::move(options)),
      worker_(std::make_unique<WorkQueue>(1)),
      poller_([this] { PollLoop(); }) {}

JobGrpcService::~JobGrpcService() {
  {
    absl::MutexLock lock(&watches_mu_);
    stopping_ = true;
  }
  poller_.join();
  worker_.reset();  // runs what was posted
}

grpc::ServerUnaryReactor* JobGrpcService::OnWorker(grpc::CallbackServerContext* context,
                                                   const char* what,
                                                   absl::AnyInvocable<absl::Status()> handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  worker_->Post([this, context, what, reactor, handler = std::move(handler)]() mutable {
    absl::Status s =
        CheckOperator(*context, options_.operator_token, options_.operator_cert_sha256, what);
    if (s.ok()) s = handler();
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* JobGrpcService::OnRecord(
    grpc::CallbackServerContext* context, const char* what, v1::JobRecord* response,
    absl::AnyInvocable<absl::StatusOr<v1::JobRecord>()> call) {
  return OnWorker(context, what, [response, call = std::move(call)]() mutable -> absl::Status {
    FEDSCHED_ASSIGN_OR_RETURN(*response, call());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobGrpcService::SubmitJob(grpc::CallbackServerContext* context,
                                                    const v1::SubmitJobRequest* request,
                                                    v1::JobRecord* response) {
  return OnRecord(context, "SubmitJob", response,
                  [=, this] { return control_->Submit(request->spec()); });
}

grpc::ServerUnaryReactor* JobGrpcService::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  return OnWorker(context, "ListJobs", [=, this] {
    for (v1::JobRecord& job : control_->List(request->include_ended())) {
      *response->add_jobs() = std::move(job);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobGrpcService::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::JobRequest* request,
                                                 v1::JobRecord* response) {
  return OnRecord(context, "GetJob", response,
                  [=, this] { return control_->Get(request->name()); });
}

grpc::ServerUnaryReactor* JobGrpcService::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::JobRequest* request,
                                                    v1::JobRecord* response) {
  return OnRecord(context, "CancelJob", response, [=, this] {
    return control_->Cancel(request->name(), request->reason().empty() ? "cancelled by the operator"
                                                                       : request->reason());
  });
}

grpc::ServerUnaryReactor* JobGrpcService::PauseJob(grpc::CallbackServerContext* context,
                                                   const v1::JobRequest* request,
                                                   v1::JobRecord* response) {
  return OnRecord(context, "PauseJob", response,
                  [=, this] { return control_->Pause(request->name()); });
}

grpc::ServerUnaryReactor* JobGrpcService::ResumeJob(grpc::CallbackServerContext* context,
                                                    const v1::JobRequest* request,
                                                    v1::JobRecord* response) {
  return OnRecord(context, "ResumeJob", response,
                  [=, this] { return control_->Resume(request->name()); });
}

grpc::ServerWriteReactor<v1::WatchJobEvent>* JobGrpcService::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  auto* reactor = new WatchReactor(this, *request);
  // Metadata and the peer's certificate are read from memory: no need to leave this thread.
  absl::Status s =
      CheckOperator(*context, options_.operator_token, options_.operator_cert_sha256, "WatchJob");
  if (s.ok() && request->from_round() < 0) {
    s = absl::InvalidArgumentError(
        absl::StrCat("from_round must be >= 0, got ", request->from_round()));
  }
  if (s.ok() && !Add(reactor)) s = absl::UnavailableError("the server is shutting down");
  if (!s.ok()) reactor->Reject(s);
  return reactor;
}

void JobGrpcService::EndWatches() {
  {
    absl::MutexLock lock(&watches_mu_);
    watches_ended_ = true;
  }
  ForEachWatch(
      [](Watch* watch) { watch->End(absl::UnavailableError("the server is shutting down")); });
}

int JobGrpcService::open_watches() const {
  absl::MutexLock lock(&watches_mu_);
  return static_cast<int>(watches_.size());
}

bool JobGrpcService::Add(Watch* watch) {
  absl::MutexLock lock(&watches_mu_);
  if (watches_ended_) return false;
  watches_.emplace(watch, WatchSlot{});
  wake_ = true;
  return true;
}

void JobGrpcService::Release(Watch* watch) {
  {
    absl::MutexLock lock(&watches_mu_);
    auto it = watches_.find(watch);
    if (it != watches_.end()) {
      if (it->second.visits > 0) {
        it->second.released = true;  // the last ForEachWatch holding it deletes it
        return;
      }
      watches_.erase(it);
    }
  }
  delete watch;
}

void JobGrpcService::PollLoop() {
  while (true) {
    {
      absl::MutexLock lock(&watches_mu_);
      auto due = [this]() ABSL_SHARED_LOCKS_REQUIRED(watches_mu_) { return wake_ || stopping_; };
      watches_mu_.AwaitWithTimeout(absl::Condition(&due), options_.watch_poll);
      if (stopping_) return;
      wake_ = false;
    }
    ForEachWatch([this](Watch* watch) { watch->Poll(control_, options_.watch_batch); });
  }
}

void JobGrpcService::ForEachWatch(absl::FunctionRef<void(Watch*)> visit) {
  std::vector<Watch*> held;
  {
    absl::MutexLock lock(&watches_mu_);
    for (auto& [watch, slot] : watches_) {
      ++slot.visits;
      held.push_back(watch);
    }
  }
  for (Watch* watch : held) visit(watch);
  std::vector<Watch*> released;
  {
    absl::MutexLock lock(&watches_mu_);
    for (Watch* watch : held) {
      auto it = watches_.find(watch);
      if (--it->second.visits == 0 && it->second.released) {
        released.push_back(watch);
        watches_.erase(it);
      }
    }
  }
  for (Watch* watch : released) delete watch;
}

}  // namespace fedsched
