#include "models/idx.h"

#include <zlib.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/models/test_data.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

void AppendBigEndian32(Bytes* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

Bytes ImagesFile(uint32_t n, uint32_t rows, uint32_t cols, const Bytes& pixels,
                 uint32_t magic = 0x803) {
  Bytes out;
  AppendBigEndian32(&out, magic);
  AppendBigEndian32(&out, n);
  AppendBigEndian32(&out, rows);
  AppendBigEndian32(&out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes LabelsFile(uint32_t n, const Bytes& labels, uint32_t magic = 0x801) {
  Bytes out;
  AppendBigEndian32(&out, magic);
  AppendBigEndian32(&out, n);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

class IdxTest : public ::testing::Test {
 protected:
  // Writes `bytes` to a fresh file in the test's temp dir, gzip-compressed if `gzip`.
  std::string Write(const std::string& name, const Bytes& bytes, bool gzip = false) {
    const std::string path = ::testing::TempDir() + "/fedsched_idx_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                             name;
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(gzwrite(f, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    written_.push_back(path);
    return path;
  }

  void TearDown() override {
    for (const std::string& path : written_) std::remove(path.c_str());
  }

  // Three 2x3 images and their labels.
  const Bytes pixels_ = {0,  255, 51, 102, 153, 204,  //
                         1,  2,   3,  4,   5,   6,    //
                         10, 20,  30, 40,  50,  60};
  const Bytes labels_ = {7, 0, 9};
  std::vector<std::string> written_;
};

void ExpectSmallDataset(const ImageDataset& ds) {
  EXPECT_EQ(ds.size, 3);
  EXPECT_EQ(ds.rows, 2);
  EXPECT_EQ(ds.cols, 3);
  EXPECT_EQ(ds.pixels_per_image(), 6);
  ASSERT_EQ(ds.pixels.size(), 18u);
  EXPECT_THAT(ds.labels, ElementsAre(7, 0, 9));
  EXPECT_FLOAT_EQ(ds.pixels[0], 0.0f);
  EXPECT_FLOAT_EQ(ds.pixels[1], 1.0f);
  EXPECT_FLOAT_EQ(ds.pixels[2], 0.2f);
  EXPECT_FLOAT_EQ(ds.pixels[5], 0.8f);
  EXPECT_FLOAT_EQ(ds.pixels[17], 60.0f / 255.0f);
}

TEST_F(IdxTest, ReadsPlainFiles) {
  ASSERT_OK_AND_ASSIGN(ImageDataset ds, LoadIdxDataset(Write("img", ImagesFile(3, 2, 3, pixels_)),
                                                       Write("lbl", LabelsFile(3, labels_))));
  ExpectSmallDataset(ds);
}

TEST_F(IdxTest, ReadsGzippedFiles) {
  ASSERT_OK_AND_ASSIGN(ImageDataset ds,
                       LoadIdxDataset(Write("img.gz", ImagesFile(3, 2, 3, pixels_), true),
                                      Write("lbl.gz", LabelsFile(3, labels_), true)));
  ExpectSmallDataset(ds);
}

TEST_F(IdxTest, MaxSamplesKeepsAPrefix) {
  const std::string images = Write("img", ImagesFile(3, 2, 3, pixels_));
  const std::string labels = Write("lbl", LabelsFile(3, labels_));
  ASSERT_OK_AND_ASSIGN(ImageDataset ds, LoadIdxDataset(images, labels, 2));
  EXPECT_EQ(ds.size, 2);
  EXPECT_EQ(ds.pixels.size(), 12u);
  EXPECT_THAT(ds.labels, ElementsAre(7, 0));
  // A limit above the file's count keeps everything.
  ASSERT_OK_AND_ASSIGN(ImageDataset all, LoadIdxDataset(images, labels, 1000));
  EXPECT_EQ(all.size, 3);
}

TEST_F(IdxTest, EmptyFilesGiveAnEmptyDataset) {
  ASSERT_OK_AND_ASSIGN(ImageDataset ds, LoadIdxDataset(Write("img", ImagesFile(0, 28, 28, {})),
                                                       Write("lbl", LabelsFile(0, {}))));
  EXPECT_EQ(ds.size, 0);
  EXPECT_TRUE(ds.pixels.empty());
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  const std::string labels = Write("lbl", LabelsFile(3, labels_));
  const std::string missing = ::testing::TempDir() + "/fedsched_idx_test_does_not_exist";
  EXPECT_THAT(LoadIdxDataset(missing, labels),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(missing)));
  const std::string images = Write("img", ImagesFile(3, 2, 3, pixels_));
  EXPECT_THAT(LoadIdxDataset(images, missing),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(missing)));
}

TEST_F(IdxTest, BadMagicNamesTheFile) {
  const std::string images = Write("img", ImagesFile(3, 2, 3, pixels_));
  const std::string labels = Write("lbl", LabelsFile(3, labels_));
  // Files passed the wrong way round.
  EXPECT_THAT(LoadIdxDataset(labels, images),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(labels), HasSubstr("magic"), HasSubstr("0x00000801"))));
  const std::string bad_labels = Write("bad_lbl", LabelsFile(3, labels_, 0x802));
  EXPECT_THAT(LoadIdxDataset(images, bad_labels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(bad_labels), HasSubstr("magic"))));
  const std::string bad_images = Write("bad_img", ImagesFile(3, 2, 3, pixels_, 0x08030000));
  EXPECT_THAT(LoadIdxDataset(bad_images, labels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(bad_images), HasSubstr("magic"))));
}

