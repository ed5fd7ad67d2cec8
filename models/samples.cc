#include "models/samples.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace fedsched {
namespace {

void EncodeInto(const ImageDataset& dataset, int64_t index, std::string* out) {
  const size_t p = static_cast<size_t>(dataset.pixels_per_image());
  out->resize(1 + p);
  (*out)[0] = static_cast<char>(dataset.labels[index]);
  const float* src = dataset.pixels.data() + static_cast<size_t>(index) * p;
  for (size_t i = 0; i < p; ++i) {
    // Round half up; v + 0.5 truncated vectorises where lround does not.
    const float v = std::clamp(src[i], 0.0f, 1.0f) * 255.0f + 0.5f;
    (*out)[1 + i] = static_cast<char>(static_cast<uint8_t>(v));
  }
}

}  // namespace

std::string EncodeSample(const ImageDataset& dataset, int64_t index) {
  std::string out;
  if (index < 0 || index >= dataset.size) return out;
  EncodeInto(dataset, index, &out);
  return out;
}

absl::Status DecodeSample(std::string_view bytes, int pixels, float* out_pixels, int* out_label) {
  if (pixels <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DecodeSample: pixels must be > 0, got %d", pixels));
  }
  if (bytes.size() != static_cast<size_t>(pixels) + 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DecodeSample: encoded sample has %d bytes, expected %d (1 label + %d "
                        "pixels)",
                        bytes.size(), pixels + 1, pixels));
  }
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (b[0] >= kNumClasses) {
    return absl::DataLossError(
        absl::StrFormat("DecodeSample: label %d is not in [0, %d)", b[0], kNumClasses));
  }
  *out_label = b[0];
  for (int i = 0; i < pixels; ++i) out_pixels[i] = PixelToUnit(b[1 + i]);
  return absl::OkStatus();
}

InMemorySampleSource::InMemorySampleSource(const ImageDataset& dataset,
                                           std::vector<int64_t> global_indices)
    : dataset_(dataset), global_indices_(std::move(global_indices)) {}

absl::StatusOr<std::unique_ptr<InMemorySampleSource>> InMemorySampleSource::Create(
    const ImageDataset& dataset, std::vector<int64_t> global_indices) {
  for (size_t i = 0; i < global_indices.size(); ++i) {
    if (global_indices[i] < 0 || global_indices[i] >= dataset.size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("InMemorySampleSource: global index %d (local id %d) is outside the "
                          "data set's [0, %d)",
                          global_indices[i], i, dataset.size));
    }
  }
  return std::unique_ptr<InMemorySampleSource>(
      new InMemorySampleSource(dataset, std::move(global_indices)));
}

int64_t InMemorySampleSource::NumSamples() const {
  return static_cast<int64_t>(global_indices_.size());
}

absl::StatusOr<std::string_view> InMemorySampleSource::Read(int64_t local_id) {
  if (local_id < 0 || local_id >= NumSamples()) {
    return absl::OutOfRangeError(absl::StrFormat(
        "InMemorySampleSource: sample id %d is outside [0, %d)", local_id, NumSamples()));
  }
  EncodeInto(dataset_, global_indices_[local_id], &buffer_);
  return std::string_view(buffer_);
}

}  // namespace fedsched
