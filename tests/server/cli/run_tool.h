// Runs one of the built command-line tools (fedsched-audit, fedsched-enroll, fedsched-status)
// as a child process, for tests of what it prints and its exit code.
#ifndef FEDSCHED_TESTS_SERVER_CLI_RUN_TOOL_H_
#define FEDSCHED_TESTS_SERVER_CLI_RUN_TOOL_H_

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fedsched::testing {

// What a tool printed (stdout and stderr together) and its exit code (-1 when it did not run
// or did not exit).
struct ToolOutcome {
  int exit_code = -1;
  std::string output;
};

// Runs `<build dir>/server/<tool> <args>` (the build dir from FEDSCHED_BINARY_DIR, set by CTest;
// "." otherwise) through the shell and waits for it.
inline ToolOutcome RunTool(const std::string& tool, const std::string& args) {
  const char* dir = std::getenv("FEDSCHED_BINARY_DIR");
  const std::string command =
      std::string(dir != nullptr ? dir : ".") + "/server/" + tool + " " + args + " 2>&1";
  ToolOutcome outcome;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) outcome.output += buffer;
  const int status = ::pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_CLI_RUN_TOOL_H_
