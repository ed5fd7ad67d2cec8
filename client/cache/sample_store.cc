#include "client/cache/sample_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr char kManifestName[] = "MANIFEST";
constexpr char kManifestHeader[] = "fedsched-sample-store v1";
constexpr char kPackMagic[] = "FSPACK01";  // 8 bytes, no terminator written
constexpr int64_t kPackHeaderBytes = 16;

class SteadyClockImpl : public IoClock {
 public:
  int64_t NowNanos() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void Delay(int64_t nanos, bool busy_wait) override {
    if (nanos <= 0) return;
    if (!busy_wait) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(nanos));
      return;
    }
    const int64_t until = NowNanos() + nanos;
    while (NowNanos() < until) {
    }
  }
};

std::string ErrnoText() { return std::strerror(errno); }

void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Reads exactly `size` bytes at `offset`, retrying on EINTR and partial reads.
absl::Status PreadFully(int fd, char* dst, int64_t size, int64_t offset, const std::string& path) {
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, dst + done, static_cast<size_t>(size - done), offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(absl::StrCat("read ", path, ": ", ErrnoText()));
    }
    if (n == 0) {
      return absl::DataLossError(
          absl::StrCat("short read on ", path, ": got ", done, " of ", size, " bytes"));
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::Status WriteWholeFile(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", ErrnoText()));
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = ErrnoText();
      ::close(fd);
      return absl::InternalError(absl::StrCat("write ", path, ": ", err));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return absl::InternalError(absl::StrCat("close ", path, ": ", ErrnoText()));
  return absl::OkStatus();
}

std::string SamplePath(const std::string& dir, int64_t id) {
  return absl::StrCat(dir, "/", id, ".sample");
}

}  // namespace

IoClock& SteadyIoClock() {
  static SteadyClockImpl* clock = new SteadyClockImpl();
  return *clock;
}

absl::Status ValidateSampleStoreOptions(const SampleStoreOptions& options) {
  if (!std::isfinite(options.read_delay_us_per_kb) || options.read_delay_us_per_kb < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read_delay_us_per_kb must be finite and >= 0, got ", options.read_delay_us_per_kb));
  }
  return absl::OkStatus();
}

SampleStore::SampleStore(const SampleStoreOptions& options, std::vector<int64_t> sizes)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SteadyIoClock()),
      sizes_(std::move(sizes)) {
  for (int64_t s : sizes_) total_bytes_ += s;
}

absl::StatusOr<int64_t> SampleStore::SampleBytes(int64_t id) const {
  if (id < 0 || id >= NumSamples()) {
    return absl::OutOfRangeError(
        absl::StrCat("sample id ", id, " outside [0, ", NumSamples(), ")"));
  }
  return sizes_[id];
}

absl::Status SampleStore::Read(int64_t id, std::string* out) {
  if (id < 0 || id >= NumSamples()) {
    return absl::OutOfRangeError(
        absl::StrCat("sample id ", id, " outside [0, ", NumSamples(), ")"));
  }
  const int64_t size = sizes_[id];
  out->resize(static_cast<size_t>(size));
  const int64_t start = clock_->NowNanos();
  absl::Status status = ReadRaw(id, out->data(), size);
  if (status.ok() && options_.read_delay_us_per_kb > 0) {
    const double nanos = static_cast<double>(size) / 1024.0 * options_.read_delay_us_per_kb * 1e3;
    clock_->Delay(std::llround(nanos), options_.busy_wait_delay);
  }
  counters_.io_seconds += static_cast<double>(clock_->NowNanos() - start) * 1e-9;
  if (!status.ok()) return status;
  ++counters_.reads;
  counters_.bytes_read += size;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// FileSampleStore

FileSampleStore::FileSampleStore(const SampleStoreOptions& options, std::string dir,
                                 std::vector<int64_t> sizes)
    : SampleStore(options, std::move(sizes)), dir_(std::move(dir)) {}

absl::Status FileSampleStore::Build(const std::string& dir, absl::Span<const std::string> samples) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create directory ", dir, ": ", ec.message()));
  for (size_t id = 0; id < samples.size(); ++id) {
    FEDSCHED_RETURN_IF_ERROR(
        WriteWholeFile(SamplePath(dir, static_cast<int64_t>(id)), samples[id]));
  }
  // The manifest goes last, so a crash mid-build leaves no (or the previous) manifest.
  return WriteFileAtomically(absl::StrCat(dir, "/", kManifestName),
                             absl::StrCat(kManifestHeader, "\nnum_samples ", samples.size(), "\n"));
}

