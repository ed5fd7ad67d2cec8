#include "client/sdk/memory_usage.h"

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace fedsched {
namespace {

constexpr absl::string_view kOutOfMemoryPrefix = "out of memory: ";

// "VmRSS:     1234 kB" -> 1234 * 1024.
int64_t KiloBytesField(absl::string_view line, absl::string_view name) {
  if (!absl::ConsumePrefix(&line, name)) return -1;
  line = absl::StripAsciiWhitespace(line);
  absl::ConsumeSuffix(&line, " kB");
  int64_t kb = 0;
  return absl::SimpleAtoi(line, &kb) ? kb * 1024 : -1;
}

}  // namespace

absl::Status OutOfMemoryStatus(int64_t peak_bytes, int64_t budget_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(kOutOfMemoryPrefix, "training needs ",
                                                   peak_bytes, " bytes, budget ", budget_bytes,
                                                   " bytes"));
}

bool IsOutOfMemory(const absl::Status& status) {
  return absl::IsResourceExhausted(status) &&
         absl::StartsWith(status.message(), kOutOfMemoryPrefix);
}

ResidentSet ReadResidentSet(bool reset_peak) {
  if (reset_peak) {
    std::ofstream clear("/proc/self/clear_refs");
    if (clear) clear << "5";
  }
  ResidentSet r;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (int64_t v = KiloBytesField(line, "VmRSS:"); v >= 0) r.current_bytes = v;
    if (int64_t v = KiloBytesField(line, "VmHWM:"); v >= 0) r.peak_bytes = v;
  }
  return r;
}

}  // namespace fedsched
