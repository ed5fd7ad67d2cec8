// Command-line usage for fedsched's binaries (abseil flags).
#ifndef FEDSCHED_COMMON_FLAGS_USAGE_H_
#define FEDSCHED_COMMON_FLAGS_USAGE_H_

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace fedsched {

// Sets the usage message that --help prints, and makes --help and --helpshort list the binary's
// own flags. abseil's default lists only flags defined in a file named after the binary
// (fedsched-server.cc, ...), and fedsched's flags live in main.cc / *_main.cc files, so --help
// would print "No flags matched". Call once, before absl::ParseCommandLine.
inline void SetUsage(absl::string_view message) {
  absl::SetProgramUsageMessage(message);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_FLAGS_USAGE_H_
