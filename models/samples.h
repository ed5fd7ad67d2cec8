// The on-device encoding of one image sample, and a SampleSource over an in-memory partition.
//
// Encoding (what client/cache stores and SampleSource::Read returns):
//   byte 0          label, in [0, kNumClasses)
//   bytes 1..P      the P = rows * cols pixels as unsigned bytes, row-major
// so a 28 x 28 sample is 785 bytes.
#ifndef FEDSCHED_CLIENT_MODELS_SAMPLES_H_
#define FEDSCHED_CLIENT_MODELS_SAMPLES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/idx.h"
#include "models/trainer.h"

namespace fedsched {

// Encodes sample `index` of `dataset` as above (pixels quantised back to bytes: round(x * 255),
// exact for data loaded by LoadIdxDataset). Returns 1 + rows * cols bytes, or an empty string if
// `index` is outside [0, dataset.size) (which DecodeSample then rejects).
std::string EncodeSample(const ImageDataset& dataset, int64_t index);

// Decodes an encoded sample into `out_pixels` ([pixels] floats in [0, 1], see PixelToUnit) and
// `out_label`. `pixels` is the expected number of pixels (784 for Fashion-MNIST).
// Errors: INVALID_ARGUMENT if bytes.size() != 1 + pixels (the message gives both sizes) or
// pixels <= 0; DATA_LOSS if the label byte is >= kNumClasses.
absl::Status DecodeSample(std::string_view bytes, int pixels, float* out_pixels, int* out_label);

// A client's partition of an in-memory data set, served as encoded samples: local id i is
// global sample `global_indices[i]`. Used by the simulator and by tests in place of a cache over
// device storage. References `dataset`, which must outlive it. Not thread-safe (Read reuses one
// buffer). Not copyable.
class InMemorySampleSource : public SampleSource {
 public:
  // Errors: INVALID_ARGUMENT naming the first index outside [0, dataset.size).
  static absl::StatusOr<std::unique_ptr<InMemorySampleSource>> Create(
      const ImageDataset& dataset, std::vector<int64_t> global_indices);

  InMemorySampleSource(const InMemorySampleSource&) = delete;
  InMemorySampleSource& operator=(const InMemorySampleSource&) = delete;

  // global_indices.size().
  int64_t NumSamples() const override;
  // The encoded sample; the view is valid until the next Read. Errors: OUT_OF_RANGE for an id
  // outside [0, NumSamples()).
  absl::StatusOr<std::string_view> Read(int64_t local_id) override;

  // The global index behind each local id.
  const std::vector<int64_t>& global_indices() const { return global_indices_; }

 private:
  InMemorySampleSource(const ImageDataset& dataset, std::vector<int64_t> global_indices);

  const ImageDataset& dataset_;
  std::vector<int64_t> global_indices_;
  std::string buffer_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_MODELS_SAMPLES_H_
