// The device's slow sample storage (flash, microSD) behind one interface, with measured I/O.
//
//   FEDSCHED_RETURN_IF_ERROR(PackedSampleStore::Build("/data/samples.pack", encoded_samples));
//   FEDSCHED_ASSIGN_OR_RETURN(auto store, PackedSampleStore::Open("/data/samples.pack", {}));
//   std::string buf;
//   FEDSCHED_RETURN_IF_ERROR(store->Read(17, &buf));   // one pread, timed
//
// Reads are real file reads (pread), timed with a steady clock, so what the cache reports as I/O
// seconds is measured, not modelled (FedCaSe's round-time model, docs/ALGORITHMS.md §1, derives
// io_s from hit and miss counts instead). An optional delay per KB read stands in for a microSD
// card in experiments (FedCaSe's figure, docs/ALGORITHMS.md §1: 1e-4 s/KB, i.e. 100 us/KB).
#ifndef FEDSCHED_CLIENT_CACHE_SAMPLE_STORE_H_
#define FEDSCHED_CLIENT_CACHE_SAMPLE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fedsched {

// Time source and delay for storage reads, injectable so that tests and the simulator get
// deterministic I/O seconds. Implementations must be usable from the one thread that owns the
// store.
class IoClock {
 public:
  virtual ~IoClock() = default;
  // Monotonic time in nanoseconds (arbitrary epoch).
  virtual int64_t NowNanos() = 0;
  // Blocks for `nanos` (> 0) nanoseconds: the emulated storage latency. `busy_wait` spins on the
  // clock instead of sleeping (precise for delays below the ~60 us sleep granularity, but burns
  // a core).
  virtual void Delay(int64_t nanos, bool busy_wait) = 0;
};

// The process-wide steady clock (std::chrono::steady_clock); thread-safe.
IoClock& SteadyIoClock();

// A manual clock for tests and virtual-time simulation: NowNanos() returns a value that only
// Advance() and Delay() move (Delay advances it by exactly `nanos`, so a store's measured I/O
// seconds equal its configured delay). Not thread-safe.
class ManualIoClock : public IoClock {
 public:
  explicit ManualIoClock(int64_t start_nanos = 0) : now_(start_nanos) {}
  int64_t NowNanos() override { return now_; }
  void Delay(int64_t nanos, bool busy_wait) override { now_ += nanos; }
  // Moves the clock forward by `nanos` (>= 0).
  void Advance(int64_t nanos) { now_ += nanos; }

 private:
  int64_t now_;
};

// Options shared by every store layout.
struct SampleStoreOptions {
  // Extra latency per KB (1 KB = 1024 bytes) of every read, in microseconds, standing in for a
  // microSD card (FedCaSe / docs/ALGORITHMS.md §1: 1e-4 s/KB = 100 us/KB). Must be finite and
  // >= 0. Default: 0 (no added delay).
  double read_delay_us_per_kb = 0.0;
  // Apply the delay by spinning on the clock rather than sleeping. Default: false (sleep).
  bool busy_wait_delay = false;
  // Clock for timing reads and applying the delay. Not owned; must outlive the store.
  // Default: nullptr = SteadyIoClock().
  IoClock* clock = nullptr;
};

// Cumulative I/O accounting of one store since it was opened.
struct StoreCounters {
  // Successful sample reads.
  int64_t reads = 0;
  // Sample bytes read (payload only; index and manifest reads at Open are not counted).
  int64_t bytes_read = 0;
  // Seconds spent inside Read (open + pread + close for per-sample files, pread for a packed
  // file, plus the configured delay), measured with the store's IoClock; failed reads count too.
  double io_seconds = 0.0;
};

// Read access to the encoded samples of one client, ids [0, NumSamples()), each an opaque byte
// string (models/: 1 label byte + 784 pixel bytes). Sizes are known without I/O; every
// Read is a real storage read. Not thread-safe: one owner thread (the SDK's training thread).
// Not copyable.
class SampleStore {
 public:
  virtual ~SampleStore() = default;
  SampleStore(const SampleStore&) = delete;
  SampleStore& operator=(const SampleStore&) = delete;

  // Number of samples; valid ids are [0, NumSamples()).
  int64_t NumSamples() const { return static_cast<int64_t>(sizes_.size()); }

  // Size in bytes of sample `id`, from the index (no I/O).
  // Errors: OUT_OF_RANGE for an id outside [0, NumSamples()).
  [[nodiscard]] absl::StatusOr<int64_t> SampleBytes(int64_t id) const;

  // Total bytes of all samples.
  int64_t TotalBytes() const { return total_bytes_; }

  // Reads sample `id` into `*out` (resized to the sample's size; its capacity is reused, so a
  // buffer that already holds a sample of this size is not reallocated). Times the read and adds
  // the configured delay; updates counters().
  // Errors: OUT_OF_RANGE for a bad id; NOT_FOUND if the sample's file is gone; DATA_LOSS on a
  // short read or an I/O error (the message names the file and errno text).
  [[nodiscard]] absl::Status Read(int64_t id, std::string* out);

