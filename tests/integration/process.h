// A child process for tests that run the real binaries (fedsched-server, fedsched-client, ...)
// on 127.0.0.1: spawned with its output in a log file, waited for with a timeout.
#ifndef FEDSCHED_TESTS_INTEGRATION_PROCESS_H_
#define FEDSCHED_TESTS_INTEGRATION_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "tests/server/service/grpc_test_harness.h"

extern char** environ;

namespace fedsched::testing {

// The build directory holding server/ and client/ (FEDSCHED_BINARY_DIR, set by CTest).
inline std::string BinaryDir() {
  const char* dir = std::getenv("FEDSCHED_BINARY_DIR");
  return dir != nullptr ? dir : ".";
}

// A child process with stdout and stderr sent to `log_path`. Killed (SIGKILL) if still running
// when destroyed.
class Process {
 public:
  static std::unique_ptr<Process> Spawn(const std::vector<std::string>& argv,
                                        const std::string& log_path) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return nullptr;
    return std::unique_ptr<Process>(new Process(pid, log_path));
  }
  ~Process() {
    if (!exit_code_.has_value()) {
      ::kill(pid_, SIGKILL);
      Wait(absl::Seconds(10));
    }
  }
  pid_t pid() const { return pid_; }
  void Signal(int sig) { ::kill(pid_, sig); }
  // The exit code (128 + signal when killed), or nullopt if still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (!exit_code_.has_value()) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else if (absl::Now() > end) {
        break;
      } else {
        absl::SleepFor(absl::Milliseconds(10));
      }
    }
    return exit_code_;
  }
  std::string Log() const {
    absl::StatusOr<std::string> text = ReadFileToString(log_path_);
    return text.ok() ? *text : "";
  }
  // Waits until the log contains `needle`.
  bool WaitForLog(const std::string& needle, absl::Duration timeout = absl::Seconds(60)) {
    return TestServer::WaitFor([&] { return absl::StrContains(Log(), needle); }, timeout);
  }

 private:
  Process(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  const pid_t pid_;
  const std::string log_path_;
  std::optional<int> exit_code_;
};

// The address a fedsched-server printed ("listening on 127.0.0.1:PORT"), waiting for it; ""
// (and a test failure) if it never did.
inline std::string ListeningAddress(Process& server) {
  EXPECT_TRUE(server.WaitForLog("listening on 127.0.0.1:")) << server.Log();
  const std::string log = server.Log();
  const size_t at = log.find("listening on 127.0.0.1:");
  if (at == std::string::npos) return "";
  const size_t begin = at + std::string("listening on ").size();
  return log.substr(begin, log.find(' ', begin) - begin);
}

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_INTEGRATION_PROCESS_H_
