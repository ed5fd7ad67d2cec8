// What heartbeats and transfer progress need without the coordinator's lock (docs/ARCHITECTURE.md
// "The coordinator"): a copy of each session's token, so that a heartbeat's session is checked
// without waiting behind a fold, a plan or a commit's bookkeeping, and each client's latest
// activity, which the coordinator folds into the engine's heartbeats when it holds its lock.
// Owned by the Coordinator.
#ifndef FEDSCHED_SERVER_SERVICE_HEARTBEAT_INBOX_H_
#define FEDSCHED_SERVER_SERVICE_HEARTBEAT_INBOX_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fedsched {

// Thread-safe: every method may be called concurrently; each takes only a small lock of its own
// (never held while calling out), so callers may hold the coordinator's lock or not.
class HeartbeatInbox {
 public:
  HeartbeatInbox() = default;
  HeartbeatInbox(const HeartbeatInbox&) = delete;
  HeartbeatInbox& operator=(const HeartbeatInbox&) = delete;

  // `client_id`'s session now has `token` (a registration).
  void StartSession(const std::string& client_id, const std::string& token)
      ABSL_LOCKS_EXCLUDED(tokens_mu_);
  // `client_id` has no session any more; no-op for an unknown id.
  void EndSession(const std::string& client_id) ABSL_LOCKS_EXCLUDED(tokens_mu_);
  // True iff `token` is non-empty and is `client_id`'s session token (compared in constant time).
  bool HasSession(const std::string& client_id, const std::string& token) const
      ABSL_LOCKS_EXCLUDED(tokens_mu_);
  // `client_id` was active at `now` (a heartbeat, a transfer chunk): the latest time is kept.
  void NoteActivity(const std::string& client_id, absl::Time now) ABSL_LOCKS_EXCLUDED(activity_mu_);
  // The latest activity per client noted since the last call.
  absl::flat_hash_map<std::string, absl::Time> TakeActivity() ABSL_LOCKS_EXCLUDED(activity_mu_);

 private:
  mutable absl::Mutex tokens_mu_;
  absl::flat_hash_map<std::string, std::string> tokens_ ABSL_GUARDED_BY(tokens_mu_);
  absl::Mutex activity_mu_;
  absl::flat_hash_map<std::string, absl::Time> activity_ ABSL_GUARDED_BY(activity_mu_);
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_SERVICE_HEARTBEAT_INBOX_H_
