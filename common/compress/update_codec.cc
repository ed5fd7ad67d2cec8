#include "common/compress/update_codec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "google/protobuf/io/coded_stream.h"

namespace fedsched::compress {
namespace {

using v1::CompressedTensor;

// Bytes of a protobuf varint holding `v`.
int64_t VarintBytes(uint64_t v) {
  return static_cast<int64_t>(google::protobuf::io::CodedOutputStream::VarintSize64(v));
}

// Bytes of a length-delimited field of `length` payload bytes (one-byte tag), 0 when empty
// (proto3 omits empty fields).
int64_t DelimitedBytes(int64_t length) {
  return length == 0 ? 0 : 1 + VarintBytes(static_cast<uint64_t>(length)) + length;
}

int64_t ElementCount(const v1::Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= std::max<int64_t>(d, 0);
  return n;
}

// Expected varint bytes of an index drawn uniformly from [0, n): the share of indices below
// 2^7, 2^14, ... times 1, 2, ... bytes.
double MeanIndexBytes(int64_t n) {
  if (n <= 0) return 0.0;
  double total = 0.0;
  int64_t covered = 0;
  for (int bytes = 1; covered < n; ++bytes) {
    const int64_t limit = bytes >= 9 ? n : std::min<int64_t>(n, int64_t{1} << (7 * bytes));
    total += static_cast<double>(limit - covered) * bytes;
    covered = limit;
  }
  return total / static_cast<double>(n);
}

// Serialized bytes of one compressed tensor of `t`'s name and shape under `spec`.
int64_t TensorPayloadBytes(const v1::Tensor& t, const CompressionSpec& spec) {
  const int64_t n = ElementCount(t);
  CompressedTensor header;  // the fixed fields; the variable-length ones are counted below
  header.set_name(t.name());
  *header.mutable_shape() = t.shape();
  header.set_format(spec.format);
  header.set_element_count(n);
  int64_t packed = 0;
  int64_t scales = 0;
  int64_t indices = 0;
  switch (spec.format) {
    case CompressedTensor::FP16:
      packed = 2 * n;
      break;
    case CompressedTensor::QSGD:
      header.set_bits(spec.bits);
      header.set_block_size(spec.block_size);
      packed = (n * spec.bits + 7) / 8;
      scales = (n + spec.block_size - 1) / spec.block_size;
      break;
    case CompressedTensor::HADAMARD_1BIT: {
      header.set_bits(1);
      header.set_block_size(spec.block_size);
      header.set_rotation_seed(~uint64_t{0});  // a random seed: count the longest varint
      scales = (n + spec.block_size - 1) / spec.block_size;
      packed = scales * spec.block_size / 8;
      break;
    }
    case CompressedTensor::TOPK: {
      const int64_t k = spec.TopKCount(n);
      packed = 4 * k;
      indices = static_cast<int64_t>(std::ceil(static_cast<double>(k) * MeanIndexBytes(n)));
      break;
    }
    default:
      packed = 4 * n;
      break;
  }
  const auto fixed = static_cast<int64_t>(header.ByteSizeLong());
  return fixed + DelimitedBytes(packed) + DelimitedBytes(4 * scales) + DelimitedBytes(indices);
}

}  // namespace

bool IsUncompressed(const v1::UpdateCompression& c) {
  return c.format() == CompressedTensor::FORMAT_UNSPECIFIED ||
         c.format() == CompressedTensor::FLOAT32;
}

absl::StatusOr<CompressionSpec> SpecFrom(const v1::UpdateCompression& c) {
  CompressionSpec spec;
  spec.format = IsUncompressed(c) ? CompressedTensor::FLOAT32 : c.format();
  if (c.bits() != 0) spec.bits = c.bits();
  if (c.block_size() != 0) spec.block_size = c.block_size();
  if (c.topk_fraction() != 0) spec.topk_fraction = c.topk_fraction();
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  if (spec.format == CompressedTensor::TOPK && !c.error_feedback()) {
    return absl::InvalidArgumentError(
        "TOPK needs error_feedback: top-k is biased, and without the residual the unsent "
        "coordinates are lost for good");
  }
  return spec;
}

std::string Describe(const v1::UpdateCompression& c) {
  absl::StatusOr<CompressionSpec> spec = SpecFrom(c);
  const CompressionSpec s = spec.ok() ? *spec : CompressionSpec{.format = c.format()};
  std::string name;
  switch (s.format) {
    case CompressedTensor::FP16:
      name = "fp16";
      break;
    case CompressedTensor::QSGD:
      name = absl::StrCat("qsgd", s.bits, "/", s.block_size);
      break;
    case CompressedTensor::TOPK:
      name = absl::StrCat("topk", s.topk_fraction);
      break;
    case CompressedTensor::HADAMARD_1BIT:
      name = absl::StrCat("hadamard1/", s.block_size);
      break;
    default:
      name = "float32";
      break;
  }
  if (c.error_feedback()) absl::StrAppend(&name, "+ef");
  return name;
}

absl::StatusOr<v1::CompressedModel> CompressModel(const v1::Model& delta,
                                                  const v1::UpdateCompression& c, ErrorFeedback* ef,
                                                  Rng& rng) {
  absl::StatusOr<CompressionSpec> spec = SpecFrom(c);
  if (!spec.ok()) return spec.status();
  v1::CompressedModel out;
  out.mutable_tensors()->Reserve(delta.tensors_size());
  for (const v1::Tensor& t : delta.tensors()) {
    const absl::Span<const float> values(t.data().data(), static_cast<size_t>(t.data_size()));
    absl::StatusOr<CompressedTensor> payload = (c.error_feedback() && ef != nullptr)
                                                   ? ef->Compress(t.name(), values, *spec, rng)
                                                   : Encode(values, *spec, rng);
    if (!payload.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name(), "': ", payload.status().message()));
    }
    payload->set_name(t.name());
    *payload->mutable_shape() = t.shape();
    *out.add_tensors() = *std::move(payload);
  }
  return out;
}

int64_t CompressedUpdateBytes(const v1::Model& model, const v1::UpdateCompression& c) {
  absl::StatusOr<CompressionSpec> spec = SpecFrom(c);
  int64_t total = 0;
  for (const v1::Tensor& t : model.tensors()) {
    int64_t bytes = 0;
    if (!spec.ok() || spec->format == CompressedTensor::FLOAT32) {
      v1::Tensor header;  // a float32 Model tensor: name, shape, then the packed values
      header.set_name(t.name());
      *header.mutable_shape() = t.shape();
      bytes = static_cast<int64_t>(header.ByteSizeLong()) + DelimitedBytes(4 * ElementCount(t));
    } else {
      bytes = TensorPayloadBytes(t, *spec);
    }
    total += 1 + VarintBytes(static_cast<uint64_t>(bytes)) + bytes;
  }
  return total;
}

}  // namespace fedsched::compress
