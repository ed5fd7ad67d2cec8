#include "models/samples.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(SampleEncodingTest, RoundTripsExactly) {
  const ImageDataset ds = testing::SyntheticDataset(20, 1);
  std::vector<float> pixels(784);
  for (int64_t i = 0; i < ds.size; ++i) {
    const std::string bytes = EncodeSample(ds, i);
    ASSERT_EQ(bytes.size(), 785u);
    EXPECT_EQ(static_cast<uint8_t>(bytes[0]), ds.labels[i]);
    int label = -1;
    ASSERT_OK(DecodeSample(bytes, 784, pixels.data(), &label));
    EXPECT_EQ(label, ds.labels[i]);
    for (int j = 0; j < 784; ++j) ASSERT_EQ(pixels[j], ds.pixels[i * 784 + j]) << i << "," << j;
  }
}

TEST(SampleEncodingTest, ExtremePixelsSurvive) {
  ImageDataset ds;
  ds.size = 1;
  ds.rows = 1;
  ds.cols = 3;
  ds.pixels = {0.0f, 1.0f, PixelToUnit(128)};
  ds.labels = {9};
  const std::string bytes = EncodeSample(ds, 0);
  EXPECT_EQ(bytes, std::string("\x09\x00\xff\x80", 4));
}

TEST(SampleEncodingTest, OutOfRangeIndexEncodesToEmpty) {
  const ImageDataset ds = testing::SyntheticDataset(3, 1);
  EXPECT_TRUE(EncodeSample(ds, -1).empty());
  EXPECT_TRUE(EncodeSample(ds, 3).empty());
}

TEST(SampleEncodingTest, DecodeRejectsWrongLengthAndLabel) {
  std::vector<float> pixels(784);
  int label = 0;
  EXPECT_THAT(DecodeSample(std::string(784, '\0'), 784, pixels.data(), &label),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("784 bytes"), HasSubstr("expected 785"))));
  EXPECT_THAT(DecodeSample(std::string(786, '\0'), 784, pixels.data(), &label),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("786 bytes")));
  EXPECT_THAT(DecodeSample("", 784, pixels.data(), &label),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 bytes")));
  EXPECT_THAT(DecodeSample("\x01", 0, pixels.data(), &label),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pixels")));
  std::string bad_label(785, '\0');
  bad_label[0] = 10;
  EXPECT_THAT(DecodeSample(bad_label, 784, pixels.data(), &label),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("label 10")));
}

TEST(InMemorySampleSourceTest, ReadsTheClientsPartition) {
  const ImageDataset ds = testing::SyntheticDataset(50, 2);
  ASSERT_OK_AND_ASSIGN(auto source, InMemorySampleSource::Create(ds, {4, 17, 49, 17}));
  EXPECT_EQ(source->NumSamples(), 4);
  const std::vector<int64_t> globals = {4, 17, 49, 17};
  for (int64_t local = 0; local < 4; ++local) {
    ASSERT_OK_AND_ASSIGN(std::string_view bytes, source->Read(local));
    EXPECT_EQ(bytes, EncodeSample(ds, globals[local]));
  }
  EXPECT_THAT(source->Read(-1), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("-1")));
  EXPECT_THAT(source->Read(4), StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("4")));
}

TEST(InMemorySampleSourceTest, RejectsIndicesOutsideTheDataset) {
  const ImageDataset ds = testing::SyntheticDataset(10, 3);
  EXPECT_THAT(InMemorySampleSource::Create(ds, {0, 10}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("global index 10")));
  EXPECT_THAT(InMemorySampleSource::Create(ds, {-2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("global index -2")));
  ASSERT_OK_AND_ASSIGN(auto empty, InMemorySampleSource::Create(ds, {}));
  EXPECT_EQ(empty->NumSamples(), 0);
}

}  // namespace
}  // namespace fedsched