absl::StatusOr<std::unique_ptr<FileSampleStore>> FileSampleStore::Open(
    const std::string& dir, const SampleStoreOptions& options) {
  FEDSCHED_RETURN_IF_ERROR(ValidateSampleStoreOptions(options));
  const std::string manifest_path = absl::StrCat(dir, "/", kManifestName);
  FEDSCHED_ASSIGN_OR_RETURN(std::string manifest, ReadFileToString(manifest_path));
  std::vector<absl::string_view> lines = absl::StrSplit(manifest, '\n', absl::SkipEmpty());
  int64_t n = -1;
  if (lines.size() != 2 || lines[0] != kManifestHeader ||
      !absl::ConsumePrefix(&lines[1], "num_samples ") || !absl::SimpleAtoi(lines[1], &n) || n < 0) {
    return absl::DataLossError(absl::StrCat("malformed sample store manifest ", manifest_path));
  }
  std::vector<int64_t> sizes(static_cast<size_t>(n));
  for (int64_t id = 0; id < n; ++id) {
    const std::string path = SamplePath(dir, id);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("sample file ", path, ": ", ErrnoText()));
    }
    sizes[id] = static_cast<int64_t>(st.st_size);
  }
  return std::unique_ptr<FileSampleStore>(new FileSampleStore(options, dir, std::move(sizes)));
}

absl::Status FileSampleStore::ReadRaw(int64_t id, char* dst, int64_t size) {
  path_buf_.assign(dir_);
  absl::StrAppend(&path_buf_, "/", id, ".sample");
  const int fd = ::open(path_buf_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("sample file ", path_buf_, " is gone"));
    }
    return absl::DataLossError(absl::StrCat("open ", path_buf_, ": ", ErrnoText()));
  }
  absl::Status status = PreadFully(fd, dst, size, 0, path_buf_);
  ::close(fd);
  return status;
}

// ---------------------------------------------------------------------------------------------
// PackedSampleStore

PackedSampleStore::PackedSampleStore(const SampleStoreOptions& options, std::string path, int fd,
                                     int64_t data_start, std::vector<int64_t> offsets,
                                     std::vector<int64_t> sizes)
    : SampleStore(options, std::move(sizes)),
      path_(std::move(path)),
      fd_(fd),
      data_start_(data_start),
      offsets_(std::move(offsets)) {}

PackedSampleStore::~PackedSampleStore() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status PackedSampleStore::Build(const std::string& path,
                                      absl::Span<const std::string> samples) {
  int64_t data_bytes = 0;
  for (const std::string& s : samples) data_bytes += static_cast<int64_t>(s.size());
  std::string out;
  out.reserve(static_cast<size_t>(kPackHeaderBytes + 8 * (samples.size() + 1) + data_bytes));
  out.append(kPackMagic, 8);
  PutU64(samples.size(), &out);
  uint64_t offset = 0;
  PutU64(0, &out);
  for (const std::string& s : samples) {
    offset += s.size();
    PutU64(offset, &out);
  }
  for (const std::string& s : samples) out.append(s);
  return WriteFileAtomically(path, out);
}

