// Resource fit on the device (docs/guides/RESOURCE_FIT.md): the out-of-memory verdict the SDK
// reports and the resident-set measurement used when a trainer does not account its own peak.
#ifndef FEDSCHED_CLIENT_SDK_MEMORY_USAGE_H_
#define FEDSCHED_CLIENT_SDK_MEMORY_USAGE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace fedsched {

inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// A task whose peak memory exceeds the device's budget: RESOURCE_EXHAUSTED, its message
// "out of memory: training needs <peak> bytes, budget <budget> bytes" (also the failure
// report's reason; the report's cause is FAILURE_CAUSE_OUT_OF_MEMORY).
[[nodiscard]] absl::Status OutOfMemoryStatus(int64_t peak_bytes, int64_t budget_bytes);
// True for a status made by OutOfMemoryStatus.
bool IsOutOfMemory(const absl::Status& status);

// The process's resident set (Linux /proc/self/status), bytes; 0 where unknown.
struct ResidentSet {
  int64_t current_bytes = 0;  // VmRSS
  int64_t peak_bytes = 0;     // VmHWM: the high-water mark since the last reset (or start)
};
// Reads /proc/self/status. With `reset_peak`, first resets the high-water mark to the current
// resident set (writes "5" to /proc/self/clear_refs; best effort), so that a later peak_bytes
// is the peak since now. Never fails: unknown values are 0.
ResidentSet ReadResidentSet(bool reset_peak);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_MEMORY_USAGE_H_
