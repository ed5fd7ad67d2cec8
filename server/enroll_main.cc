// fedsched-enroll: derives a device's enrolment secret from the server's enrolment key
// (security.enrolment_key_path), to install on the device as <state_dir>/credential (0600).
//
//   fedsched-enroll --key_file=enrolment.key --identity=device-3 [--out=STATE_DIR/credential]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/service/credentials.h"

ABSL_FLAG(std::string, key_file, "", "The server's enrolment key (mode 0600).");
ABSL_FLAG(std::string, identity, "", "The device identity to enrol.");
ABSL_FLAG(std::string, out, "", "Write the secret to this file (0600) instead of stdout.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Prints a device's enrolment secret: fedsched-enroll "
      "--key_file=KEY --identity=ID [--out=FILE]");
  absl::ParseCommandLine(argc, argv);
  const std::string identity = absl::GetFlag(FLAGS_identity);
  if (identity.empty()) {
    std::fprintf(stderr, "fedsched-enroll: --identity is required\n");
    return 2;
  }
  absl::StatusOr<std::string> key = fedsched::ReadSecretFile(absl::GetFlag(FLAGS_key_file), 16);
  if (!key.ok()) {
    std::fprintf(stderr, "fedsched-enroll: %s\n", key.status().ToString().c_str());
    return 2;
  }
  const std::string secret = fedsched::EnrolmentSecret(*key, identity) + "\n";
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(secret.c_str(), stdout);
    return 0;
  }
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size())) {
    std::fprintf(stderr, "fedsched-enroll: cannot write %s\n", out.c_str());
    return 1;
  }
  ::fchmod(fd, 0600);
  ::close(fd);
  return 0;
}
