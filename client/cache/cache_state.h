// The on-device file that keeps the cache's importance state across client restarts.
//
// Format: a serialized v1::CacheStateFile (proto/fedsched/v1/cache.proto) holding the serialized
// v1::CacheState, its SHA-256 and a magic string, written atomically (temp file + fsync +
// rename, common/config.h). A truncated or corrupt file fails the parse, the magic or the digest.
//
// Size bound: about 70 bytes of header plus, per sample that was ever read, at most 14 bytes
// (id delta varint <= 5 bytes for < 2^35 samples, float importance 4 bytes, frequency varint
// <= 5 bytes); typically 7-8 bytes (delta 1 byte, frequency 1-2 bytes). The number of entries
// is capped by SampleCacheOptions::max_state_entries (default 2^20, so <= ~14 MiB); a client
// with 3,000 samples writes at most ~42 KB, typically ~24 KB. Sample ids and losses in this file
// never leave the device.
#ifndef FEDSCHED_CLIENT_CACHE_CACHE_STATE_H_
#define FEDSCHED_CLIENT_CACHE_CACHE_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/cache.pb.h"

namespace fedsched {

// CacheStateFile::magic of the current format.
inline constexpr char kCacheStateMagic[] = "fedsched.cache_state.v1";

// Largest importance accepted on load: ln(j + 10) for any plausible rank j is far below it.
inline constexpr float kMaxStoredImportance = 64.0f;

// Serializes `state` into the envelope and writes it to `path` atomically.
// Errors: INTERNAL (with errno text) when the file cannot be written.
[[nodiscard]] absl::Status SaveCacheState(const std::string& path, const v1::CacheState& state);

// Reads and checks the state file at `path` for a store of `num_samples` samples.
// Checks: envelope parses, magic, SHA-256, inner parse, num_samples equal, parallel arrays of
// equal length, decoded ids strictly increasing within [0, num_samples), importances finite in
// [0, kMaxStoredImportance], ls and last_loss finite and >= 0, rounds_with_loss and batch_size
// >= 0.
// Errors: NOT_FOUND if there is no file at `path`; DATA_LOSS naming the failed check for an
// unreadable, truncated or corrupt file, or one saved for a different number of samples.
[[nodiscard]] absl::StatusOr<v1::CacheState> LoadCacheState(const std::string& path,
                                                            int64_t num_samples);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_CACHE_STATE_H_
