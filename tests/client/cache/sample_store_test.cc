#include "client/cache/sample_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/fedsched_cache_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Samples of varying sizes with every byte value, including an empty one.
std::vector<std::string> MakeSamples(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> samples(n);
  for (int i = 0; i < n; ++i) {
    const size_t size = (i == 3) ? 0 : 1 + rng() % 2000;
    for (size_t k = 0; k < size; ++k) samples[i].push_back(static_cast<char>(rng() & 0xff));
  }
  return samples;
}

void ExpectReadsBack(SampleStore& store, const std::vector<std::string>& samples) {
  ASSERT_EQ(store.NumSamples(), static_cast<int64_t>(samples.size()));
  std::string buf;
  int64_t total = 0;
  // Read in a scrambled order, twice, reusing one buffer.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < samples.size(); ++k) {
      const int64_t id = static_cast<int64_t>((k * 7 + pass) % samples.size());
      ASSERT_OK(store.Read(id, &buf));
      EXPECT_EQ(buf, samples[id]) << "id " << id;
      ASSERT_OK_AND_ASSIGN(int64_t size, store.SampleBytes(id));
      EXPECT_EQ(size, static_cast<int64_t>(samples[id].size()));
      total += size;
    }
  }
  EXPECT_EQ(store.counters().reads, 2 * static_cast<int64_t>(samples.size()));
  EXPECT_EQ(store.counters().bytes_read, total);
  EXPECT_GT(store.counters().io_seconds, 0.0);
  EXPECT_THAT(store.Read(-1, &buf), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("-1")));
  EXPECT_THAT(store.Read(store.NumSamples(), &buf), StatusIs(absl::StatusCode::kOutOfRange, _));
  EXPECT_THAT(store.SampleBytes(store.NumSamples()).status(),
              StatusIs(absl::StatusCode::kOutOfRange, _));
}

TEST(FileSampleStoreTest, ReadsBackExactlyWhatWasWritten) {
  TempDir dir;
  const std::vector<std::string> samples = MakeSamples(25, 1);
  const std::string store_dir = dir.path() + "/files/nested";
  ASSERT_OK(FileSampleStore::Build(store_dir, samples));
  ASSERT_OK_AND_ASSIGN(auto store, FileSampleStore::Open(store_dir, {}));
  ExpectReadsBack(*store, samples);
}

