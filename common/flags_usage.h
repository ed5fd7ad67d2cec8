// Command-line usage for fedsched's binaries (abseil flags).
#ifndef FEDSCHED_COMMON_FLAGS_USAGE_H_
#define FEDSCHED_COMMON_FLAGS_USAGE_H_

#include <errno.h>  // program_invocation_short_name (glibc)

#include <string>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/build_info.h"

namespace fedsched {

// What --version prints: "<binary name> <project version>" (e.g. "fedsched-server 0.5.0"), then
// CMake's build type and whether assertions are compiled in, one line each.
inline std::string VersionText() {
#ifdef NDEBUG
  constexpr absl::string_view kAssertions = "assertions off";
#else
  constexpr absl::string_view kAssertions = "assertions on";
#endif
  const absl::string_view build_type = kBuildType[0] != '\0' ? kBuildType : "no CMake build type";
  return absl::StrCat(program_invocation_short_name, " ", kProjectVersion, "\n", build_type,
                      " build (", kAssertions, ")\n");
}

// Sets the usage message that --help prints, makes --help and --helpshort list the binary's
// own flags, and makes --version print VersionText(). abseil's default lists only flags defined
// in a file named after the binary (fedsched-server.cc, ...), and fedsched's flags live in
// main.cc / *_main.cc files, so --help would print "No flags matched"; its default --version
// names no version and reports how abseil itself was built. Call once, before
// absl::ParseCommandLine.
inline void SetUsage(absl::string_view message) {
  absl::SetProgramUsageMessage(message);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  config.version_string = VersionText;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_FLAGS_USAGE_H_
