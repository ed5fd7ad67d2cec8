// Aggregator: folding compressed updates (docs/ARCHITECTURE.md "Compressed updates"). Each
// payload is decompressed straight into the running sum by compress::Fold, whose decoded values
// are the same float expressions as compress::Decode's, and whose combine is the dense fold's
// out = in + w * d: so the sums are those of the decoded update folded as float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/decode.h"
#include "common/compress/half.h"
#include "common/compress/model_match.h"
#include "common/status_macros.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/kernels.h"

namespace fedsched {
namespace {

namespace ai = aggregation_internal;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Largest |value| of `n` little-endian float32 values at `bytes`; +Inf if one is NaN or Inf.
double MaxAbsFloat32(const char* bytes, int64_t n) {
  uint32_t max_bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, bytes + 4 * i, sizeof b);
    max_bits = std::max(max_bits, b & 0x7fffffffu);
  }
  if (max_bits >= 0x7f800000u) return kInf;
  float f;
  std::memcpy(&f, &max_bits, sizeof f);
  return f;
}

// Largest |value| of `n` binary16 codes at `bytes`; +Inf if one is NaN or Inf. An integer max
// of the codes without their sign (binary16 orders like its magnitude's bits).
double MaxAbsHalf(const char* bytes, int64_t n) {
  uint16_t max_bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, sizeof h);
    max_bits = std::max<uint16_t>(max_bits, h & 0x7fffu);
  }
  if (max_bits >= 0x7c00u) return kInf;
  return compress::HalfToFloat(max_bits);
}

// An upper bound on max_i |decode(p)[i]| over every intermediate value of its decoding, for a
// payload that passed Validate; +Inf when a value is not finite (the fold then runs into the
// spare buffer and fails there). Cheap: QSGD and HADAMARD_1BIT read their scales only; FP16,
// FLOAT32 and TOPK their packed values (no decoding).
double PayloadBound(const v1::CompressedTensor& p) {
  const int64_t n = p.element_count();
  double max_scale = 0.0;
  for (float s : p.scales()) max_scale = std::max(max_scale, static_cast<double>(s));
  switch (p.format()) {
    case v1::CompressedTensor::FLOAT32:
      return MaxAbsFloat32(p.packed().data(), n);
    case v1::CompressedTensor::FP16:
      return MaxAbsHalf(p.packed().data(), n);
    case v1::CompressedTensor::TOPK:
      return MaxAbsFloat32(p.packed().data(), p.indices_size());
    case v1::CompressedTensor::QSGD:
      // q * (s * 2 / L) - s with q <= L: the product is at most 2 s (rounded).
      return 2.0 * max_scale;
    case v1::CompressedTensor::HADAMARD_1BIT:
      // The inverse rotation sums block_size terms +-S before its 1/sqrt(block_size).
      return static_cast<double>(p.block_size()) * max_scale;
    default:
      return kInf;
  }
}

}  // namespace

absl::StatusOr<std::vector<double>> Aggregator::CompressedSumSquares(
    const v1::CompressedModel& update) const {
  return CompressedSumSquares(update, shapes_);
}

absl::StatusOr<std::vector<double>> Aggregator::CompressedSumSquares(
    const v1::CompressedModel& update, const v1::Model& reference) {
  FEDSCHED_RETURN_IF_ERROR(compress::MatchCompressedModel(update, reference).status());
  std::vector<double> sums;
  sums.reserve(static_cast<size_t>(update.tensors_size()));
  std::vector<float> scratch;
  for (const v1::CompressedTensor& t : update.tensors()) {
    // Matched: element_count is the reference tensor's size.
    scratch.resize(static_cast<size_t>(t.element_count()));
    if (absl::Status s = compress::Decode(t, absl::MakeSpan(scratch)); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "': ", s.message()));
    }
    sums.push_back(ai::SumSquares(scratch.data(), static_cast<int64_t>(scratch.size())));
  }
  return sums;
}

absl::StatusOr<v1::Model> Aggregator::DecodeCompressed(const v1::CompressedModel& update) const {
  FEDSCHED_ASSIGN_OR_RETURN(const std::vector<int> index,
                            compress::MatchCompressedModel(update, shapes_));
  v1::Model model;
  for (size_t k = 0; k < index.size(); ++k) {
    const v1::CompressedTensor& t = update.tensors(static_cast<int>(k));
    const int i = index[k];
    v1::Tensor* out = model.add_tensors();
    out->set_name(layout_.name(i));
    out->mutable_shape()->Add(layout_.shape(i).begin(), layout_.shape(i).end());
    out->mutable_data()->Resize(static_cast<int>(layout_.size(i)), 0.0f);
    if (absl::Status s = compress::Decode(
            t, absl::MakeSpan(out->mutable_data()->mutable_data(), out->data_size()));
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name(), "': ", s.message()));
    }
  }
  return model;
}

