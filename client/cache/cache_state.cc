#include "client/cache/cache_state.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/sha256.h"

namespace fedsched {

absl::Status SaveCacheState(const std::string& path, const v1::CacheState& state) {
  v1::CacheStateFile file;
  file.set_magic(kCacheStateMagic);
  if (!state.SerializeToString(file.mutable_state())) {
    return absl::InternalError("cannot serialize the cache state");
  }
  file.set_sha256(Sha256(file.state()));
  std::string bytes;
  if (!file.SerializeToString(&bytes)) return absl::InternalError("cannot serialize the envelope");
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<v1::CacheState> LoadCacheState(const std::string& path, int64_t num_samples) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("no cache state file at ", path));
  }
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    return absl::DataLossError(absl::StrCat("unreadable: ", bytes.status().message()));
  }
  auto corrupt = [&path](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("cache state ", path, ": ", why));
  };
  v1::CacheStateFile file;
  if (!file.ParseFromString(*bytes)) return corrupt("envelope does not parse");
  if (file.magic() != kCacheStateMagic) return corrupt("bad magic");
  if (file.sha256() != Sha256(file.state())) return corrupt("checksum mismatch");
  v1::CacheState state;
  if (!state.ParseFromString(file.state())) return corrupt("state does not parse");
  if (state.num_samples() != num_samples) {
    return corrupt(
        absl::StrCat("saved for ", state.num_samples(), " samples, store has ", num_samples));
  }
  const int n = state.id_deltas_size();
  if (state.importance_size() != n || state.frequency_size() != n) {
    return corrupt("per-sample arrays differ in length");
  }
  int64_t id = -1;
  for (int k = 0; k < n; ++k) {
    const int64_t delta = state.id_deltas(k);
    const bool ok =
        (k == 0) ? (delta >= 0 && delta < num_samples) : (delta >= 1 && delta < num_samples - id);
    if (!ok) {
      return corrupt(absl::StrCat("bad id delta at entry ", k));
    }
    id = (k == 0) ? delta : id + delta;
    const float imp = state.importance(k);
    if (!std::isfinite(imp) || imp < 0 || imp > kMaxStoredImportance) {
      return corrupt(absl::StrCat("bad importance at entry ", k));
    }
  }
  if (!std::isfinite(state.ls()) || state.ls() < 0 || !std::isfinite(state.last_loss()) ||
      state.last_loss() < 0 || state.rounds_with_loss() < 0 || state.batch_size() < 0) {
    return corrupt("bad ls / last_loss / rounds_with_loss / batch_size");
  }
  return state;
}

}  // namespace fedsched
