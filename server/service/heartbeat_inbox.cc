#include "server/service/heartbeat_inbox.h"

#include <algorithm>

#include "server/service/credentials.h"

namespace fedsched {

void HeartbeatInbox::StartSession(const std::string& client_id, const std::string& token) {
  absl::MutexLock lock(&tokens_mu_);
  tokens_[client_id] = token;
}

void HeartbeatInbox::EndSession(const std::string& client_id) {
  absl::MutexLock lock(&tokens_mu_);
  tokens_.erase(client_id);
}

bool HeartbeatInbox::HasSession(const std::string& client_id, const std::string& token) const {
  absl::ReaderMutexLock lock(&tokens_mu_);
  auto it = tokens_.find(client_id);
  return it != tokens_.end() && !token.empty() && ConstantTimeEquals(it->second, token);
}

void HeartbeatInbox::NoteActivity(const std::string& client_id, absl::Time now) {
  absl::MutexLock lock(&activity_mu_);
  absl::Time& last = activity_[client_id];
  last = std::max(last, now);
}

absl::flat_hash_map<std::string, absl::Time> HeartbeatInbox::TakeActivity() {
  absl::flat_hash_map<std::string, absl::Time> activity;
  absl::MutexLock lock(&activity_mu_);
  activity.swap(activity_);
  return activity;
}

}  // namespace fedsched
