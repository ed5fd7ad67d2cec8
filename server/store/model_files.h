// Content-addressed model files: how the RocksDB store keeps global models out of its WAL and
// memtable (docs/DECISIONS.md "Model persistence: content-addressed files", docs/ARCHITECTURE.md
// "Persistence"). A model is one file <dir>/<hex SHA-256>.model holding the serialized v1::Model;
// the round's RocksDB write batch stores only a small reference (digest and size), so a commit
// is durable once the file is fsynced and the batch (with its reference) is synced.
#ifndef FEDSCHED_SERVER_STORE_MODEL_FILES_H_
#define FEDSCHED_SERVER_STORE_MODEL_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fedsched {

// What the `models` column family holds for a round whose model lives in a file.
struct ModelRef {
  std::string sha256;  // raw 32-byte SHA-256 of the file's contents
  int64_t size = 0;    // bytes
};

// The column-family value of `ref`: a 1-byte tag that no serialized v1::Model starts with
// (protobuf wire type 7 does not exist), a version byte, the digest and the size (8 bytes,
// big-endian). 42 bytes.
std::string EncodeModelRef(const ModelRef& ref);
// True, with the reference in `*ref`, when `value` is one; false (and `*ref` untouched) when it
// is not, e.g. a model stored inline by an older server.
bool DecodeModelRef(std::string_view value, ModelRef* ref);

// The model files of one store directory. Thread-safe (no state but the directory name); the
// store serialises writers (one commit at a time), readers may run concurrently.
class ModelFiles {
 public:
  // `dir`: the folder of the files (created by Init).
  explicit ModelFiles(std::string dir) : dir_(std::move(dir)) {}

  // Creates the folder if missing. Errors: INTERNAL naming the folder.
  [[nodiscard]] absl::Status Init() const;

  // Writes `bytes`, whose raw SHA-256 is `sha256`, durably: a temporary file in the folder,
  // fsync, rename to its digest's name, fsync of the folder. Replaces a file of the same name
  // (same contents). Errors: INVALID_ARGUMENT for a digest that is not 32 bytes; INTERNAL naming
  // the file and the failing system call.
  [[nodiscard]] absl::Status Write(std::string_view bytes, std::string_view sha256) const;

  // The contents of the file of `ref`, checked against its size and digest. Errors: NOT_FOUND
  // when the file does not exist; DATA_LOSS when its size or SHA-256 differs from the reference
  // (names the file and both values); INTERNAL when it cannot be read.
  [[nodiscard]] absl::StatusOr<std::string> Read(const ModelRef& ref) const;

  // Deletes every model file whose digest is not in `live` (raw digests) and every leftover
  // temporary file (a commit that crashed before its batch). Returns how many were deleted.
  // Errors: INTERNAL when the folder cannot be listed.
  [[nodiscard]] absl::StatusOr<int> RemoveUnreferenced(
      const absl::flat_hash_set<std::string>& live) const;

  // <dir>/<hex digest>.model
  std::string PathOf(std::string_view sha256) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_MODEL_FILES_H_
