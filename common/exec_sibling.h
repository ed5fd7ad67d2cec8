// Running the LibTorch build of a program instead of itself. The binaries that can train with
// LibTorch (fedsched-client, fedsched-sim) are built twice when libtorch-dev is installed: the
// plain one, and "<name>-torch" linked with LibTorch beside it (client/CMakeLists.txt,
// sim/CMakeLists.txt). LibTorch costs about 270 more shared libraries and 0.3-2 s of start-up,
// which every client and every simulation that does not use it should not pay; the plain binary
// hands a LibTorch run over to its sibling with the same arguments.
#ifndef FEDSCHED_COMMON_EXEC_SIBLING_H_
#define FEDSCHED_COMMON_EXEC_SIBLING_H_

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

namespace fedsched {

// Replaces this process by the executable `sibling` in the directory of /proc/self/exe, with
// `argv` (null-terminated, as main received it). Returns only when there is no such file or
// execv fails (then it says why on stderr, prefixed `program`); the caller then reports the
// LibTorch trainer as unavailable.
inline void ExecSibling(const char* program, const std::string& sibling, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return;
  const std::filesystem::path path = self.parent_path() / sibling;
  if (!std::filesystem::exists(path, ec)) return;
  execv(path.c_str(), argv);
  std::fprintf(stderr, "%s: could not start %s: %s\n", program, path.c_str(), std::strerror(errno));
}

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_EXEC_SIBLING_H_
