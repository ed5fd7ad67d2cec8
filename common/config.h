// Loading typed configs from protobuf text format.
#ifndef FEDSCHED_COMMON_CONFIG_H_
#define FEDSCHED_COMMON_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace fedsched {

// Parses protobuf text format `text` into `message` (cleared first).
// Errors: INVALID_ARGUMENT naming `source_name`, the line and column, and the offending key
// (unknown keys are errors, never silently dropped).
[[nodiscard]] absl::Status ParseTextConfig(const std::string& text, const std::string& source_name,
                                           google::protobuf::Message* message);

// Reads the file at `path` and parses it as above.
// Errors: NOT_FOUND if the file cannot be read; INVALID_ARGUMENT as ParseTextConfig.
[[nodiscard]] absl::Status LoadTextConfig(const std::string& path,
                                          google::protobuf::Message* message);

// Text format of `message`, for printing the effective config at start.
std::string ConfigToText(const google::protobuf::Message& message);

// Reads a whole file into a string. Errors: NOT_FOUND (cannot open), DATA_LOSS (read error).
[[nodiscard]] absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `data` to `path` atomically (temp file + fsync + rename).
// Errors: INTERNAL with the errno text.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, const std::string& data);

}  // namespace fedsched

#endif  // FEDSCHED_COMMON_CONFIG_H_
