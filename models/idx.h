// Image data sets in the IDX format of MNIST / Fashion-MNIST (LeCun et al.), plain or gzipped.
//
//   FEDSCHED_ASSIGN_OR_RETURN(ImageDataset train,
//                             LoadIdxDataset(kFashionMnistTrainImages, kFashionMnistTrainLabels));
#ifndef FEDSCHED_CLIENT_MODELS_IDX_H_
#define FEDSCHED_CLIENT_MODELS_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fedsched {

// Default locations of Fashion-MNIST (Debian package dataset-fashion-mnist).
inline constexpr char kFashionMnistTrainImages[] =
    "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
inline constexpr char kFashionMnistTrainLabels[] =
    "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
inline constexpr char kFashionMnistTestImages[] =
    "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
inline constexpr char kFashionMnistTestLabels[] =
    "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

// Number of classes the IDX reader accepts (labels 0..9) and the reference models predict.
inline constexpr int kNumClasses = 10;

// A labelled set of grey-scale images held in memory.
// Invariants (established by LoadIdxDataset): pixels.size() == size * rows * cols,
// labels.size() == size, every label < kNumClasses.
struct ImageDataset {
  // Number of images.
  int64_t size = 0;
  // Image height and width in pixels (28 x 28 for Fashion-MNIST).
  int rows = 0;
  int cols = 0;
  // Row-major [size, rows * cols] intensities scaled to [0, 1] (byte / 255, see PixelToUnit).
  std::vector<float> pixels;
  // [size] class labels in [0, kNumClasses).
  std::vector<uint8_t> labels;

  // Pixels per image (rows * cols).
  int pixels_per_image() const { return rows * cols; }
};

// The one place a stored byte becomes an intensity, so that IDX loading and sample decoding
// produce bit-identical floats.
inline float PixelToUnit(uint8_t byte) { return static_cast<float>(byte) / 255.0f; }

// Reads an IDX image file (magic 0x00000803: unsigned bytes, 3 dimensions [n, rows, cols]) and an
// IDX label file (magic 0x00000801: unsigned bytes, 1 dimension [n]); header integers are
// big-endian. Either file may be gzip-compressed or plain (zlib detects which).
// `max_samples` > 0 keeps only the first `max_samples` images and labels (the rest of the files
// is not read); 0 (or negative) keeps all.
// Errors, each message naming the file:
//   NOT_FOUND        a file cannot be opened;
//   INVALID_ARGUMENT bad magic number (not an IDX ubyte file of the expected rank), zero or
//                    implausibly large image dimensions (> 16384), or image and label counts
//                    differ;
//   DATA_LOSS        truncated file / corrupt gzip stream, or a label > 9.
absl::StatusOr<ImageDataset> LoadIdxDataset(const std::string& images_path,
                                            const std::string& labels_path,
                                            int64_t max_samples = 0);

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_MODELS_IDX_H_
