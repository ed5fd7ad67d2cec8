// The upload receive gate (docs/ARCHITECTURE.md "An upload's path"):
// an upload is held whole in memory from its first data chunk until it is submitted (its SHA-256
// covers the whole payload), so N clients uploading at once used to cost N models of RAM. The
// gate lets uploads whose declared bytes fit a budget read their payload; the others wait unread,
// and HTTP/2 flow control holds their clients back, until earlier uploads are submitted. It
// refuses nothing: a waiting upload costs its client time, not an error.
#ifndef FEDSCHED_SERVER_SERVICE_UPLOAD_GATE_H_
#define FEDSCHED_SERVER_SERVICE_UPLOAD_GATE_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fedsched {

// The budget fedsched-server gives its gate, bytes: max(models x model_bytes, 8 MiB -
// model_bytes), so that the uploads receiving at once and the one update being parsed and folded
// hold at most max((models + 1) x model_bytes, 8 MiB): 19 updates of 100k float parameters at
// once, one of 1M (a 4 MiB floor alone, or an 8 MiB one, gave 100 x 100k slower rounds or
// 50 x 1M a higher peak RSS: docs/reports/BENCHMARKS.md section 4, fifth pass), `models` of larger
// models. `models` (--receiving_upload_models) <= 0: 0, no gate.
int64_t ReceivingUploadBudget(double models, int64_t model_bytes);

// A byte budget shared by the uploads receiving their payload, with a FIFO of waiting uploads.
// An upload is always admitted when nothing else is admitted (one larger than the budget is not
// starved), and the oldest waiter is admitted past the budget once the admitted uploads have
// made no progress for `stall` (a slow or stalled client delays the others by at most that).
// Jobs (docs/guides/JOBS.md "Isolation"): each upload names its job, and while an upload of another
// job waits, one job's admitted uploads may hold at most `max_job_share` of the budget (a job
// holding nothing may always take one upload that fits): a waiter of a job at its share is
// passed over by the other jobs' waiters, so a job of large or many uploads cannot starve a
// small one. Alone, a job may hold the whole budget.
// Thread-safe; the resume callbacks run on the thread that admits them, outside the gate's lock.
class UploadGate {
 public:
  // `budget_bytes` <= 0: no gate (every upload admitted at once). `stall`: see above.
  // `max_job_share`: in (0, 1]; 1 (the default) = no share per job (one FIFO for all).
  UploadGate(int64_t budget_bytes, absl::Duration stall, double max_job_share = 1.0);
  UploadGate(const UploadGate&) = delete;
  UploadGate& operator=(const UploadGate&) = delete;

  // Admits `bytes` (true; the caller reads on and calls Release(bytes) once done with them), or
  // queues the upload (false): `resume` is called once it is admitted, after which the caller
  // owns `bytes` as above. `*ticket` identifies a queued upload for Cancel. `now` is progress.
  // `job`: the upload's job (DeviceService::JobOfTask; "" = the only one).
  bool Acquire(int64_t bytes, absl::Time now, uint64_t* ticket, absl::AnyInvocable<void()> resume,
               const std::string& job = "");
  // Takes a queued upload out of the queue: true when it was still waiting (it holds nothing and
  // `resume` will never run), false when it was admitted already (it holds its bytes).
  bool Cancel(uint64_t ticket);
  // Gives back `bytes` of an admitted upload of `job` (as acquired) and admits waiters that
  // now fit.
  void Release(int64_t bytes, absl::Time now, const std::string& job = "");
  // An admitted upload received data at `now`.
  void NoteProgress(absl::Time now);
  // Admits the oldest waiter past the budget when nothing admitted made progress since
  // `now - stall`. Call periodically (server/main.cc's ticker does, every 50 ms).
  void Poll(absl::Time now);

  // Bytes admitted right now and uploads waiting.
  int64_t admitted_bytes() const;
  int waiting() const;

 private:
  struct Waiter {
    uint64_t ticket;
    int64_t bytes;
    absl::AnyInvocable<void()> resume;
    std::string job;
  };
  // Moves the waiters that fit (or the oldest one, when `force`) out of the queue, admitted;
  // waiters of a job at its share are passed over (see the class comment).
  std::deque<Waiter> AdmitLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pass of AdmitLocked; `*passed_over`: a waiter was passed over for its job's share.
  void AdmitPassLocked(bool force, std::deque<Waiter>* admitted, bool* passed_over)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when `bytes` more of `job` would exceed its share while an upload of another job
  // waits (or `newcomer_job`, about to wait, is another job).
  bool OverShareLocked(const std::string& job, int64_t bytes,
                       const std::string* newcomer_job = nullptr) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdmitBytesLocked(int64_t bytes, const std::string& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t budget_;
  const absl::Duration stall_;
  const double max_job_share_;
  mutable absl::Mutex mu_;
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  int admitted_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Per job: bytes admitted, and uploads waiting (only jobs with some).
  absl::flat_hash_map<std::string, int64_t> admitted_by_job_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> waiting_by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_UPLOAD_GATE_H_