  // Cumulative counters since Open.
  const StoreCounters& counters() const { return counters_; }

 protected:
  // `sizes[id]` = bytes of sample id (each >= 0).
  SampleStore(const SampleStoreOptions& options, std::vector<int64_t> sizes);

  // Layout-specific read of exactly `size` bytes of sample `id` (id valid) into `dst`.
  [[nodiscard]] virtual absl::Status ReadRaw(int64_t id, char* dst, int64_t size) = 0;

 private:
  SampleStoreOptions options_;
  IoClock* clock_;
  std::vector<int64_t> sizes_;
  int64_t total_bytes_ = 0;
  StoreCounters counters_;
};

// Validates `options` (shared by the factories below).
// Errors: INVALID_ARGUMENT if read_delay_us_per_kb is negative or not finite.
[[nodiscard]] absl::Status ValidateSampleStoreOptions(const SampleStoreOptions& options);

// One file per sample in a directory: `<dir>/<id>.sample`, plus `<dir>/MANIFEST` (text, written
// last and atomically, so a directory without it is not a store). Each Read opens, preads and
// closes the sample's file, as a data loader over an image folder does. Sample files are not
// fsynced one by one (only the MANIFEST is).
class FileSampleStore : public SampleStore {
 public:
  // Writes `samples[id]` to `<dir>/<id>.sample` for every id, then the MANIFEST. Creates `dir`
  // (and parents) if missing; replaces a previous store in `dir` (files of ids beyond the new
  // count are left in place but not part of the store).
  // Errors: INTERNAL with the path and errno text when a directory or file cannot be written.
  [[nodiscard]] static absl::Status Build(const std::string& dir,
                                          absl::Span<const std::string> samples);

  // Opens the store in `dir`: reads the MANIFEST and stats every sample file for its size
  // (N stats; no sample bytes are read).
  // Errors: INVALID_ARGUMENT for bad options; NOT_FOUND if the MANIFEST or a sample file is
  // missing; DATA_LOSS if the MANIFEST is malformed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FileSampleStore>> Open(
      const std::string& dir, const SampleStoreOptions& options);

  // The store's directory, as given to Open.
  const std::string& dir() const { return dir_; }

 private:
  FileSampleStore(const SampleStoreOptions& options, std::string dir, std::vector<int64_t> sizes);
  [[nodiscard]] absl::Status ReadRaw(int64_t id, char* dst, int64_t size) override;

  std::string dir_;
  std::string path_buf_;  // reused to build sample paths without a per-read allocation
};

// All samples in one packed file with an offset index:
//   bytes 0..7     magic "FSPACK01"
//   bytes 8..15    N, uint64 little-endian
//   next 8(N+1)    offsets, uint64 little-endian, relative to the data section, offsets[0] = 0,
//                  non-decreasing; sample id = data[offsets[id], offsets[id+1])
//   data section   the samples back to back
// The index is read once at Open (8 bytes per sample in RAM); each Read is one pread on a file
// descriptor kept open.
class PackedSampleStore : public SampleStore {
 public:
  // Closes the file descriptor.
  ~PackedSampleStore() override;

  // Writes the packed file at `path` atomically (temp file + fsync + rename).
  // Errors: INTERNAL with the errno text.
  [[nodiscard]] static absl::Status Build(const std::string& path,
                                          absl::Span<const std::string> samples);

  // Opens `path` and reads its header and index.
  // Errors: INVALID_ARGUMENT for bad options; NOT_FOUND if the file cannot be opened; DATA_LOSS
  // for a bad magic, a truncated index, decreasing offsets or a data section whose size does not
  // match the index.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PackedSampleStore>> Open(
      const std::string& path, const SampleStoreOptions& options);

 private:
  PackedSampleStore(const SampleStoreOptions& options, std::string path, int fd, int64_t data_start,
                    std::vector<int64_t> offsets, std::vector<int64_t> sizes);
  [[nodiscard]] absl::Status ReadRaw(int64_t id, char* dst, int64_t size) override;

  std::string path_;
  int fd_;
  int64_t data_start_;
  std::vector<int64_t> offsets_;
};

// Samples held in memory behind the store interface: the fake for tests.
// A Read copies the bytes, applies the configured delay and counts like a real store, but does
// no file I/O.
class InMemorySampleStore : public SampleStore {
 public:
  // A store of `samples` (sample id = index), each kept in RAM.
  // Errors: INVALID_ARGUMENT for bad options.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<InMemorySampleStore>> Create(
      std::vector<std::string> samples, const SampleStoreOptions& options);

 private:
  InMemorySampleStore(const SampleStoreOptions& options, std::vector<std::string> samples,
                      std::vector<int64_t> sizes);
  [[nodiscard]] absl::Status ReadRaw(int64_t id, char* dst, int64_t size) override;

  std::vector<std::string> samples_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_CACHE_SAMPLE_STORE_H_