TEST(FileSampleStoreTest, MissingManifestOrSampleIsNotFound) {
  TempDir dir;
  EXPECT_THAT(FileSampleStore::Open(dir.path(), {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("MANIFEST")));
  ASSERT_OK(FileSampleStore::Build(dir.path(), MakeSamples(4, 2)));
  ASSERT_OK_AND_ASSIGN(auto store, FileSampleStore::Open(dir.path(), {}));
  ASSERT_EQ(::unlink((dir.path() + "/2.sample").c_str()), 0);
  std::string buf;
  EXPECT_THAT(store->Read(2, &buf), StatusIs(absl::StatusCode::kNotFound, HasSubstr("2.sample")));
  EXPECT_OK(store->Read(1, &buf));
  EXPECT_THAT(FileSampleStore::Open(dir.path(), {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("2.sample")));
}

TEST(FileSampleStoreTest, MalformedManifestIsDataLoss) {
  TempDir dir;
  ASSERT_OK(WriteFileAtomically(dir.path() + "/MANIFEST", "something else\n"));
  EXPECT_THAT(FileSampleStore::Open(dir.path(), {}).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("manifest")));
}

TEST(PackedSampleStoreTest, ReadsBackExactlyWhatWasWritten) {
  TempDir dir;
  const std::vector<std::string> samples = MakeSamples(40, 3);
  const std::string path = dir.path() + "/samples.pack";
  ASSERT_OK(PackedSampleStore::Build(path, samples));
  ASSERT_OK_AND_ASSIGN(auto store, PackedSampleStore::Open(path, {}));
  ExpectReadsBack(*store, samples);
}

TEST(PackedSampleStoreTest, EmptyStoreOpens) {
  TempDir dir;
  const std::string path = dir.path() + "/empty.pack";
  ASSERT_OK(PackedSampleStore::Build(path, {}));
  ASSERT_OK_AND_ASSIGN(auto store, PackedSampleStore::Open(path, {}));
  EXPECT_EQ(store->NumSamples(), 0);
}

TEST(PackedSampleStoreTest, CorruptFilesAreDataLoss) {
  TempDir dir;
  const std::string path = dir.path() + "/samples.pack";
  ASSERT_OK(PackedSampleStore::Build(path, MakeSamples(10, 4)));
  ASSERT_OK_AND_ASSIGN(std::string bytes, ReadFileToString(path));

  ASSERT_OK(WriteFileAtomically(path, bytes.substr(0, bytes.size() - 1)));
  EXPECT_THAT(PackedSampleStore::Open(path, {}).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("index says")));
  ASSERT_OK(WriteFileAtomically(path, bytes.substr(0, 40)));
  EXPECT_THAT(PackedSampleStore::Open(path, {}).status(), StatusIs(absl::StatusCode::kDataLoss, _));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  ASSERT_OK(WriteFileAtomically(path, bad_magic));
  EXPECT_THAT(PackedSampleStore::Open(path, {}).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("magic")));
  std::string bad_offset = bytes;
  bad_offset[16 + 8 * 3 + 6] = 0x7f;  // offsets[3] jumps past offsets[4]
  ASSERT_OK(WriteFileAtomically(path, bad_offset));
  EXPECT_THAT(PackedSampleStore::Open(path, {}).status(), StatusIs(absl::StatusCode::kDataLoss, _));
  EXPECT_THAT(PackedSampleStore::Open(dir.path() + "/nope.pack", {}).status(),
              StatusIs(absl::StatusCode::kNotFound, _));
}

TEST(SampleStoreTest, ConfiguredDelayIsMeasuredWithTheInjectedClock) {
  TempDir dir;
  // 2 KB and 0.5 KB samples at 100 us/KB: 200 us and 50 us per read on the manual clock.
  std::vector<std::string> samples = {std::string(2048, 'a'), std::string(512, 'b')};
  const std::string path = dir.path() + "/s.pack";
  ASSERT_OK(PackedSampleStore::Build(path, samples));
  ManualIoClock clock;
  SampleStoreOptions options;
  options.read_delay_us_per_kb = 100.0;
  options.clock = &clock;
  ASSERT_OK_AND_ASSIGN(auto store, PackedSampleStore::Open(path, options));
  std::string buf;
  ASSERT_OK(store->Read(0, &buf));
  ASSERT_OK(store->Read(1, &buf));
  ASSERT_OK(store->Read(0, &buf));
  EXPECT_DOUBLE_EQ(store->counters().io_seconds, 450e-6);
  EXPECT_EQ(clock.NowNanos(), 450000);
  EXPECT_EQ(store->counters().bytes_read, 2048 * 2 + 512);
}

TEST(SampleStoreTest, RealDelaySleepsAndBusyWaits) {
  for (bool busy : {false, true}) {
    SampleStoreOptions options;
    options.read_delay_us_per_kb = 1000.0;  // 1 ms per KB
    options.busy_wait_delay = busy;
    ASSERT_OK_AND_ASSIGN(auto store,
                         InMemorySampleStore::Create({std::string(2048, 'x')}, options));
    std::string buf;
    ASSERT_OK(store->Read(0, &buf));
    EXPECT_GE(store->counters().io_seconds, 2e-3) << "busy_wait=" << busy;
  }
}

TEST(SampleStoreTest, RejectsBadDelay) {
  SampleStoreOptions options;
  options.read_delay_us_per_kb = -1;
  EXPECT_THAT(InMemorySampleStore::Create({}, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("read_delay_us_per_kb")));
}

}  // namespace
}  // namespace fedsched
