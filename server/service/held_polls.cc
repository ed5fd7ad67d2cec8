#include "server/service/held_polls.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "server/service/grpc_service.h"

namespace fedsched {

// A held poll: finished exactly once, by whoever takes it out of the set (the waiter thread, a
// cancellation, or the destructor); `in_set`, `finished` and `cancelled` are under owner->mu_.
class HeldPolls::Held : public grpc::ServerUnaryReactor {
 public:
  Held(HeldPolls* owner, const v1::PollTaskRequest* request, v1::PollTaskResponse* response,
       absl::Time now, absl::Time deadline)
      : owner_(owner),
        request_(request),
        response_(response),
        deadline_(deadline),
        last_activity_(now) {}
  void OnCancel() override { owner_->Cancelled(this); }
  void OnDone() override { delete this; }

  HeldPolls* const owner_;
  const v1::PollTaskRequest* const request_;
  v1::PollTaskResponse* const response_;
  const absl::Time deadline_;
  absl::Time last_activity_;  // under owner_->mu_
  bool in_set_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
};

HeldPolls::HeldPolls(DeviceService* coordinator, HeldPollsOptions options, WorkQueue* work)
    : coordinator_(coordinator), options_(options), work_(work), waiter_([this] { Run(); }) {
  coordinator_->SetCheckInHold(options_.max_wait);
  absl::MutexLock lock(&target_->mu);
  target_->polls = this;
}

HeldPolls::~HeldPolls() {
  {
    absl::MutexLock lock(&target_->mu);
    target_->polls = nullptr;
  }
  std::vector<Held*> left;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (Held* poll : held_) {
      poll->in_set_ = false;
      poll->finished_ = true;
      left.push_back(poll);
    }
    held_.clear();
  }
  waiter_.join();
  for (Held* poll : left)
    poll->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "server stopping"));
}

grpc::ServerUnaryReactor* HeldPolls::Poll(grpc::CallbackServerContext* context,
                                          const v1::PollTaskRequest* request,
                                          v1::PollTaskResponse* response) {
  const absl::Time now = absl::Now();
  const absl::Duration wait =
      std::clamp(absl::Milliseconds(request->wait_ms()), absl::ZeroDuration(), options_.max_wait);
  auto* poll = new Held(this, request, response, now, now + wait);
  // The poll is a sign of life as soon as it arrives, even if its first answer waits in the work
  // queue behind a storm of check-ins: recorded like a heartbeat (session
  // checked against the token copy, never waiting for the coordinator's lock).
  v1::HeartbeatRequest alive;
  alive.set_client_id(request->client_id());
  alive.set_session_token(request->session_token());
  coordinator_->Heartbeat(alive, now).IgnoreError();  // a bad session is refused below
  if (work_ == nullptr) {
    Recheck(poll, now, /*expired=*/false, /*first=*/true);
  } else {
    work_->Post([this, poll] { Recheck(poll, absl::Now(), /*expired=*/false, /*first=*/true); });
  }
  return poll;
}

void HeldPolls::Wake() {
  absl::MutexLock lock(&mu_);
  ++wakes_;
  recheck_ = true;
}

std::function<void()> HeldPolls::Waker() const {
  return [target = target_] {
    absl::MutexLock lock(&target->mu);
    if (target->polls != nullptr) target->polls->Wake();
  };
}

int HeldPolls::held() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(held_.size());
}

void HeldPolls::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    absl::Time next = absl::Now() + options_.activity_interval;
    for (const Held* poll : held_) {
      next = std::min({next, poll->deadline_, poll->last_activity_ + options_.activity_interval});
    }
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return recheck_ || stop_; };
    mu_.AwaitWithDeadline(absl::Condition(&ready), next);
    if (stop_) break;
    const absl::Time now = absl::Now();
    const bool all = recheck_;
    recheck_ = false;
    std::vector<Held*> due;
    std::vector<std::string> alive;
    for (Held* poll : held_) {
      if (all || poll->deadline_ <= now) {
        due.push_back(poll);
      } else if (poll->last_activity_ + options_.activity_interval <= now) {
        poll->last_activity_ = now;
        alive.push_back(poll->request_->client_id());
      }
    }
    for (Held* poll : due) {
      held_.erase(poll);
      poll->in_set_ = false;
    }
    mu_.Unlock();
    // A client waiting in a held poll is alive (docs/reports/RELIABILITY.md): its session was
    // checked when the poll arrived and is checked again at every answer.
    for (const std::string& client : alive) coordinator_->NoteActivity(client, now);
    for (Held* poll : due) Recheck(poll, now, poll->deadline_ <= now);
    mu_.Lock();
  }
}

void HeldPolls::Recheck(Held* poll, absl::Time now, bool expired, bool first) {
  int64_t wakes_before;
  {
    absl::MutexLock lock(&mu_);
    wakes_before = wakes_;
  }
  absl::StatusOr<v1::PollTaskResponse> result = coordinator_->PollTask(*poll->request_, now);
  const bool done =
      expired || !result.ok() || result->result_case() != v1::PollTaskResponse::kRetryAfterMs;
  {
    absl::MutexLock lock(&mu_);
    // Under pace steering no more than the pool is held: a device checking in beyond it is sent
    // away at once (docs/ALGORITHMS.md §2.6).
    const int64_t held = static_cast<int64_t>(held_.size());
    const bool may_hold = !first || (poll->deadline_ > now && held < options_.max_held &&
                                     held < coordinator_->CheckInHoldLimit());
    if (!poll->cancelled_ && !done && !stop_ && may_hold) {
      poll->in_set_ = true;
      held_.insert(poll);
      // Tasks planned between the answer above and now: answer again at once.
      if (wakes_ != wakes_before) recheck_ = true;
      return;
    }
    poll->finished_ = true;
    if (poll->cancelled_) result = absl::CancelledError("poll cancelled by the client");
  }
  if (result.ok()) {
    *poll->response_ = *std::move(result);
    if (poll->response_->has_retry_after_ms()) {
      // Held to its bound: the client has waited already and may poll again at once, unless
      // pace steering sends it away for longer (docs/ALGORITHMS.md "Pace steering").
      const int64_t unpaced = expired ? 0 : poll->response_->retry_after_ms();
      poll->response_->set_retry_after_ms(
          coordinator_->PaceIdleRetryMs(poll->request_->client_id(), now, unpaced));
    }
  }
  Finish(poll, result.status());
}

void HeldPolls::Finish(Held* poll, const absl::Status& status) {
  poll->Finish(ToGrpcStatus(status));
}

void HeldPolls::Cancelled(Held* poll) {
  {
    absl::MutexLock lock(&mu_);
    if (poll->finished_) return;
    if (!poll->in_set_) {
      poll->cancelled_ = true;  // the waiter thread has it and finishes it
      return;
    }
    held_.erase(poll);
    poll->in_set_ = false;
    poll->finished_ = true;
  }
  Finish(poll, absl::CancelledError("poll cancelled by the client"));
}

}  // namespace fedsched
