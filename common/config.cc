#include "common/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace fedsched {
namespace {

// Collects parser errors so that the returned Status names line, column and key.
class CollectingErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    // The parser reports 0-based lines and columns.
    errors_.push_back(absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Joined() const { return absl::StrJoin(errors_, "; "); }

 private:
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status ParseTextConfig(const std::string& text, const std::string& source_name,
                             google::protobuf::Message* message) {
  message->Clear();
  CollectingErrors errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);
  if (!parser.ParseFromString(text, message)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config ", source_name, " (", message->GetTypeName(), "): ", errors.Joined()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error on ", path));
  return buffer.str();
}

absl::Status LoadTextConfig(const std::string& path, google::protobuf::Message* message) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseTextConfig(*text, path, message);
}

std::string ConfigToText(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(message, &out);
  return out;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", std::strerror(errno)));
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("write ", tmp, ": ", std::strerror(err)));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return absl::InternalError(absl::StrCat("fsync/close ", tmp, ": ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("rename ", tmp, " -> ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace fedsched
