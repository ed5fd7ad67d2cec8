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

UploadGate::UploadGate(int64_t budget_bytes, absl::Duration stall, double max_job_share)
    : budget_(budget_bytes), stall_(stall), max_job_share_(max_job_share) {}

bool UploadGate::OverShareLocked(const std::string& job, int64_t bytes,
                                 const std::string* newcomer_job) const {
  if (!(max_job_share_ < 1)) return false;
  auto held = admitted_by_job_.find(job);
  // A job holding nothing may take one upload, however large: it is never starved by its share.
  if (held == admitted_by_job_.end() || held->second == 0) return false;
  if (static_cast<double>(held->second + bytes) <= max_job_share_ * static_cast<double>(budget_)) {
    return false;
  }
  auto waiting = waiting_by_job_.find(job);
  const size_t own = waiting == waiting_by_job_.end() ? 0 : waiting->second;
  return waiters_.size() > own || (newcomer_job != nullptr && *newcomer_job != job);
}

void UploadGate::AdmitBytesLocked(int64_t bytes, const std::string& job) {
  admitted_ += bytes;
  ++admitted_count_;
  if (max_job_share_ < 1) admitted_by_job_[job] += bytes;
}

bool UploadGate::Acquire(int64_t bytes, absl::Time now, uint64_t* ticket,
                         absl::AnyInvocable<void()> resume, const std::string& job) {
  absl::MutexLock lock(&mu_);
  *ticket = next_ticket_++;
  // FIFO: a newcomer does not overtake waiters, even when it alone would fit; only those
  // passed over for their job's share (which its waiting makes them) are overtaken.
  bool waiter_ahead = false;
  for (const Waiter& w : waiters_) {
    if (!OverShareLocked(w.job, w.bytes, &job)) {
      waiter_ahead = true;
      break;
    }
  }
  if (budget_ <= 0 || admitted_count_ == 0 ||
      (!waiter_ahead && bytes <= budget_ - admitted_ && !OverShareLocked(job, bytes))) {
    AdmitBytesLocked(bytes, job);
    // The stall clock starts with the first admitted upload, not at its first chunk.
    if (admitted_count_ == 1) last_progress_ = now;
    return true;
  }
  waiters_.push_back({*ticket, bytes, std::move(resume), job});
  ++waiting_by_job_[job];
  return false;
}

bool UploadGate::Cancel(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->ticket == ticket) {
      if (--waiting_by_job_[it->job] == 0) waiting_by_job_.erase(it->job);
      waiters_.erase(it);
      return true;
    }
  }
  return false;
}

void UploadGate::AdmitPassLocked(bool force, std::deque<Waiter>* admitted, bool* passed_over) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    const bool alone = admitted_count_ == 0;
    if (!force && !alone && OverShareLocked(it->job, it->bytes)) {
      *passed_over = true;
      ++it;
      continue;
    }
    if (!force && !alone && it->bytes > budget_ - admitted_) break;
    AdmitBytesLocked(it->bytes, it->job);
    if (--waiting_by_job_[it->job] == 0) waiting_by_job_.erase(it->job);
    admitted->push_back(std::move(*it));
    it = waiters_.erase(it);
    force = false;
  }
}

std::deque<UploadGate::Waiter> UploadGate::AdmitLocked(bool force) {
  std::deque<Waiter> admitted;
  // Admitting one job's waiter may end another's share limit (nobody else waits now): pass
  // again while that can have changed anything.
  for (bool again = true; again;) {
    const size_t before = admitted.size();
    bool passed_over = false;
    AdmitPassLocked(force, &admitted, &passed_over);
    force = false;
    again = passed_over && admitted.size() > before;
  }
  return admitted;
}

void UploadGate::Release(int64_t bytes, absl::Time now, const std::string& job) {
  std::deque<Waiter> admitted;
  {
    absl::MutexLock lock(&mu_);
    admitted_ -= bytes;
    --admitted_count_;
    if (auto held = admitted_by_job_.find(job); held != admitted_by_job_.end()) {
      held->second -= bytes;
      if (held->second <= 0) admitted_by_job_.erase(held);
    }
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
