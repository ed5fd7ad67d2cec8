#include "server/service/upload_gate.h"

#include <algorithm>
#include <utility>

namespace fedsched {

int64_t ReceivingUploadBudget(double models, int64_t model_bytes) {
  if (!(models > 0)) return 0;
  constexpr int64_t kSmallModelsBytes = int64_t{8} << 20;
  return std::max(static_cast<int64_t>(models * static_cast<double>(model_bytes)),
                  kSmallModelsBytes - model_bytes);
}

UploadGate::UploadGate(int64_t budget_bytes, absl::Duration stall)
    : budget_(budget_bytes), stall_(stall) {}

bool UploadGate::Acquire(int64_t bytes, absl::Time now, uint64_t* ticket,
                         absl::AnyInvocable<void()> resume) {
  absl::MutexLock lock(&mu_);
  *ticket = next_ticket_++;
  // FIFO: a newcomer does not overtake waiters, even when it alone would fit.
  if (budget_ <= 0 || admitted_count_ == 0 || (waiters_.empty() && bytes <= budget_ - admitted_)) {
    admitted_ += bytes;
    ++admitted_count_;
    // The stall clock starts with the first admitted upload, not at its first chunk.
    if (admitted_count_ == 1) last_progress_ = now;
    return true;
  }
  waiters_.push_back({*ticket, bytes, std::move(resume)});
  return false;
}

bool UploadGate::Cancel(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->ticket == ticket) {
      waiters_.erase(it);
      return true;
    }
  }
  return false;
}

std::deque<UploadGate::Waiter> UploadGate::AdmitLocked(bool force) {
  std::deque<Waiter> admitted;
  while (!waiters_.empty() &&
         (force || admitted_count_ == 0 || waiters_.front().bytes <= budget_ - admitted_)) {
    admitted_ += waiters_.front().bytes;
    ++admitted_count_;
    admitted.push_back(std::move(waiters_.front()));
    waiters_.pop_front();
    force = false;
  }
  return admitted;
}

void UploadGate::Release(int64_t bytes, absl::Time now) {
  std::deque<Waiter> admitted;
  {
    absl::MutexLock lock(&mu_);
    admitted_ -= bytes;
    --admitted_count_;
    // A finished upload is progress: the next ones get a full stall period.
    last_progress_ = now;
    admitted = AdmitLocked(/*force=*/false);
  }
  for (Waiter& w : admitted) w.resume();
}

void UploadGate::NoteProgress(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now > last_progress_) last_progress_ = now;
}

void UploadGate::Poll(absl::Time now) {
  std::deque<Waiter> admitted;
  {
    absl::MutexLock lock(&mu_);
    if (waiters_.empty() || now - last_progress_ < stall_) return;
    last_progress_ = now;
    admitted = AdmitLocked(/*force=*/true);
  }
  for (Waiter& w : admitted) w.resume();
}

int64_t UploadGate::admitted_bytes() const {
  absl::MutexLock lock(&mu_);
  return admitted_;
}

int UploadGate::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

}  // namespace fedsched
