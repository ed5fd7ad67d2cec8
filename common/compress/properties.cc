#include "common/compress/properties.h"

namespace fedsched::compress {

CompressorProperties PropertiesOf(const CompressionSpec& spec) {
  CompressorProperties p;
  switch (spec.format) {
    case v1::CompressedTensor::FP16:
      p.secagg_reason = "fp16 codes are floating point; secure aggregation sums integers";
      p.bytes_per_element = 2.0;
      break;
    case v1::CompressedTensor::QSGD:
      p.unbiased = true;
      p.secagg_reason =
          "QSGD scales are per client and per block; masked codes of different scales do not add";
      p.bytes_per_element = spec.bits / 8.0 + 4.0 / spec.block_size;
      break;
    case v1::CompressedTensor::HADAMARD_1BIT:
      p.secagg_reason = "the 1-bit scales are per client and per block";
      p.bytes_per_element = 1.0 / 8.0 + 4.0 / spec.block_size;
      break;
    case v1::CompressedTensor::TOPK:
      p.wants_error_feedback = true;
      p.secagg_reason = "top-k index sets differ per client; masks cannot cancel across them";
      p.bytes_per_element = spec.topk_fraction * 7.0;
      break;
    default:  // FLOAT32: secure aggregation quantises it itself (secagg/).
      p.lossless = true;
      p.unbiased = true;
      p.composes_with_secagg = true;
      p.secagg_reason = "float32 is the uncompressed path secure aggregation already takes";
      break;
  }
  return p;
}

}  // namespace fedsched::compress