absl::StatusOr<std::unique_ptr<PackedSampleStore>> PackedSampleStore::Open(
    const std::string& path, const SampleStoreOptions& options) {
  FEDSCHED_RETURN_IF_ERROR(ValidateSampleStoreOptions(options));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", path, ": ", ErrnoText()));
  // Closes fd on every error path below.
  auto fail = [fd](absl::Status s) {
    ::close(fd);
    return s;
  };
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return fail(absl::DataLossError(absl::StrCat("stat ", path, ": ", ErrnoText())));
  }
  const int64_t file_size = static_cast<int64_t>(st.st_size);
  if (file_size < kPackHeaderBytes + 8) {
    return fail(absl::DataLossError(absl::StrCat(path, " is too short for a packed store")));
  }
  char header[kPackHeaderBytes];
  absl::Status s = PreadFully(fd, header, kPackHeaderBytes, 0, path);
  if (!s.ok()) return fail(s);
  if (std::memcmp(header, kPackMagic, 8) != 0) {
    return fail(absl::DataLossError(absl::StrCat(path, " has a bad magic (not a packed store)")));
  }
  const uint64_t n = GetU64(header + 8);
  if (n > static_cast<uint64_t>((file_size - kPackHeaderBytes) / 8 - 1)) {
    return fail(absl::DataLossError(
        absl::StrCat(path, ": index of ", n, " samples does not fit in ", file_size, " bytes")));
  }
  const int64_t index_bytes = 8 * (static_cast<int64_t>(n) + 1);
  std::string index(static_cast<size_t>(index_bytes), '\0');
  s = PreadFully(fd, index.data(), index_bytes, kPackHeaderBytes, path);
  if (!s.ok()) return fail(s);
  const int64_t data_start = kPackHeaderBytes + index_bytes;
  std::vector<int64_t> offsets(n + 1);
  std::vector<int64_t> sizes(n);
  for (uint64_t i = 0; i <= n; ++i) {
    offsets[i] = static_cast<int64_t>(GetU64(index.data() + 8 * i));
    if ((i == 0 && offsets[i] != 0) || (i > 0 && offsets[i] < offsets[i - 1])) {
      return fail(absl::DataLossError(absl::StrCat(path, ": corrupt offset index at ", i)));
    }
    if (i > 0) sizes[i - 1] = offsets[i] - offsets[i - 1];
  }
  if (offsets[n] != file_size - data_start) {
    return fail(absl::DataLossError(absl::StrCat(path, ": data section is ", file_size - data_start,
                                                 " bytes, index says ", offsets[n])));
  }
  return std::unique_ptr<PackedSampleStore>(
      new PackedSampleStore(options, path, fd, data_start, std::move(offsets), std::move(sizes)));
}

absl::Status PackedSampleStore::ReadRaw(int64_t id, char* dst, int64_t size) {
  return PreadFully(fd_, dst, size, data_start_ + offsets_[id], path_);
}

// ---------------------------------------------------------------------------------------------
// InMemorySampleStore

InMemorySampleStore::InMemorySampleStore(const SampleStoreOptions& options,
                                         std::vector<std::string> samples,
                                         std::vector<int64_t> sizes)
    : SampleStore(options, std::move(sizes)), samples_(std::move(samples)) {}

absl::StatusOr<std::unique_ptr<InMemorySampleStore>> InMemorySampleStore::Create(
    std::vector<std::string> samples, const SampleStoreOptions& options) {
  FEDSCHED_RETURN_IF_ERROR(ValidateSampleStoreOptions(options));
  std::vector<int64_t> sizes;
  sizes.reserve(samples.size());
  for (const std::string& s : samples) sizes.push_back(static_cast<int64_t>(s.size()));
  return std::unique_ptr<InMemorySampleStore>(
      new InMemorySampleStore(options, std::move(samples), std::move(sizes)));
}

absl::Status InMemorySampleStore::ReadRaw(int64_t id, char* dst, int64_t size) {
  std::memcpy(dst, samples_[id].data(), static_cast<size_t>(size));
  return absl::OkStatus();
}

}  // namespace fedsched