absl::Status Aggregator::AccumulateCompressed(const v1::CompressedModel& update,
                                              int64_t num_examples, int64_t staleness,
                                              absl::Span<const double> sum_squares) {
  FEDSCHED_RETURN_IF_ERROR(PrepareCounts(num_examples, staleness, total_examples_));
  if (!is_averaging()) {
    // The robust rules keep a float32 copy of every update anyway.
    FEDSCHED_ASSIGN_OR_RETURN(const v1::Model decoded, DecodeCompressed(update));
    return AccumulateOne(decoded, num_examples, staleness, sum_squares);
  }
  FEDSCHED_ASSIGN_OR_RETURN(const std::vector<int> index,
                            compress::MatchCompressedModel(update, shapes_));
  // Clipping as Prepare does it, on the decompressed update's norm.
  double scale = StalenessWeight(staleness);
  if (config_.clip_update_norm() > 0.0) {
    std::vector<double> computed;
    if (static_cast<int>(sum_squares.size()) != update.tensors_size()) {
      FEDSCHED_ASSIGN_OR_RETURN(computed, CompressedSumSquares(update));
      sum_squares = computed;
    }
    double total = 0.0;
    for (int k = 0; k < update.tensors_size(); ++k) {
      const double ss = sum_squares[static_cast<size_t>(k)];
      if (!std::isfinite(ss)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", update.tensors(k).name(),
                                                       "': the compressed payload decodes to a "
                                                       "non-finite value"));
      }
      total += ss;
    }
    const double norm = std::sqrt(total);
    if (norm > config_.clip_update_norm()) scale *= config_.clip_update_norm() / norm;
  }
  const float w = static_cast<float>(static_cast<double>(num_examples) * scale);
  FEDSCHED_RETURN_IF_ERROR(FoldCompressed(update, index, w));
  Commit(num_examples);
  return absl::OkStatus();
}

absl::Status Aggregator::FoldCompressed(const v1::CompressedModel& update,
                                        const std::vector<int>& index, float w) {
  // The bound of the whole fold: the largest weighted value of any payload, with the margin of
  // FoldBound for the rounding of w * d and of the bound itself.
  double max_value = 0.0;
  for (const v1::CompressedTensor& t : update.tensors()) {
    max_value = std::max(max_value, PayloadBound(t));
  }
  const double bound = static_cast<double>(w) * max_value * (1.0 + 1e-5);
  const FoldTarget target = BeginFold(bound);
  // Tensor k (update order) is folded by the slice holding its first value: a payload decodes
  // from its start (QSGD blocks, rotations), so a tensor is never split between threads.
  const int slices = fold_slices();
  std::vector<int> owner(index.size());
  for (size_t k = 0; k < index.size(); ++k) {
    const int64_t offset = layout_.offset(index[k]);
    const auto it = std::upper_bound(slice_starts_.begin() + 1, slice_starts_.end() - 1, offset);
    owner[k] = static_cast<int>(it - slice_starts_.begin()) - 1;
  }
  std::vector<absl::Status> errors(index.size());
  const bool ok = ForEachSlice([&](int64_t begin, int64_t) {
    const int slice =
        static_cast<int>(std::lower_bound(slice_starts_.begin(), slice_starts_.end() - 1, begin) -
                         slice_starts_.begin());
    bool slice_ok = true;
    for (size_t k = 0; k < index.size(); ++k) {
      if (owner[k] != std::min(slice, slices - 1)) continue;
      const int64_t offset = layout_.offset(index[k]);
      const float* in = target.in == nullptr ? nullptr : target.in + offset;
      errors[k] = compress::Fold(update.tensors(static_cast<int>(k)), w, in,
                                 absl::MakeSpan(target.out + offset, layout_.size(index[k])));
      slice_ok &= errors[k].ok();
    }
    return slice_ok;
  });
  EndFold(target, ok, bound);
  if (ok) return absl::OkStatus();
  if (target.in_place) return PoisonedError();
  for (size_t k = 0; k < index.size(); ++k) {
    if (!errors[k].ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '",
                                                     update.tensors(static_cast<int>(k)).name(),
                                                     "' (weight ", w, "): ", errors[k].message()));
    }
  }
  return absl::InternalError("compressed fold failed, but no tensor reports an error");
}

}  // namespace fedsched