TEST_F(IdxTest, TruncatedPixelsAreDataLoss) {
  Bytes short_pixels(pixels_.begin(), pixels_.end() - 1);
  const std::string labels = Write("lbl", LabelsFile(3, labels_));
  for (bool gzip : {false, true}) {
    const std::string images =
        Write(gzip ? "img.gz" : "img", ImagesFile(3, 2, 3, short_pixels), gzip);
    EXPECT_THAT(LoadIdxDataset(images, labels),
                StatusIs(absl::StatusCode::kDataLoss,
                         AllOf(HasSubstr(images), HasSubstr("truncated"), HasSubstr("pixel"))))
        << "gzip=" << gzip;
  }
}

TEST_F(IdxTest, TruncatedHeaderAndLabelsAreDataLoss) {
  const std::string images = Write("img", ImagesFile(3, 2, 3, pixels_));
  Bytes header = ImagesFile(3, 2, 3, {});
  header.resize(10);
  const std::string short_header = Write("short_header", header);
  EXPECT_THAT(LoadIdxDataset(short_header, Write("lbl", LabelsFile(3, labels_))),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(short_header), HasSubstr("truncated"))));
  const std::string short_labels = Write("short_lbl", LabelsFile(3, {7, 0}));
  EXPECT_THAT(LoadIdxDataset(images, short_labels),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(short_labels), HasSubstr("truncated"))));
}

TEST_F(IdxTest, CorruptGzipStreamIsDataLoss) {
  const std::string good = Write("good.gz", ImagesFile(3, 2, 3, pixels_), true);
  std::ifstream in(good, std::ios::binary);
  Bytes gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 20u);
  gz.resize(gz.size() - 12);  // cut into the deflate stream and its trailer
  const std::string cut = Write("cut.gz", gz);
  EXPECT_THAT(LoadIdxDataset(cut, Write("lbl", LabelsFile(3, labels_))),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(cut)));
}

TEST_F(IdxTest, CountMismatchNamesBothFiles) {
  const std::string images = Write("img", ImagesFile(3, 2, 3, pixels_));
  const std::string labels = Write("lbl", LabelsFile(2, {7, 0}));
  EXPECT_THAT(LoadIdxDataset(images, labels),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(images), HasSubstr(labels), HasSubstr("3 images"),
                             HasSubstr("2 labels"))));
}

TEST_F(IdxTest, LabelAboveNineIsDataLoss) {
  const std::string labels = Write("lbl", LabelsFile(3, {7, 10, 9}));
  EXPECT_THAT(LoadIdxDataset(Write("img", ImagesFile(3, 2, 3, pixels_)), labels),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(labels), HasSubstr("label 10"), HasSubstr("sample 1"))));
}

TEST_F(IdxTest, ZeroSizedImagesAreInvalid) {
  const std::string images = Write("img", ImagesFile(3, 0, 3, {}));
  EXPECT_THAT(LoadIdxDataset(images, Write("lbl", LabelsFile(3, labels_))),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(images)));
}

TEST(IdxRealDataTest, FashionMnist) {
  if (!testing::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  ASSERT_OK_AND_ASSIGN(ImageDataset train,
                       LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels));
  ASSERT_OK_AND_ASSIGN(ImageDataset test,
                       LoadIdxDataset(kFashionMnistTestImages, kFashionMnistTestLabels));
  EXPECT_EQ(train.size, 60000);
  EXPECT_EQ(test.size, 10000);
  for (const ImageDataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->rows, 28);
    EXPECT_EQ(ds->cols, 28);
    ASSERT_EQ(ds->pixels.size(), static_cast<size_t>(ds->size) * 784);
    ASSERT_EQ(ds->labels.size(), static_cast<size_t>(ds->size));
    std::array<int64_t, kNumClasses> per_label{};
    for (uint8_t label : ds->labels) {
      ASSERT_LT(label, kNumClasses);
      ++per_label[label];
    }
    // Fashion-MNIST is balanced: 6,000 / 1,000 images per class.
    for (int64_t count : per_label) EXPECT_EQ(count, ds->size / kNumClasses);
    float lo = 1, hi = 0;
    for (float p : ds->pixels) {
      lo = std::min(lo, p);
      hi = std::max(hi, p);
    }
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
  }
}

}  // namespace
}  // namespace fedsched
