// The folder fedsched-provision writes: built in a temporary sibling folder with exact file modes
// (whatever the umask), then renamed into place, so that a failed run leaves nothing half-made and
// an existing output is never overwritten by accident. Not thread-safe.
#ifndef FEDSCHED_SERVER_PROVISION_OUTPUT_TREE_H_
#define FEDSCHED_SERVER_PROVISION_OUTPUT_TREE_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched::provision {

// The first line of the README.txt at the top of every output; --force replaces only a folder
// that has it.
inline constexpr char kOutputMarker[] = "fedsched-provision output";

class OutputTree {
 public:
  // Checks `out_dir` (see Provision's errors: ALREADY_EXISTS, FAILED_PRECONDITION) and creates
  // the temporary folder "<out_dir>.tmp-<random>" (mode 0700) beside it.
  // Errors: also NOT_FOUND when the folder that should hold `out_dir` does not exist;
  // PERMISSION_DENIED / INTERNAL naming the folder that cannot be made.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<OutputTree>> Begin(const std::string& out_dir,
                                                                         bool force);
  OutputTree(const OutputTree&) = delete;
  OutputTree& operator=(const OutputTree&) = delete;
  // Removes the temporary folder unless Commit succeeded.
  ~OutputTree();

  // Creates the folder `relative` (and missing parents) with exactly `mode`.
  // Errors: INTERNAL naming the path.
  [[nodiscard]] absl::Status MakeDir(const std::string& relative, mode_t mode);

  // Writes a new file `relative` with exactly `mode` (never through a link; missing parent folders
  // are made 0700). Errors: INTERNAL naming the path and the system's error.
  [[nodiscard]] absl::Status WriteFile(const std::string& relative, const std::string& text,
                                       mode_t mode);

  // Moves the finished tree to `out_dir`, replacing a previous output when `force`.
  // Errors: INTERNAL naming the folders.
  [[nodiscard]] absl::Status Commit();

 private:
  OutputTree(std::string out_dir, std::string temp_dir, bool force)
      : out_dir_(std::move(out_dir)), temp_dir_(std::move(temp_dir)), force_(force) {}

  std::string out_dir_;
  std::string temp_dir_;
  bool force_;
  bool committed_ = false;
};

}  // namespace fedsched::provision

#endif  // FEDSCHED_SERVER_PROVISION_OUTPUT_TREE_H_
